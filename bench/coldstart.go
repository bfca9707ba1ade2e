package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/procgroup"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
)

// This file is the bench's cold-start step: it starts the server itself,
// repeatedly, and measures start → ready → first token, before the matrix.

// ColdStartSpec is bench.cold_start: the server's command, and how its
// start is judged.
type ColdStartSpec struct {
	// Command is the server's command line as a list (no shell): the
	// program, then its arguments. It runs in a process group of its own,
	// with the bench's environment, and the whole group is stopped.
	Command []string `yaml:"command"`
	// ReadyURL is polled until it answers 200 (vLLM's /health, ...). Empty:
	// no ready phase; the first-token request is then polled instead.
	ReadyURL string `yaml:"ready_url"`
	// Target names the configured target whose server the command starts:
	// the first-token request goes to it. Default: the only run target.
	Target string `yaml:"target"`
	// Repeats is the number of starts (default 3).
	Repeats int `yaml:"repeats"`
	// Timeout bounds one repeat, from the start to the first token
	// (default 10m).
	Timeout time.Duration `yaml:"timeout"`
	// PollInterval is the time between two polls of ReadyURL, and between
	// two first-token requests that failed (default 100ms): the readiness
	// is known to within it.
	PollInterval time.Duration `yaml:"poll_interval"`
	// StopTimeout is how long a stopped server has between SIGTERM and
	// SIGKILL (default 10s).
	StopTimeout time.Duration `yaml:"stop_timeout"`
}

// Defaults and limits of bench.cold_start.
const (
	DefaultColdStartRepeats      = 3
	DefaultColdStartTimeout      = 10 * time.Minute
	DefaultColdStartPollInterval = 100 * time.Millisecond
	DefaultColdStartStopTimeout  = 10 * time.Second
	MaxColdStartRepeats          = 100
	MaxColdStartTimeout          = 24 * time.Hour
	MaxColdStartArgs             = 256
	MinColdStartPollInterval     = 10 * time.Millisecond
	MaxColdStartPollInterval     = 10 * time.Second
	MaxColdStartStopTimeout      = 5 * time.Minute
	// coldStartPrompt and coldStartMaxTokens are the first-token request:
	// small, so that the figure is the server's start, not a generation.
	coldStartPrompt    = "Say a word."
	coldStartMaxTokens = 8
	// coldStartOutputTail bounds the server's output kept for a failed
	// repeat's note.
	coldStartOutputTail = 2048
	// readyPollTimeout bounds one poll of ready_url: a loading server may
	// accept and not answer.
	readyPollTimeout = 2 * time.Second
)

func (s *ColdStartSpec) applyDefaults(c *Config) {
	if s == nil {
		return
	}
	s.Repeats = cmp.Or(s.Repeats, DefaultColdStartRepeats)
	s.Timeout = cmp.Or(s.Timeout, DefaultColdStartTimeout)
	s.PollInterval = cmp.Or(s.PollInterval, DefaultColdStartPollInterval)
	s.StopTimeout = cmp.Or(s.StopTimeout, DefaultColdStartStopTimeout)
	if ts := c.RunTargets(); s.Target == "" && len(ts) == 1 {
		s.Target = ts[0].Name
	}
}

func (c *Config) validateColdStart(v *validator) {
	s := c.Bench.ColdStart
	if s == nil {
		return
	}
	p := path{"bench", "cold_start"}
	switch {
	case len(s.Command) == 0:
		v.add(p, "command", "is required: the server's program and its arguments, as a list")
	case len(s.Command) > MaxColdStartArgs:
		v.add(p, "command", fmt.Sprintf("%d arguments: at most %d", len(s.Command), MaxColdStartArgs))
	case s.Command[0] == "":
		v.addPath(append(p.clone(), "command", 0), "the program is empty")
	}
	for i, a := range s.Command {
		if len(a) > config.MaxStringBytes || strings.ContainsRune(a, 0) {
			v.addPath(append(p.clone(), "command", i), fmt.Sprintf("an argument of at most %d bytes (config.MaxStringBytes), without NUL", config.MaxStringBytes))
		}
	}
	if s.ReadyURL != "" {
		u, err := url.Parse(s.ReadyURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s.ReadyURL) > config.MaxStringBytes {
			v.add(p, "ready_url", fmt.Sprintf("%q is not an http or https URL", s.ReadyURL))
		}
	}
	run := map[string]bool{}
	for _, t := range c.RunTargets() {
		run[t.Name] = true
	}
	switch {
	case s.Target == "":
		v.add(p, "target", "is required when the run has several targets: the one whose server the command starts")
	case !run[s.Target]:
		v.add(p, "target", fmt.Sprintf("%q is not a target of the run", s.Target))
	}
	if s.Repeats < 1 || s.Repeats > MaxColdStartRepeats {
		v.add(p, "repeats", fmt.Sprintf("must be in [1, %d]", MaxColdStartRepeats))
	}
	if s.Timeout <= 0 || s.Timeout > MaxColdStartTimeout {
		v.add(p, "timeout", fmt.Sprintf("must be in (0, %s]", MaxColdStartTimeout))
	}
	if s.PollInterval < MinColdStartPollInterval || s.PollInterval > MaxColdStartPollInterval {
		v.add(p, "poll_interval", fmt.Sprintf("must be in [%s, %s]", MinColdStartPollInterval, MaxColdStartPollInterval))
	}
	if s.StopTimeout < 0 || s.StopTimeout > MaxColdStartStopTimeout {
		v.add(p, "stop_timeout", fmt.Sprintf("must be in [0, %s]", MaxColdStartStopTimeout))
	}
}

// coldStarter is the cold-start step of a run (bench.cold_start).
type coldStarter struct {
	spec   *ColdStartSpec
	logger *slog.Logger
}

// run runs the cold-start step. It returns the report and the function
// that stops the last repeat's server, which is left running for the rest
// of the run. A last repeat that failed fails the run: the rest of it
// needs that server.
func (c *coldStarter) run(ctx context.Context, targets []config.Target, cts []*client.Target) (*report.ColdStartReport, func(), error) {
	s := c.spec
	var t *config.Target
	var ct *client.Target
	for i := range targets {
		if targets[i].Name == s.Target {
			t, ct = &targets[i], cts[i]
		}
	}
	if t == nil {
		return nil, nil, fmt.Errorf("cold start: target %q is not run", s.Target)
	}
	rep := &report.ColdStartReport{Target: s.Target, Command: s.Command, ReadyURL: s.ReadyURL, RequestMaxTokens: coldStartMaxTokens}
	cl := client.New(client.Options{MaxConnsPerHost: 1})
	defer cl.Close()
	poller := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: readyPollTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer poller.CloseIdleConnections()
	tmpl := plan.Template{Timeout: t.Timeout}
	var stop func()
	for i := 0; i < s.Repeats; i++ {
		proc, r, err := c.repeat(ctx, i, poller, cl, ct, &tmpl)
		if err != nil {
			return nil, nil, err
		}
		rep.Repeats = append(rep.Repeats, r)
		if r.Error != "" {
			rep.Failed++
		}
		c.logger.Info("cold start repeat done", "repeat", i+1, "ready_seconds", float64(r.ReadySeconds),
			"first_token_seconds", float64(r.FirstTokenSeconds), "error", r.Error)
		if err := ctx.Err(); err != nil {
			proc.stop(ctx, s.StopTimeout)
			return nil, nil, fmt.Errorf("cold start: interrupted: %w", err)
		}
		if i < s.Repeats-1 || r.Error != "" {
			proc.stop(ctx, s.StopTimeout)
		} else {
			stop = func() { proc.stop(ctx, s.StopTimeout) }
		}
		if i == s.Repeats-1 && r.Error != "" {
			return nil, nil, fmt.Errorf("cold start: repeat %d of %d: %s", i+1, s.Repeats, r.Error)
		}
	}
	col := func(f func(*report.ColdStartRepeat) report.Num) report.Num {
		var v []float64
		for i := range rep.Repeats {
			if x := f(&rep.Repeats[i]); x.Valid() {
				v = append(v, float64(x))
			}
		}
		if len(v) == 0 {
			return report.NaN()
		}
		return report.Num(median(v))
	}
	rep.ReadySeconds = col(func(r *report.ColdStartRepeat) report.Num { return r.ReadySeconds })
	rep.FirstTokenSeconds = col(func(r *report.ColdStartRepeat) report.Num { return r.FirstTokenSeconds })
	rep.FirstRequestTTFTSeconds = col(func(r *report.ColdStartRepeat) report.Num { return r.FirstRequestTTFTSeconds })
	return rep, stop, nil
}

// repeat starts the server once and measures it. The process it
// returns is running (or has exited); the caller stops it. An error means
// the command could not be started at all.
func (c *coldStarter) repeat(ctx context.Context, index int, poller *http.Client, cl *client.Client, ct *client.Target, tmpl *plan.Template) (*serverProcess, report.ColdStartRepeat, error) {
	s := c.spec
	r := report.ColdStartRepeat{Index: index, ReadySeconds: report.NaN(), FirstTokenSeconds: report.NaN(), FirstRequestTTFTSeconds: report.NaN()}
	proc, err := startProcess(s.Command, c.logger)
	if err != nil {
		return nil, r, fmt.Errorf("cold start: %w", err)
	}
	r.Started = proc.started
	rctx, cancel := context.WithDeadline(ctx, proc.started.Add(s.Timeout))
	defer cancel()
	// The command's exit ends the repeat's polls and requests at once: a
	// server that exited will not get ready, whatever its children hold.
	go func() {
		select {
		case <-proc.exited:
			cancel()
		case <-rctx.Done():
		}
	}()
	fail := func(why string) (*serverProcess, report.ColdStartRepeat, error) {
		r.Error = why
		if tail := proc.outputTail(); tail != "" {
			r.Error += "; the server's last output: " + tail
		}
		return proc, r, nil
	}
	tick := time.NewTicker(s.PollInterval)
	defer tick.Stop()
	ready := s.ReadyURL == ""
	for {
		if !ready {
			if readyNow(rctx, poller, s.ReadyURL) {
				ready = true
				r.ReadySeconds = report.Num(time.Since(proc.started).Seconds())
			}
		}
		if ready {
			obs := &observation.Request{Scheduled: time.Now()}
			req := tmpl.KnownAnswer(coldStartPrompt, coldStartMaxTokens)
			req.RequestID = fmt.Sprintf("cold-start/%s-%d", ct.Name, r.Requests)
			cl.Do(rctx, ct, req, obs)
			r.Requests++
			if obs.Outcome == observation.Success {
				first := obs.FirstToken
				if first.IsZero() {
					first = obs.End // a success without content: its end is its first byte
				}
				r.FirstTokenSeconds = report.Num(first.Sub(proc.started).Seconds())
				r.FirstRequestTTFTSeconds = report.Num(first.Sub(obs.Scheduled).Seconds())
				return proc, r, nil
			}
		}
		phase := "ready"
		if ready {
			phase = "first token"
		}
		select {
		case <-proc.exited:
			return fail(fmt.Sprintf("the server command %s before %s", exitReason(proc.waitErr), phase))
		case <-rctx.Done():
			select {
			case <-proc.exited: // both at once: the exit is the reason
				return fail(fmt.Sprintf("the server command %s before %s", exitReason(proc.waitErr), phase))
			default:
			}
			if ctx.Err() != nil {
				return proc, r, nil // interrupted: the caller says so
			}
			return fail(fmt.Sprintf("no %s within the timeout of %s", phase, s.Timeout))
		case <-tick.C:
		}
	}
}

// readyNow polls the ready URL once: true on 200.
func readyNow(ctx context.Context, c *http.Client, u string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", "infer_exporter")
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// exitReason says how a command ended, from cmd.Wait's error.
func exitReason(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exited with status 0"
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	case errors.As(err, &ee):
		return fmt.Sprintf("ended (%v)", ee)
	}
	return fmt.Sprintf("ended (%v)", err)
}

// Bounds of the waits on a server command: none of them may hold the
// bench, whatever the command's processes do.
const (
	// coldStartKillWait bounds the wait for the leader once it was sent
	// SIGKILL: a process in an uninterruptible sleep (a hung mount) may
	// outlive it, and the bench then goes on and says so.
	coldStartKillWait = 5 * time.Second
	// coldStartOutputDrain is how long a failed repeat waits for the
	// server's last output to be read before it is reported: a child
	// that still holds the output open would hold it for ever.
	coldStartOutputDrain = 200 * time.Millisecond
	// coldStartMarkEnv is set, to a value unique to each start, in the
	// environment of the command, and so of every process it starts: stop
	// finds by it the descendants that left the process group (setsid, a
	// daemon's double fork), which no signal to the group reaches.
	coldStartMarkEnv = "INFER_EXPORTER_COLD_START_ID"
)

// serverProcess is a started server command.
type serverProcess struct {
	cmd     *exec.Cmd
	started time.Time
	output  *tailBuffer
	// out is the read end of the command's output; outDone is closed when
	// its copy into output has ended.
	out     *os.File
	outDone chan struct{}
	// mark is the command's coldStartMarkEnv value.
	mark    string
	exited  chan struct{} // closed when the process has exited; waitErr is then set
	waitErr error
	once    sync.Once
	logger  *slog.Logger
}

// startProcess starts argv in a process group of its own, its output kept
// in a bounded tail.
//
// The output goes through a pipe the bench owns rather than one os/exec
// copies from: cmd.Wait then returns as soon as the command exits, even
// when a child it left behind still holds the pipe open (`sleep 1000 &
// exit 3`), so that the exit is seen at once; the pipe is closed on the
// bench's side when the server is stopped. WaitDelay is set as well, so
// that Wait stays bounded should the output ever go through os/exec.
func startProcess(argv []string, logger *slog.Logger) (*serverProcess, error) {
	mark, err := newMark()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), coldStartMarkEnv+"="+mark)
	cmd.WaitDelay = coldStartKillWait
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p := &serverProcess{cmd: cmd, output: &tailBuffer{max: coldStartOutputTail}, out: r, outDone: make(chan struct{}),
		mark: mark, exited: make(chan struct{}), logger: logger}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Stdin = nil
	procgroup.Set(cmd)
	p.started = time.Now()
	err = cmd.Start()
	w.Close() // the command's copy is its own
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("starting %q: %w", argv[0], err)
	}
	go func() {
		_, _ = io.Copy(p.output, r)
		close(p.outDone)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// newMark is a start's coldStartMarkEnv value: this process and random
// bits, so that no other start, of this bench or another, has it.
func newMark() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cold start: %w", err)
	}
	return fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b[:])), nil
}

// outputTail is the server's last output, once what it wrote before it
// exited has been read (for at most coldStartOutputDrain).
func (p *serverProcess) outputTail() string {
	select {
	case <-p.outDone:
	case <-time.After(coldStartOutputDrain):
	}
	return p.output.String()
}

// stop ends the server's whole process group and the descendants that
// left it: SIGTERM, then SIGKILL after grace (at once when ctx ends) if
// the leader has not exited, and SIGKILL once more for what outlived it.
// Every wait is bounded: it returns within grace + coldStartKillWait (+ a
// little), whatever the processes do, and is safe to call more than once.
func (p *serverProcess) stop(ctx context.Context, grace time.Duration) {
	p.once.Do(func() {
		select {
		case <-p.exited:
		default:
			p.signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			select {
			case <-p.exited:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		p.signal(syscall.SIGKILL) // the leader if still there, and what it left behind
		kt := time.NewTimer(coldStartKillWait)
		select {
		case <-p.exited:
		case <-kt.C:
			if p.logger != nil {
				p.logger.Warn("cold start: the server command did not exit within its kill wait after SIGKILL; going on",
					"pid", p.cmd.Process.Pid, "wait", coldStartKillWait)
			}
		}
		kt.Stop()
		// Children that left the group, and what they forked meanwhile:
		// a few rounds, until none is found.
		for i := 0; i < 5 && p.signal(syscall.SIGKILL) > 0; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		p.out.Close() // ends the copy, even if something still holds the pipe
		<-p.outDone
	})
}

// signal sends sig to the command's process group and to every process
// that carries its mark (escaped descendants, where they can be found:
// procgroup.SignalMarked), and returns how many marked processes it signalled.
func (p *serverProcess) signal(sig syscall.Signal) int {
	if sig == syscall.SIGTERM {
		procgroup.Terminate(p.cmd)
	} else {
		procgroup.Kill(p.cmd)
	}
	return procgroup.SignalMarked(coldStartMarkEnv+"="+p.mark, sig)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(t.b), "?"))
}

// ColdStartCSVFile is the cold-start step's CSV, written beside the report
// when the run had one.
const ColdStartCSVFile = "cold_start.csv"

// ColdStartCSVHeader is its header: one row per repeat, then a "median" row.
var ColdStartCSVHeader = []string{"target", "repeat", "started", "ready_seconds", "first_token_seconds",
	"first_request_ttft_seconds", "requests", "error"}

// WriteColdStartCSV writes the cold-start step's rows; nothing when the run
// had none.
func WriteColdStartCSV(w io.Writer, r *report.Report) error {
	cs := r.ColdStart
	if cs == nil {
		return nil
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(ColdStartCSVHeader); err != nil {
		return err
	}
	num := func(n report.Num) string {
		if !n.Valid() {
			return ""
		}
		return report.FormatFloat(float64(n))
	}
	for _, x := range cs.Repeats {
		if err := cw.Write([]string{cs.Target, strconv.Itoa(x.Index + 1), x.Started.UTC().Format(time.RFC3339Nano),
			num(x.ReadySeconds), num(x.FirstTokenSeconds), num(x.FirstRequestTTFTSeconds), strconv.Itoa(x.Requests), x.Error}); err != nil {
			return err
		}
	}
	if err := cw.Write([]string{cs.Target, "median", "", num(cs.ReadySeconds), num(cs.FirstTokenSeconds),
		num(cs.FirstRequestTTFTSeconds), "", ""}); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// writeColdStartFile writes ColdStartCSVFile into dir when the run had a
// cold-start step.
func writeColdStartFile(dir string, r *report.Report) error {
	if r.ColdStart == nil {
		return nil
	}
	if err := writeFile(filepath.Join(dir, ColdStartCSVFile), func(w io.Writer) error { return WriteColdStartCSV(w, r) }); err != nil {
		return fmt.Errorf("%s: %w", ColdStartCSVFile, err)
	}
	return nil
}

// coldStartSummary is the summary line of the step, for the terminal.
func coldStartSummary(cs *report.ColdStartReport) string {
	f := func(n report.Num) string {
		if !n.Valid() {
			return "—"
		}
		return report.FormatSeconds(float64(n))
	}
	s := fmt.Sprintf("cold start (%s, median of %d): ready %s, first token %s (first request TTFT %s)",
		cs.Target, len(cs.Repeats)-cs.Failed, f(cs.ReadySeconds), f(cs.FirstTokenSeconds), f(cs.FirstRequestTTFTSeconds))
	if cs.Failed > 0 {
		s += fmt.Sprintf("; %d repeat(s) failed", cs.Failed)
	}
	return s
}
