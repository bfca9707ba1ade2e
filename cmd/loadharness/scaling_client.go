package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Modes of the client child.
const (
	modeScaling = "scaling"
	modeStreams = "streams"
)

// clientJob is the client child's job.
type clientJob struct {
	Mode        string   `json:"mode"`
	URLs        []string `json:"urls"`
	Cores       int      `json:"cores"`
	ServerCores int      `json:"server_cores"`
	SharedCores bool     `json:"shared_cores"`
	Tokens      int      `json:"tokens"`
	Workloads   int      `json:"workloads"`
	Observer    string   `json:"observer"`
	Profile     string   `json:"profile,omitempty"` // path prefix of the profiles; empty: none
	// Transport is the workload clients' transport (transport.go).
	Transport string `json:"transport"`
	// Step and Aligned are the reference server's decode step and
	// whether its streams share one grid: the token timing is measured
	// against them.
	Step    time.Duration `json:"step"`
	Aligned bool          `json:"aligned"`

	// The scaling search: offered loads from StartChunks, times Factor
	// each step, each for Seconds, until one is not held.
	Seconds     float64 `json:"seconds"`
	StartChunks float64 `json:"start_chunks"`
	Factor      float64 `json:"factor"`
	MaxSteps    int     `json:"max_steps"`

	// Streams: each plan in order, stopping at the first not held when
	// StopAtFirstFailure.
	Plans              []streamsPlan `json:"plans"`
	StopAtFirstFailure bool          `json:"stop_at_first_failure"`
}

// clientChild runs a client job and writes one JSON line per measured load.
func clientChild(jobJSON string) error {
	var job clientJob
	if err := json.Unmarshal([]byte(jobJSON), &job); err != nil {
		return err
	}
	if len(job.URLs) == 0 || job.Workloads < 1 || job.Tokens < 1 {
		return errors.New("client job: no URLs, workloads or tokens")
	}
	raiseFileLimit()
	for _, p := range job.Plans {
		if p.HeapProfile {
			// A sample every 4 KiB instead of every 512 KiB: the
			// per-stream objects are a few KiB each, and the profile must
			// rank them. Set before anything of the run is allocated.
			runtime.MemProfileRate = 4096
		}
	}
	ctx, cancel := contextUntilEOF(os.Stdin)
	defer cancel()
	enc := json.NewEncoder(os.Stdout)
	switch job.Mode {
	case modeScaling:
		return job.scalingSearch(ctx, enc)
	case modeStreams:
		for _, p := range job.Plans {
			res, err := job.streams(ctx, p)
			if err != nil {
				res.Err = err.Error()
			}
			if err := enc.Encode(res); err != nil {
				return err
			}
			if res.Err != "" || (job.StopAtFirstFailure && !res.Held) || ctx.Err() != nil {
				return nil
			}
		}
		return nil
	}
	return fmt.Errorf("client job: mode %q", job.Mode)
}

// contextUntilEOF is done when r reaches its end: the parent closed the
// child's standard input, or died.
func contextUntilEOF(r io.Reader) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, r)
		cancel()
	}()
	return ctx, cancel
}

// scalingStep is one offered load of the scaling search.
type scalingStep struct {
	Transport                     string
	Cores, ServerCores, Workloads int
	SharedCores                   bool
	// Token timing over the window (seconds; -1: not measured): each
	// token's read less its step's instant (aligned steps, modulo the
	// step), each gap between two tokens less the step.
	DelayP50, DelayP99, GapP50, GapP99 float64
	Observer                           string
	OfferedChunks, Rate                float64
	Tokens                             int
	Seconds, WallSeconds               float64
	Scheduled, Sent, Dropped           int
	Failed, Chunks                     int
	CPUSeconds                         float64
	LagP50, LagP99, SchedP99           float64
	Degraded                           bool
	ServerCPUSeconds                   float64
	ServerChunks, ServerLate           uint64
	ServerRefused                      uint64 // accepts refused for want of file descriptors
	FileLimit                          uint64 // the client's open-file limit
	Profiled                           bool
	Err                                string `json:",omitempty"`
}

// Held says whether the load was carried as configured: nothing failed,
// at most 1% dropped, and not degraded by the exporter's own rule.
func (s *scalingStep) Held() bool {
	return s.Failed == 0 && float64(s.Dropped) <= 0.01*float64(max(s.Scheduled, 1)) && !s.Degraded && s.Sent > 0
}

// ChunksPerSecond is the content events of the requests sent in the run
// over its scheduled duration.
func (s *scalingStep) ChunksPerSecond() float64 { return float64(s.Chunks) / s.Seconds }

// SentPerSecond is the requests sent over the scheduled duration.
func (s *scalingStep) SentPerSecond() float64 { return float64(s.Sent) / s.Seconds }

// CPUPerChunk is the client process's CPU time over the chunks it read.
func (s *scalingStep) CPUPerChunk() time.Duration {
	return time.Duration(s.CPUSeconds * 1e9 / float64(max(s.Chunks, 1)))
}

func (j *clientJob) scalingSearch(ctx context.Context, enc *json.Encoder) error {
	d := time.Duration(j.Seconds * float64(time.Second))
	rate := j.StartChunks / float64(j.Tokens)
	for range j.MaxSteps {
		st, err := j.load(ctx, rate, d, "")
		if err != nil {
			st.Err = err.Error()
		}
		if err := enc.Encode(st); err != nil {
			return err
		}
		if st.Err != "" || ctx.Err() != nil {
			return nil
		}
		if !st.Held() {
			break
		}
		rate *= j.Factor
	}
	if j.Profile == "" {
		return nil
	}
	// The profile is of the first load not held (or the last one offered):
	// where the time goes when the process is at its limit.
	st, err := j.load(ctx, rate, d, j.Profile)
	if err != nil {
		st.Err = err.Error()
	}
	st.Profiled = true
	return enc.Encode(st)
}

// tally hears every request of a run and counts those scheduled inside
// its window [from, to) (all when the window is zero); its per-request work
// is a mutex and an append, never a shared counter per chunk (which would
// itself make the cores contend).
type tally struct {
	from, to                      time.Time
	timing                        *tokenTiming // nil: not measured
	mu                            sync.Mutex
	lags                          []time.Duration
	sent, dropped, failed, chunks int
	inFlight                      atomic.Int64
}

func (t *tally) counts(o *observation.Request) bool {
	return t.from.IsZero() || (!o.Scheduled.Before(t.from) && o.Scheduled.Before(t.to))
}

func (t *tally) Sent(o *observation.Request) {
	if !t.counts(o) {
		return
	}
	lag, ok := o.ScheduleLag()
	t.mu.Lock()
	t.sent++
	if ok {
		t.lags = append(t.lags, lag)
	}
	t.mu.Unlock()
}

// FirstToken is heard with Token for the first token too.
func (t *tally) FirstToken(*observation.Request) {}

func (t *tally) Token(o *observation.Request) {
	if t.timing == nil || !t.counts(o) {
		return
	}
	t.timing.token(o)
}

func (t *tally) Done(o *observation.Request) {
	if !t.counts(o) {
		return
	}
	t.mu.Lock()
	// A stream cancelled at the run's end (the concurrency levels cut
	// their streams short) did not fail.
	if o.Outcome != observation.Success && o.Outcome != observation.Cancelled {
		t.failed++
	}
	t.chunks += o.ContentEvents
	t.mu.Unlock()
}

func (t *tally) Dropped(o *observation.Request) {
	if !t.counts(o) {
		return
	}
	t.mu.Lock()
	t.dropped++
	t.mu.Unlock()
}

// tap is a runner's Monitor: it hands everything to the workload's own
// monitor (the live series; none when nil) and keeps the in-flight count.
type tap struct {
	inner workload.Monitor
	t     *tally
}

func (m tap) Limits(n int, r float64, c bool) {
	if m.inner != nil {
		m.inner.Limits(n, r, c)
	}
}

func (m tap) Rate(r float64) {
	if m.inner != nil {
		m.inner.Rate(r)
	}
}

func (m tap) InFlight(delta int) {
	m.t.inFlight.Add(int64(delta))
	if m.inner != nil {
		m.inner.InFlight(delta)
	}
}

func (m tap) Clamped(n uint64) {
	if m.inner != nil {
		m.inner.Clamped(n)
	}
}

func (m tap) Lag(p99 float64, degraded bool) {
	if m.inner != nil {
		m.inner.Lag(p99, degraded)
	}
}

func (m tap) Check(r string) {
	if m.inner != nil {
		m.inner.Check(r)
	}
}

func (m tap) State(s string) {
	if m.inner != nil {
		m.inner.State(s)
	}
}

func (m tap) Stalls(s workload.StallScan) {
	if m.inner != nil {
		m.inner.Stalls(s)
	}
}

// degraded is the exporter's rule (probe/workload's monitor) applied to a
// window: schedule lag p99 or scheduling latency p99 above the threshold.
func degraded(lagP99, schedP99 float64) bool {
	limit := plan.DefaultDegradedLag.Seconds()
	return lagP99 > limit || schedP99 > limit
}

// setup is one run's runners, built by the exporter's own live.Build
// from a configuration, so that the client, the live series, the stall
// scan and the saturation check are the ones the exporter runs.
type setup struct {
	runners []*workload.Runner
	close   func()
	reg     *prometheus.Registry
	sat     *workload.SchedulingLatency
	t       *tally
}

// build makes the runners of a total rate over the job's workloads, each
// sending for duration, with room for maxInFlight requests in all.
func (j *clientJob) build(ctx context.Context, rate float64, tokens int, duration time.Duration, maxInFlight int, satWindow time.Duration) (*setup, error) {
	var b strings.Builder
	b.WriteString("targets:\n")
	for i, u := range j.URLs {
		fmt.Fprintf(&b, "  - {name: ref%d, url: %q, model: ref-model, flavor: openai-chat, timeout: 10m}\n", i, u)
	}
	b.WriteString("workloads:\n")
	perInFlight := max(1, (maxInFlight+j.Workloads-1)/j.Workloads)
	for i := range j.Workloads {
		fmt.Fprintf(&b, `  - name: w%d
    target: ref%d
    arrival: {process: constant, rate: %g}
    max_in_flight: %d
    duration: %s
    prompt: {input_tokens: {dist: fixed, mean: 64}, output_tokens: {dist: fixed, mean: %d}}
    sampling: {ignore_eos: true}
`, i, i%len(j.URLs), rate/float64(j.Workloads), perInFlight, duration, tokens)
	}
	cfg, err := config.Parse([]byte(b.String()), "<scaling>")
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	sat := workload.NewSchedulingLatency(nil, satWindow)
	runners, clients, err := live.Build(ctx, cfg, live.NewMetrics(reg), live.Options{
		DegradedLag: plan.DefaultDegradedLag, DegradedWindow: duration + 10*time.Second, Saturation: sat,
		ClientOptions: clientOptions(j.Transport),
	}, slog.New(slog.DiscardHandler))
	closeAll := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	t := &tally{}
	if j.Step > 0 {
		t.timing = &tokenTiming{step: j.Step}
	}
	for _, r := range runners {
		if j.Observer == "none" {
			r.Observer, r.Monitor = t, tap{t: t}
		} else {
			r.Observer, r.Monitor = workload.Observers{r.Observer, t}, tap{inner: r.Monitor, t: t}
		}
	}
	return &setup{runners: runners, close: closeAll, reg: reg, sat: sat, t: t}, nil
}

// run runs every runner until they end or ctx is done.
func (s *setup) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range s.runners {
		wg.Go(func() { r.Run(ctx) })
	}
	wg.Wait()
}

// loadWarmup is how long each load runs before its window: the
// connections are dialed and the pool is full when it opens, as in a
// workload that has been running.
const loadWarmup = time.Second

// load runs one offered load of rate req/s: loadWarmup, then the window of
// d that is measured (the requests scheduled in it, and the process's CPU
// from its start until they all ended). With profile set, the window runs
// under the CPU and mutex profilers, written to profile+".cpu.pprof" and
// profile+".mutex.pprof".
func (j *clientJob) load(ctx context.Context, rate float64, d time.Duration, profile string) (scalingStep, error) {
	st := scalingStep{Transport: j.Transport, Cores: j.Cores, ServerCores: j.ServerCores, Workloads: j.Workloads, SharedCores: j.SharedCores,
		Observer: j.Observer, OfferedChunks: rate * float64(j.Tokens), Rate: rate, Tokens: j.Tokens, Seconds: d.Seconds()}
	// Room for every request of two seconds in flight: a stream lasts its
	// tokens' decode steps, so the cap never drops what the load sends.
	s, err := j.build(ctx, rate, j.Tokens, loadWarmup+d, int(rate*2)+1000, d)
	if err != nil {
		return st, err
	}
	defer s.close()
	satCtx, stopSat := context.WithCancel(ctx)
	defer stopSat()
	go s.sat.Run(satCtx)
	runtime.GC()
	start := time.Now()
	s.t.from, s.t.to = start.Add(loadWarmup), start.Add(loadWarmup+d)
	runCtx, cancel := context.WithTimeout(ctx, loadWarmup+d+time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(runCtx)
	}()
	select {
	case <-time.After(time.Until(s.t.from)):
	case <-done:
		return st, errors.New("the run ended before its window")
	}
	srv0, err := serverStats(j.URLs)
	if err != nil {
		return st, err
	}
	var stopProfile func() error
	if profile != "" {
		if stopProfile, err = startProfiles(profile); err != nil {
			return st, err
		}
	}
	cpu0, wall0 := cpuTime(), time.Now()
	select {
	case <-time.After(time.Until(s.t.to)):
	case <-done:
	}
	// The scheduling latency of the window: read at its end, over d.
	st.SchedP99 = s.sat.P99()
	<-done
	st.CPUSeconds, st.WallSeconds = (cpuTime() - cpu0).Seconds(), time.Since(wall0).Seconds()
	if stopProfile != nil {
		if err := stopProfile(); err != nil {
			return st, err
		}
	}
	srv1, err := serverStats(j.URLs)
	if err != nil {
		return st, err
	}
	st.ServerCPUSeconds = float64(srv1.CPUNs-srv0.CPUNs) / 1e9
	st.ServerChunks, st.ServerLate = srv1.Chunks-srv0.Chunks, srv1.Late-srv0.Late
	st.ServerRefused, st.FileLimit = srv1.Refused-srv0.Refused, fileLimit()
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	st.Sent, st.Dropped, st.Failed, st.Chunks = t.sent, t.dropped, t.failed, t.chunks
	st.Scheduled = t.sent + t.dropped
	st.LagP50, st.LagP99 = quantileSeconds(t.lags, .5), quantileSeconds(t.lags, .99)
	st.Degraded = degraded(st.LagP99, st.SchedP99)
	st.DelayP50, st.DelayP99, st.GapP50, st.GapP99 = -1, -1, -1, -1
	if tt := t.timing; tt != nil {
		if j.Aligned {
			st.DelayP50, st.DelayP99 = tt.delay.quantile(.5), tt.delay.quantile(.99)
		}
		st.GapP50, st.GapP99 = tt.gap.quantile(.5), tt.gap.quantile(.99)
	}
	return st, nil
}

// startProfiles starts the CPU profiler and mutex sampling; the returned
// function stops them and writes both files.
func startProfiles(prefix string) (func() error, error) {
	f, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	// One contention event in 20 is recorded: enough to rank the locks
	// without slowing them.
	prev := runtime.SetMutexProfileFraction(20)
	return func() error {
		pprof.StopCPUProfile()
		runtime.SetMutexProfileFraction(prev)
		if err := f.Close(); err != nil {
			return err
		}
		return writeProfile("mutex", prefix+".mutex.pprof")
	}, nil
}

// serverStats sums the reference servers' own accounts (one process serves
// every URL, so its CPU time is read once).
func serverStats(urls []string) (refStats, error) {
	resp, err := http.Get(strings.TrimRight(urls[0], "/") + "/stats")
	if err != nil {
		return refStats{}, err
	}
	defer resp.Body.Close()
	var s refStats
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&s); err != nil {
		return refStats{}, err
	}
	return s, nil
}

// streamsPlan is one measured set of concurrent streams: Rate req/s sent
// for Duration, the memory read at each of Probes (from the start), the
// streamed tokens counted between CountFrom and CountTo, the run cancelled
// at CancelAt (the streams still in flight are not waited for).
type streamsPlan struct {
	Streams     int           `json:"streams"`
	Rate        float64       `json:"rate"`
	Duration    time.Duration `json:"duration"`
	Probes      []time.Duration
	CountFrom   time.Duration `json:"count_from"`
	CountTo     time.Duration `json:"count_to"`
	CancelAt    time.Duration `json:"cancel_at"`
	SatWindow   time.Duration `json:"sat_window"`
	HeapProfile bool          `json:"heap_profile"`
}

// memProbe is the process's memory at one instant of a streams run, less
// what it held before the run, with the requests then in flight.
type memProbe struct {
	AtSeconds   float64
	InFlight    int64
	Goroutines  int64
	HeapObjects int64 // live heap objects after a collection
	Stacks      int64 // goroutine stacks
	RSS         int64 // resident set size
}

// streamsResult is one streams plan's outcome.
type streamsResult struct {
	Plan                  streamsPlan
	Cores, ServerCores    int
	Sent, Dropped, Failed int
	LagP50, LagP99        float64
	SchedP99              float64
	Degraded              bool
	ChunksPerSecond       float64 // streamed tokens between CountFrom and CountTo
	CPUCores              float64 // client CPU over the count window, in cores
	ServerCPUCores        float64
	ServerLate            float64 // fraction of the server's events late in the window
	FileLimit             uint64
	Probes                []memProbe
	Held                  bool
	Err                   string `json:",omitempty"`
}

func (j *clientJob) streams(ctx context.Context, p streamsPlan) (streamsResult, error) {
	res := streamsResult{Plan: p, Cores: j.Cores, ServerCores: j.ServerCores, FileLimit: fileLimit()}
	s, err := j.build(ctx, p.Rate, j.Tokens, p.Duration, p.Streams+p.Streams/10+100, p.SatWindow)
	if err != nil {
		return res, err
	}
	defer s.close()
	satCtx, stopSat := context.WithCancel(ctx)
	defer stopSat()
	go s.sat.Run(satCtx)
	base := readMemory()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		s.run(runCtx)
	}()
	wait := func(at time.Duration) bool {
		select {
		case <-time.After(time.Until(start.Add(at))):
			return true
		case <-done:
			return false
		case <-ctx.Done():
			return false
		}
	}
	type mark struct {
		cpu    time.Duration
		srv    refStats
		tokens float64
		at     time.Time
	}
	take := func() (mark, error) {
		srv, err := serverStats(j.URLs)
		return mark{cpu: cpuTime(), srv: srv, tokens: streamedTokens(s.reg), at: time.Now()}, err
	}
	events := append([]time.Duration(nil), p.Probes...)
	var m0, m1 mark
	for _, at := range mergeInstants(events, p.CountFrom, p.CountTo) {
		if !wait(at) {
			break
		}
		if at == p.CountFrom {
			if m0, err = take(); err != nil {
				return res, err
			}
		}
		if at == p.CountTo {
			if m1, err = take(); err != nil {
				return res, err
			}
		}
		for i, probe := range p.Probes {
			if probe != at {
				continue
			}
			m := readMemory()
			res.Probes = append(res.Probes, memProbe{
				AtSeconds: at.Seconds(), InFlight: s.t.inFlight.Load(), Goroutines: m.Goroutines - base.Goroutines,
				HeapObjects: m.HeapObjects - base.HeapObjects, Stacks: m.Stacks - base.Stacks, RSS: m.RSS - base.RSS,
			})
			if p.HeapProfile && i == len(p.Probes)-1 && j.Profile != "" {
				if err := writeProfile("heap", fmt.Sprintf("%s-%d.heap.pprof", j.Profile, p.Streams)); err != nil {
					return res, err
				}
			}
		}
	}
	if !m1.at.IsZero() && !m0.at.IsZero() {
		wall := m1.at.Sub(m0.at).Seconds()
		res.ChunksPerSecond = (m1.tokens - m0.tokens) / wall
		res.CPUCores = (m1.cpu - m0.cpu).Seconds() / wall
		res.ServerCPUCores = float64(m1.srv.CPUNs-m0.srv.CPUNs) / 1e9 / wall
		res.ServerLate = float64(m1.srv.Late-m0.srv.Late) / float64(max(m1.srv.Chunks-m0.srv.Chunks, 1))
	}
	// Read before the cancellation: the streams cut short are the run's
	// end, not a verdict on it.
	res.SchedP99 = s.sat.P99()
	if p.CancelAt > 0 {
		wait(p.CancelAt)
		cancel()
	}
	<-done
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	res.Sent, res.Dropped, res.Failed = t.sent, t.dropped, t.failed
	res.LagP50, res.LagP99 = quantileSeconds(t.lags, .5), quantileSeconds(t.lags, .99)
	res.Degraded = degraded(res.LagP99, res.SchedP99)
	// The scaling search's rule: at most 1% dropped.
	res.Held = res.Failed == 0 && float64(res.Dropped) <= 0.01*float64(res.Sent+res.Dropped) && !res.Degraded && res.Sent > 0
	return res, nil
}

// mergeInstants is the sorted distinct positive instants of probes, a and b.
func mergeInstants(probes []time.Duration, a, b time.Duration) []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	for _, d := range append(append([]time.Duration(nil), probes...), a, b) {
		if d > 0 && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k] < out[k-1]; k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}

// streamedTokens reads infer_probe_streamed_tokens_total, every series.
func streamedTokens(reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	v := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "infer_probe_streamed_tokens_total" {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

// memory is one reading of the process's memory.
type memory struct {
	Goroutines, HeapObjects, Stacks, RSS int64
}

// readMemory collects garbage first, so that the heap figure is what is
// live, then reads the runtime's own classes and the resident set.
func readMemory() memory {
	runtime.GC()
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(samples)
	m := memory{
		HeapObjects: int64(samples[0].Value.Uint64()),
		Stacks:      int64(samples[1].Value.Uint64()),
		Goroutines:  int64(samples[2].Value.Uint64()),
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, resident int64
		if _, err := fmt.Sscan(string(b), &size, &resident); err == nil {
			m.RSS = resident * int64(os.Getpagesize())
		}
	}
	return m
}

// writeProfile writes the runtime profile of that name (heap, mutex) to
// the file at path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tokenTiming histograms each token's timing in sharded counters, so that
// a million tokens a second on many cores never meet on one lock or cache
// line: the read instant less its decode step's instant on the server's
// grid (meaningful for aligned steps: modulo the step), and each gap
// between two tokens of a stream less the step.
type tokenTiming struct {
	step       time.Duration
	delay, gap shardedHist
}

func (tt *tokenTiming) token(o *observation.Request) {
	n := len(o.TokenTimes)
	if n == 0 {
		return
	}
	at := o.TokenTimes[n-1]
	shard := int(o.Seq % timingShards)
	tt.delay.add(shard, at.Sub(at.Truncate(tt.step)))
	if n >= 2 {
		d := at.Sub(o.TokenTimes[n-2]) - tt.step
		tt.gap.add(shard, max(d, -d))
	}
}

// Histogram bounds: 10 µs buckets to 50 ms, the last one everything above.
const (
	timingShards = 64
	timingBucket = 10 * time.Microsecond
	timingBins   = 5000
)

type shardedHist struct {
	shards [timingShards]struct {
		bins [timingBins + 1]atomic.Uint32
		_    [64]byte
	}
}

func (h *shardedHist) add(shard int, d time.Duration) {
	b := min(max(int(d/timingBucket), 0), timingBins)
	h.shards[shard].bins[b].Add(1)
}

// quantile is q over every shard, in seconds (a bucket's upper bound).
func (h *shardedHist) quantile(q float64) float64 {
	var bins [timingBins + 1]uint64
	var total uint64
	for i := range h.shards {
		for b := range bins {
			v := uint64(h.shards[i].bins[b].Load())
			bins[b] += v
			total += v
		}
	}
	if total == 0 {
		return 0
	}
	want := uint64(q * float64(total))
	var seen uint64
	for b, v := range bins {
		seen += v
		if seen > want {
			return (time.Duration(b+1) * timingBucket).Seconds()
		}
	}
	return (time.Duration(timingBins) * timingBucket).Seconds()
}
