package main

// The scaling scenarios measure the probe at the scale of a busy sidecar:
//
//	-scenario=scaling      chunks/s of one process at 1, 2, 4, ... cores
//	-scenario=memory       memory per in-flight stream
//	-scenario=concurrency  the most concurrent streams held with lag p99 under 10 ms
//	-scenario=fleet        series and scrape bytes of one exporter, and what
//	                       a fleet of them asks of Prometheus
//
// The first three run the exporter's own workload path (live.Build: the
// live infer_probe_* series, the stall scan, the scheduling-latency check)
// in a child process pinned to its cores, against the reference server
// (scaling_server.go) in another child pinned to the remaining cores, so
// that the client's CPU time is its own and the server is not the limit.

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// envScalingJob carries a child's job (JSON) to the scaling children.
const envScalingJob = "LOADHARNESS_SCALING_JOB"

// Scenario names: the four a user runs, and the two child roles the
// harness starts itself.
const (
	scenScaling     = "scaling"
	scenMemory      = "memory"
	scenConcurrency = "concurrency"
	scenFleet       = "fleet"
	roleServer      = "scaling.server"
	roleClient      = "scaling.client"
)

// scalingOptions are the scaling scenarios' flags.
type scalingOptions struct {
	cores        []int
	tokens       int
	step         time.Duration
	phase        string
	startPerCore float64
	factor       float64
	maxSteps     int
	workloads    int
	observer     string
	profileCores int
	profileDir   string
	transports   []string

	memStreams int
	memTokens  int
	memStep    time.Duration
	memRamp    time.Duration
	memCores   int

	concLevels []int
	concTokens int
	concStep   time.Duration
	concHold   time.Duration
	concCores  int

	fleetURL      string
	fleetSidecars int
	fleetInterval time.Duration
}

// scalingFlags registers the scaling scenarios' flags on fs.
func scalingFlags(fs *flag.FlagSet) *scalingOptions {
	o := &scalingOptions{cores: []int{1, 2, 4, 8, 16}, concLevels: []int{4000, 8000, 16000, 32000, 64000}, transports: []string{transportNetHTTP}}
	fs.Func("transports", "scaling, memory, concurrency: comma-separated client transports, each measured in turn: net/http, h1 (probe/client/h1), fasthttp (default net/http)", transportList(&o.transports))
	fs.Func("cores", "scaling: comma-separated client core counts (default 1,2,4,8,16)", intList(&o.cores, 1, 1024))
	fs.IntVar(&o.tokens, "scaling.tokens", 32, "scaling: output tokens per request (1 to 4096)")
	fs.DurationVar(&o.step, "scaling.step", 10*time.Millisecond, "scaling: the reference server's decode step (0: tokens back to back)")
	fs.StringVar(&o.phase, "server.phase", "aligned", "scaling, memory, concurrency: the reference server's streams emit on one shared step grid (aligned: one engine's batch) or each on its own (spread: many engines)")
	fs.Float64Var(&o.startPerCore, "scaling.start", 40000, "scaling: chunks/s per client core of the first offered load")
	fs.Float64Var(&o.factor, "scaling.factor", 1.25, "scaling: each next offered load is this many times the last (1.05 to 4)")
	fs.IntVar(&o.maxSteps, "scaling.steps", 8, "scaling: most offered loads per core count (1 to 30)")
	fs.IntVar(&o.workloads, "scaling.workloads", 1, "scaling: workloads sharing the load, each its own dispatcher and port (0: one per client core)")
	fs.StringVar(&o.observer, "scaling.observer", "series", "scaling: series (the live infer_probe_* metrics, as the exporter runs) or none (a counter only)")
	fs.IntVar(&o.profileCores, "scaling.profile.cores", 0, "scaling: at this core count, profile the client (CPU and mutex) at the first load it did not hold")
	fs.StringVar(&o.profileDir, "scaling.profile.dir", ".", "scaling, memory: folder for the profiles")

	fs.IntVar(&o.memStreams, "memory.streams", 4000, "memory: concurrent streams (1 to 200000)")
	fs.IntVar(&o.memTokens, "memory.tokens", 600, "memory: output tokens per stream (1 to 100000)")
	fs.DurationVar(&o.memStep, "memory.step", 100*time.Millisecond, "memory: the server's decode step")
	fs.DurationVar(&o.memRamp, "memory.ramp", 4*time.Second, "memory: the streams are sent evenly over this long")
	fs.IntVar(&o.memCores, "memory.cores", 8, "memory: client cores (the server gets the others)")

	fs.Func("concurrency.levels", "concurrency: comma-separated stream counts (default 4000,8000,16000,32000,64000)", intList(&o.concLevels, 1, 1_000_000))
	fs.IntVar(&o.concTokens, "concurrency.tokens", 100, "concurrency: output tokens per stream")
	fs.DurationVar(&o.concStep, "concurrency.step", 100*time.Millisecond, "concurrency: the server's decode step")
	fs.DurationVar(&o.concHold, "concurrency.hold", 5*time.Second, "concurrency: how long each level is held at its full count")
	fs.IntVar(&o.concCores, "concurrency.cores", 8, "concurrency: client cores (the server gets the others)")

	fs.StringVar(&o.fleetURL, "fleet.url", "http://127.0.0.1:9750/metrics", "fleet: the running exporter's /metrics")
	fs.IntVar(&o.fleetSidecars, "fleet.sidecars", 1000, "fleet: exporters in the fleet")
	fs.DurationVar(&o.fleetInterval, "fleet.interval", 15*time.Second, "fleet: Prometheus's scrape interval")
	return o
}

// intList parses a comma-separated list of integers in [lo, hi] into dst.
func intList(dst *[]int, lo, hi int) func(string) error {
	return func(v string) error {
		var out []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			if n < lo || n > hi {
				return fmt.Errorf("%d is not in [%d, %d]", n, lo, hi)
			}
			out = append(out, n)
		}
		*dst = out
		return nil
	}
}

// handles says whether scenario is one of the scaling scenarios or roles.
func (o *scalingOptions) handles(scenario string) bool {
	switch scenario {
	case scenScaling, scenMemory, scenConcurrency, scenFleet, roleServer, roleClient:
		return true
	}
	return false
}

func (o *scalingOptions) validate(d time.Duration) error {
	switch {
	case o.tokens < 1 || o.tokens > 4096:
		return errors.New("-scaling.tokens must be 1 to 4096")
	case o.step < 0 || o.memStep < 0 || o.concStep < 0:
		return errors.New("decode steps must not be negative")
	case o.startPerCore <= 0 || o.startPerCore > 1e8:
		return errors.New("-scaling.start must be in (0, 1e8]")
	case o.factor < 1.05 || o.factor > 4:
		return errors.New("-scaling.factor must be 1.05 to 4")
	case o.maxSteps < 1 || o.maxSteps > 30:
		return errors.New("-scaling.steps must be 1 to 30")
	case o.workloads < 0 || o.workloads > 1000:
		return errors.New("-scaling.workloads must be 0 to 1000")
	case o.phase != "aligned" && o.phase != "spread":
		return errors.New("-server.phase must be aligned or spread")
	case o.observer != "series" && o.observer != "none":
		return errors.New("-scaling.observer must be series or none")
	case o.memStreams < 1 || o.memStreams > 200_000:
		return errors.New("-memory.streams must be 1 to 200000")
	case o.memTokens < 1 || o.memTokens > 100_000 || o.concTokens < 1 || o.concTokens > 100_000:
		return errors.New("-memory.tokens and -concurrency.tokens must be 1 to 100000")
	case o.memRamp <= 0 || o.concHold <= 0:
		return errors.New("-memory.ramp and -concurrency.hold must be positive")
	case o.fleetSidecars < 1 || o.fleetSidecars > 1_000_000:
		return errors.New("-fleet.sidecars must be 1 to 1000000")
	case o.fleetInterval <= 0:
		return errors.New("-fleet.interval must be positive")
	case d <= 0 || d > time.Hour:
		return errors.New("-seconds must be in (0, 3600]")
	}
	return nil
}

// main runs one scaling scenario or child role and returns the exit code.
func (o *scalingOptions) main(scenario string, d time.Duration) int {
	if err := o.validate(d); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var err error
	switch scenario {
	case roleServer:
		err = serverChild(os.Getenv(envScalingJob))
	case roleClient:
		err = clientChild(os.Getenv(envScalingJob))
	case scenScaling:
		err = o.scaling(d)
	case scenMemory:
		err = o.memory()
	case scenConcurrency:
		err = o.concurrency()
	case scenFleet:
		err = o.fleet()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, scenario+":", err)
		return 1
	}
	return 0
}

// allowedCPUs lists the CPUs this process may run on, in order.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// splitCPUs gives the client the first n CPUs and the server the rest; when
// fewer than n+1 are allowed, both get all of them (shared says so).
func splitCPUs(cpus []int, n int) (client, server []int, shared bool) {
	if n >= len(cpus) {
		return cpus, cpus, true
	}
	return cpus[:n], cpus[n:], false
}

func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return ""
	}
	// Runs of consecutive CPUs as a-b, as taskset writes them.
	var parts []string
	start := cpus[0]
	for i := 1; i <= len(cpus); i++ {
		if i < len(cpus) && cpus[i] == cpus[i-1]+1 {
			continue
		}
		if end := cpus[i-1]; end > start {
			parts = append(parts, fmt.Sprintf("%d-%d", start, end))
		} else {
			parts = append(parts, strconv.Itoa(start))
		}
		if i < len(cpus) {
			start = cpus[i]
		}
	}
	return strings.Join(parts, ",")
}

// startPinned starts cmd on the given CPUs: the child is forked from a
// thread whose affinity is set to them, and every thread of the child
// inherits that mask (the Go runtime of the child then sizes GOMAXPROCS from
// it too). The thread stays locked and ends with its goroutine, so that its
// changed mask never runs anything else.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("pinning to CPUs %s: %w", cpuList(cpus), err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// child is a running child process of the scaling scenarios.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

// startChild runs this binary as role on cpus, with job as its JSON job and
// GOMAXPROCS set to the number of CPUs. The child ends when its standard
// input closes (stop) or its work is done.
func startChild(role string, cpus []int, job any) (*child, error) {
	js, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-scenario="+role)
	cmd.Env = append(os.Environ(), envScalingJob+"="+string(js), "GOMAXPROCS="+strconv.Itoa(len(cpus)))
	// CLIENT_GOGC and CLIENT_GODEBUG set the client's GOGC and GODEBUG
	// alone (the server's stay), to measure what the collector's pace does
	// to the schedule lag (GODEBUG=gctrace=1 logs each collection).
	if role == roleClient {
		for _, k := range []string{"GOGC", "GODEBUG"} {
			if v := os.Getenv("CLIENT_" + k); v != "" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := startPinned(cmd, cpus); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: stdin, stdout: bufio.NewReaderSize(stdout, 1<<20)}, nil
}

// line reads the child's next line of output (one JSON value).
func (c *child) line(v any) error {
	s, err := c.stdout.ReadString('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), v)
}

// stop closes the child's standard input and waits for it to end.
func (c *child) stop() error {
	_ = c.stdin.Close()
	return c.cmd.Wait()
}

// serverJob is the reference server child's job.
type serverJob struct {
	Step   time.Duration `json:"step"`
	Spread bool          `json:"spread"`
	Ports  int           `json:"ports"`
}

// serverHello is the server child's first line: its URLs.
type serverHello struct {
	URLs []string `json:"urls"`
	Err  string   `json:"err,omitempty"`
}

// startServer starts the reference server on cpus.
func startServer(cpus []int, step time.Duration, spread bool, ports int) (*child, []string, error) {
	c, err := startChild(roleServer, cpus, serverJob{Step: step, Spread: spread, Ports: max(ports, 1)})
	if err != nil {
		return nil, nil, err
	}
	var hello serverHello
	if err := c.line(&hello); err != nil || hello.Err != "" {
		_ = c.stop()
		return nil, nil, fmt.Errorf("reference server: %v %s", err, hello.Err)
	}
	return c, hello.URLs, nil
}

// serverChild serves until its standard input closes.
func serverChild(jobJSON string) error {
	var job serverJob
	if err := json.Unmarshal([]byte(jobJSON), &job); err != nil {
		return err
	}
	if job.Ports < 1 || job.Ports > 64 {
		return errors.New("reference server: 1 to 64 ports")
	}
	raiseFileLimit()
	s := &refServer{step: job.Step, spread: job.Spread}
	urls, err := s.listen(job.Ports)
	if err != nil {
		js, _ := json.Marshal(serverHello{Err: err.Error()})
		fmt.Println(string(js))
		return err
	}
	js, _ := json.Marshal(serverHello{URLs: urls})
	fmt.Println(string(js))
	ctx, cancel := contextUntilEOF(os.Stdin)
	defer cancel()
	s.serve(ctx)
	return nil
}

// raiseFileLimit lifts this process's open-file limit as far as it may go:
// every stream is a connection, and tens of thousands of them are measured.
func raiseFileLimit() {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	want := unix.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if lim.Max >= want.Max || unix.Setrlimit(unix.RLIMIT_NOFILE, &want) != nil {
		// Not privileged: the soft limit up to the hard one.
		lim.Cur = lim.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
}

// fileLimit is the open-file limit now in force.
func fileLimit() uint64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// scaling runs the core sweep: for each core count, offered loads rising by
// -scaling.factor from -scaling.start chunks/s per core until one is not
// held, each for d.
func (o *scalingOptions) scaling(d time.Duration) error {
	cpus, err := allowedCPUs()
	if err != nil {
		return err
	}
	raiseFileLimit()
	fmt.Printf("## scaling: chunks/s of one process by client cores, %d-token streams, a decode step every %s (%s), %s per load\n\n", o.tokens, o.step, o.phase, d)
	fmt.Printf("CPUs allowed: %d (%s); open-file limit %d; observer: %s; workloads: %s. A load is held when none failed, at most 1%% were dropped, and both the schedule lag p99 and the goroutine scheduling latency p99 are under 10 ms.\n\n",
		len(cpus), cpuList(cpus), fileLimit(), o.observer, workloadsName(o.workloads))
	fmt.Println("Token timing: each token's read instant less its decode step's instant on the server's grid (aligned steps only, modulo the step), and each inter-token gap less the step, both p50 / p99 over the window's tokens.")
	fmt.Println()
	fmt.Println("| transport | client cores | server cores | offered chunks/s | delivered chunks/s | sent / scheduled | lag p50 / p99 | sched. latency p99 | degraded | client CPU per chunk | client cores busy | server cores busy | server late / accepts refused | token read − step p50 / p99 | ITL − step p50 / p99 | held |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	var best []scalingStep
	for _, tr := range o.transports {
		for _, n := range o.cores {
			if n > len(cpus) {
				fmt.Printf("| %s | %d | | skipped: only %d CPUs | | | | | | | | | | | | |\n", tr, n, len(cpus))
				continue
			}
			clientCPUs, serverCPUs, shared := splitCPUs(cpus, n)
			w := o.workloads
			if w == 0 {
				w = n
			}
			srv, urls, err := startServer(serverCPUs, o.step, o.phase == "spread", w)
			if err != nil {
				return err
			}
			job := clientJob{
				Mode: modeScaling, URLs: urls, Cores: n, ServerCores: len(serverCPUs), SharedCores: shared,
				Tokens: o.tokens, Seconds: d.Seconds(), Workloads: w, Observer: o.observer,
				StartChunks: o.startPerCore * float64(n), Factor: o.factor, MaxSteps: o.maxSteps,
				Transport: tr, Step: o.step, Aligned: o.phase == "aligned",
			}
			if n == o.profileCores {
				job.Profile = fmt.Sprintf("%s/scaling-%s-%dcores", strings.TrimRight(o.profileDir, "/"), fileSafe(tr), n)
			}
			cl, err := startChild(roleClient, clientCPUs, job)
			if err != nil {
				_ = srv.stop()
				return err
			}
			var top *scalingStep
			for {
				var st scalingStep
				if err := cl.line(&st); err != nil {
					if !errors.Is(err, io.EOF) {
						fmt.Fprintln(os.Stderr, "client:", err)
					}
					break
				}
				if st.Err != "" {
					fmt.Printf("| %s | %d | %d | stopped: %s | | | | | | | | | | | | |\n", tr, n, len(serverCPUs), st.Err)
					break
				}
				fmt.Println(st.row())
				if st.Held() && !st.Profiled && (top == nil || st.ChunksPerSecond() > top.ChunksPerSecond()) {
					top = &st
				}
			}
			_ = cl.stop()
			_ = srv.stop()
			if top != nil {
				best = append(best, *top)
			}
		}
	}
	fmt.Println()
	fmt.Println("Highest load held at each core count:")
	fmt.Println()
	fmt.Println("| transport | client cores | chunks/s held | req/s | × one core | per core | client CPU per chunk | token read − step p50 / p99 | ITL − step p50 / p99 |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for i, b := range best {
		first := i
		for first > 0 && best[first-1].Transport == b.Transport {
			first--
		}
		one := best[first].ChunksPerSecond() / float64(best[first].Cores)
		fmt.Printf("| %s | %d | %.0f | %.0f | %.2f | %.0f | %s | %s | %s |\n", b.Transport, b.Cores, b.ChunksPerSecond(), b.SentPerSecond(),
			b.ChunksPerSecond()/one, b.ChunksPerSecond()/float64(b.Cores), us(b.CPUPerChunk()), b.delayCell(), b.gapCell())
	}
	fmt.Println()
	return nil
}

func workloadsName(w int) string {
	if w == 0 {
		return "one per client core"
	}
	return strconv.Itoa(w)
}

// row is the step's line of the scaling table.
func (s *scalingStep) row() string {
	server := fmt.Sprint(s.ServerCores)
	if s.SharedCores {
		server += " (shared)"
	}
	held := "yes"
	if !s.Held() {
		held = "no"
	}
	if s.Profiled {
		held += " (profiled)"
	}
	wall := s.WallSeconds
	return fmt.Sprintf("| %s | %d | %s | %.0f | %.0f | %d / %d | %s / %s | %s | %v | %s | %.2f | %.2f | %.2f%% / %d | %s | %s | %s |",
		s.Transport, s.Cores, server, s.OfferedChunks, s.ChunksPerSecond(), s.Sent, s.Scheduled,
		ms(time.Duration(s.LagP50*1e9)), ms(time.Duration(s.LagP99*1e9)), ms(time.Duration(s.SchedP99*1e9)),
		s.Degraded, us(s.CPUPerChunk()), s.CPUSeconds/wall, s.ServerCPUSeconds/wall,
		100*float64(s.ServerLate)/float64(max(s.ServerChunks, 1)), s.ServerRefused, s.delayCell(), s.gapCell(), held)
}

// delayCell and gapCell are the token timing columns.
func (s *scalingStep) delayCell() string {
	if s.DelayP99 < 0 {
		return "-"
	}
	return ms(time.Duration(s.DelayP50*1e9)) + " / " + ms(time.Duration(s.DelayP99*1e9))
}

func (s *scalingStep) gapCell() string {
	if s.GapP99 < 0 {
		return "-"
	}
	return ms(time.Duration(s.GapP50*1e9)) + " / " + ms(time.Duration(s.GapP99*1e9))
}

// fileSafe is a transport's name in a file name.
func fileSafe(s string) string { return strings.ReplaceAll(s, "/", "") }

// quantileSeconds is q over ds, in seconds.
func quantileSeconds(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))].Seconds()
}
