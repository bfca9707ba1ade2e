// Command loadharness measures the continuous probe itself: how much CPU the
// client spends per streamed chunk, how closely its timestamps follow the
// server's ground truth, and the highest rate it sustains without falling
// behind its schedule. It drives the real workload runner and client against
// the embedded simulator running in a child process pinned to its own core,
// so that the client's CPU time is its own.
//
//	go run ./cmd/loadharness            # every scenario, about 2 minutes
//	go run ./cmd/loadharness -scenario=bias
//	go run ./cmd/loadharness -scenario=otlp   # CPU per chunk without and with the OTLP push (metrics, spans)
//
// The figures in docs/benchmarks.md come from this command.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/groundtruth"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

const (
	envChild  = "LOADHARNESS_SIMULATOR" // JSON simulator config; set in the child
	envAddr   = "LOADHARNESS_ADDR"
	envPinned = "LOADHARNESS_PINNED"
)

func main() {
	if cfg := os.Getenv(envChild); cfg != "" {
		os.Exit(childSimulator(cfg, os.Getenv(envAddr)))
	}
	scenario := flag.String("scenario", "all", "floor | bias | sweep | streams | all, or otlp (not in all)")
	seconds := flag.Float64("seconds", 8, "duration of each measured run")
	cpuProfile := flag.String("cpuprofile", "", "write the client's CPU profile to this file")
	scaling := scalingFlags(flag.CommandLine) // -scenario=scaling | memory | concurrency | fleet: scaling.go
	flag.IntVar(&sweepTokens, "sweep.tokens", 16, "output tokens per request in the sweep")
	flag.IntVar(&otlpRepeats, "otlp.repeats", 3, "rounds of runs without the OTLP push, with its metrics, and with its spans at the default ratio and at 1.0 (1 to 20)")
	flag.DurationVar(&otlpInterval, "otlp.interval", time.Second, "interval of the OTLP push in the otlp scenario")
	flag.Func("sweep.rates", "comma-separated request rates of the sweep", func(v string) error {
		sweepRates = nil
		for _, f := range strings.Split(v, ",") {
			r, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return err
			}
			sweepRates = append(sweepRates, r)
		}
		return nil
	})
	flag.Parse()
	if scaling.handles(*scenario) { // pins its own children, so before pinSelf
		os.Exit(scaling.main(*scenario, time.Duration(*seconds*float64(time.Second))))
	}
	pinSelf()
	// The client gets one core, as in the reference measurement of vLLM's
	// request function; the simulator gets the other.
	runtime.GOMAXPROCS(1)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			panic(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			panic(err)
		}
		defer pprof.StopCPUProfile()
	}
	run := map[string]func(time.Duration){
		"floor":   floorScenario,
		"bias":    biasScenario,
		"sweep":   sweepScenario,
		"streams": streamsScenario,
		"otlp":    otlpScenario,
	}
	if otlpRepeats < 1 || otlpRepeats > 20 {
		fmt.Fprintln(os.Stderr, "-otlp.repeats must be 1 to 20")
		os.Exit(2)
	}
	for _, name := range []string{"floor", "bias", "sweep", "streams", "otlp"} {
		// The otlp comparison runs only when named: "all" stays the
		// figures of the benchmark page's first sections.
		if (*scenario == "all" && name != "otlp") || *scenario == name {
			run[name](time.Duration(*seconds * float64(time.Second)))
		}
	}
}

// pinSelf re-executes the harness on core 0 when taskset exists, leaving
// core 1 to the simulator.
func pinSelf() {
	if os.Getenv(envPinned) != "" || runtime.NumCPU() < 2 {
		return
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		fmt.Println("# taskset not found: client and simulator are not pinned")
		return
	}
	cmd := exec.Command(taskset, append([]string{"-c", "0", os.Args[0]}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), envPinned+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func childSimulator(cfgJSON, addr string) int {
	var cfg simulator.Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := simulator.Serve(ctx, addr, cfg, slog.New(slog.DiscardHandler)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startSimulator runs the simulator in a child process on core 1 and
// returns its base URL and a stop function.
func startSimulator(cfg simulator.Config) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	js, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0])
	if taskset, err := exec.LookPath("taskset"); err == nil && runtime.NumCPU() >= 2 {
		cmd = exec.Command(taskset, "-c", "1", os.Args[0])
	}
	cmd.Env = append(os.Environ(), envChild+"="+string(js), envAddr+"="+addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	url := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 200 {
			panic("simulator did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return url, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

// run is one measured run of the real runner.
type run struct {
	rate     float64
	tokens   int
	duration time.Duration
	capture  bool // keep response bodies for ground truth
	streams  int  // in-flight cap
	// schedule, when set, replaces the constant-rate schedule.
	schedule workload.Schedule
	// observer, when set, hears every request beside the harness's own
	// results (the OTLP push).
	observer workload.Observer
	// tracer, when set, gives each request its trace context (the OTLP
	// spans' head sampler), sent as traceparent.
	tracer workload.Tracer
}

type result struct {
	sent, dropped, failed int
	droppedCeiling        int
	chunks                int
	cpu                   time.Duration
	wall                  time.Duration
	lagP99                float64 // from the runner's own lag window gauge
	degraded              float64
	lags                  []time.Duration
	ttftErr, tokenErr     []time.Duration
}

type capturingDoer struct {
	c      *client.Client
	mu     sync.Mutex
	bodies []*bytes.Buffer
	obs    []observation.Request
}

func (d *capturingDoer) Do(ctx context.Context, t *client.Target, r *client.Request, o *observation.Request) {
	buf := new(bytes.Buffer)
	d.c.Do(groundtruth.WithCapture(ctx, buf), t, r, o)
	d.mu.Lock()
	d.bodies = append(d.bodies, buf)
	d.obs = append(d.obs, *o)
	d.mu.Unlock()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measure(url string, r run) result {
	streams := r.streams
	if streams == 0 {
		streams = 4096
	}
	opts := client.Options{MaxConnsPerHost: streams}
	if r.capture {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = streams
		tr.DisableCompression = true
		opts.Transport = groundtruth.Transport{Inner: tr}
	}
	cl := client.New(opts)
	defer cl.Close()
	var doer workload.Doer = cl
	cd := &capturingDoer{c: cl}
	if r.capture {
		doer = cd
	}
	sched := r.schedule
	if sched == nil {
		ol, err := plan.Open(config.Arrival{Process: config.ProcessConstant, Rate: r.rate}, 1, plan.DefaultDegradedLag)
		if err != nil {
			panic(err)
		}
		sched = ol.Schedule
	}
	mon := &lastLag{}
	var mu sync.Mutex
	var res result
	var observer workload.Observer = workload.Results(func(o *observation.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch o.Outcome {
		case observation.Dropped:
			res.dropped++
			if o.DropReason == workload.DropRateCeiling {
				res.droppedCeiling++
			}
			return
		case observation.Success:
		default:
			res.failed++
		}
		res.sent++
		res.chunks += o.ContentEvents
		if lag, ok := o.ScheduleLag(); ok {
			res.lags = append(res.lags, lag)
		}
	})
	if r.observer != nil {
		observer = workload.Observers{observer, r.observer}
	}
	// The wire ceiling is the plan's, of r.rate.
	runner := workload.Plan{
		Name: "harness", Target: &client.Target{Name: "sim", BaseURL: url, Model: "sim-model", Flavor: client.OpenAIChat},
		Source: workload.OpenLoop{Schedule: sched,
			Prompts: prompt.New(config.Distribution{Dist: "fixed", Mean: 64}, config.Distribution{Dist: "fixed", Mean: float64(r.tokens)}, 1)},
		Client:   doer,
		Monitor:  mon,
		Template: plan.Template{Sampling: config.Sampling{IgnoreEOS: true}, Timeout: time.Minute},
		Limits: workload.Limits{
			MaxInFlight: streams, MaxRate: r.rate, Duration: r.duration,
			// The window covers the whole run, so the gauge read at the end
			// is the run's p99.
			DegradedLag: plan.DefaultDegradedLag, DegradedWindow: r.duration + 10*time.Second,
		},
		Observer: observer,
		Tracer:   r.tracer,
	}.Runner()
	runtime.GC()
	cpu0, wall0 := cpuTime(), time.Now()
	runner.Run(context.Background())
	res.cpu, res.wall = cpuTime()-cpu0, time.Since(wall0)
	res.lagP99, res.degraded = mon.get()
	if r.capture {
		for i, body := range cd.bodies {
			o := &cd.obs[i]
			emits := groundtruth.ContentEmits(body.Bytes())
			if o.Outcome != observation.Success || len(emits) != len(o.TokenTimes) {
				continue
			}
			for j, e := range emits {
				d := time.Duration(o.TokenTimes[j].UnixNano() - e)
				res.tokenErr = append(res.tokenErr, d)
				if j == 0 {
					res.ttftErr = append(res.ttftErr, d)
				}
			}
		}
	}
	return res
}

func q(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// harnessSimulator is a reference server like the one vLLM's request
// function was measured against: a token every 10 ms, whatever the batch.
func harnessSimulator() simulator.Config {
	cfg := simulator.DefaultConfig()
	cfg.DecodeStep = 10 * time.Millisecond
	cfg.DecodePerSeq = 0
	cfg.PrefillTokensPerSecond = 1e6
	cfg.MaxNumSeqs = 4096
	cfg.KVBlocks = 1 << 20
	cfg.MaxBatchedTokens = 1 << 20
	return cfg
}

// biasScenario: 200 req/s of 64-token streams, the client on one core.
func biasScenario(d time.Duration) {
	url, stop := startSimulator(harnessSimulator())
	defer stop()
	measure(url, run{rate: 50, tokens: 64, duration: 2 * time.Second}) // warm the pool
	// The CPU figure comes from a run without the ground-truth capture,
	// whose copying of every body is the harness's cost, not the client's.
	plain := measure(url, run{rate: 200, tokens: 64, duration: d})
	res := measure(url, run{rate: 200, tokens: 64, duration: d, capture: true})
	fmt.Println("## bias: 200 req/s x 64 tokens, client on one core")
	fmt.Println()
	fmt.Println("| measure | value |")
	fmt.Println("| --- | --- |")
	fmt.Printf("| requests sent / expected | %d / %.0f (%.2f%%), dropped %d |\n", res.sent, 200*d.Seconds(), 100*float64(res.sent)/(200*d.Seconds()), res.dropped)
	fmt.Printf("| failed | %d |\n", res.failed)
	fmt.Printf("| streamed chunks | %d |\n", res.chunks)
	fmt.Printf("| client CPU per chunk (all client work / chunks; run without capture) | %s |\n", us(plain.cpu/time.Duration(max(plain.chunks, 1))))
	fmt.Printf("| client CPU per chunk, with the ground-truth capture | %s |\n", us(res.cpu/time.Duration(max(res.chunks, 1))))
	fmt.Printf("| TTFT bias p50 / p99 (client read − server emit of the first token) | %s / %s |\n", ms(q(res.ttftErr, .5)), ms(q(res.ttftErr, .99)))
	fmt.Printf("| token timing error p50 / p99 | %s / %s |\n", ms(q(res.tokenErr, .5)), ms(q(res.tokenErr, .99)))
	fmt.Printf("| schedule lag p50 / p99 | %s / %s |\n", ms(q(res.lags, .5)), ms(q(res.lags, .99)))
	fmt.Println()
}

var (
	sweepRates  = []float64{250, 500, 1000, 1500, 2000, 3000, 4000}
	sweepTokens = 16
)

// sweepScenario doubles the request rate until the client falls behind.
func sweepScenario(d time.Duration) {
	url, stop := startSimulator(harnessSimulator())
	defer stop()
	measure(url, run{rate: 50, tokens: 16, duration: 2 * time.Second})
	fmt.Printf("## sweep: constant rate, %d-token streams, client on one core\n", sweepTokens)
	fmt.Println()
	fmt.Println("| configured req/s | sent req/s | sent / configured | dropped | chunks/s | schedule lag p99 | degraded gauge | CPU per chunk |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
	best, bestTokens := 0.0, 0.0
	for _, rate := range sweepRates {
		res := measure(url, run{rate: rate, tokens: sweepTokens, duration: d})
		// Arrival k of a constant process is at k/rate, so a run of d
		// holds floor(d·rate) arrivals, the last one excluded when it
		// falls exactly on d.
		delivered := float64(res.sent) / d.Seconds()
		p99 := q(res.lags, .99)
		fmt.Printf("| %.0f | %.1f | %.2f%% | %d | %.0f | %s | %.0f | %s |\n", rate, delivered, 100*delivered/rate, res.dropped,
			float64(res.chunks)/d.Seconds(), ms(p99), res.degraded, us(res.cpu/time.Duration(max(res.chunks, 1))))
		if p99 < time.Millisecond && res.failed == 0 {
			best, bestTokens = rate, float64(res.chunks)/d.Seconds()
		}
		if p99 > 50*time.Millisecond {
			break
		}
	}
	fmt.Printf("\nHighest rate with schedule lag p99 under 1 ms: %.0f req/s (%.0f streamed tokens/s).\n\n", best, bestTokens)
}

// streamsScenario holds 1,000 streams open at once and compares every
// token's read instant with the server's emit instant.
func streamsScenario(time.Duration) {
	cfg := harnessSimulator()
	cfg.DecodeStep = 20 * time.Millisecond
	url, stop := startSimulator(cfg)
	defer stop()
	measure(url, run{rate: 50, tokens: 16, duration: 2 * time.Second})
	// 1,000 requests scheduled over 0.5 s, 200 tokens each (4 s of
	// decoding), so all 1,000 streams are open together for 3.5 s.
	res := measure(url, run{rate: 2000, tokens: 200, duration: 500 * time.Millisecond, capture: true})
	fmt.Println("## streams: 1,000 concurrent streams, 200 tokens each, a decode step every 20 ms")
	fmt.Println()
	fmt.Println("| measure | value |")
	fmt.Println("| --- | --- |")
	fmt.Printf("| requests / failed | %d / %d |\n", res.sent, res.failed)
	fmt.Printf("| token timing error p50 / p99 / max | %s / %s / %s |\n", ms(q(res.tokenErr, .5)), ms(q(res.tokenErr, .99)), ms(q(res.tokenErr, 1)))
	fmt.Printf("| TTFT error p50 / p99 | %s / %s |\n", ms(q(res.ttftErr, .5)), ms(q(res.ttftErr, .99)))
	fmt.Printf("| client CPU per chunk | %s |\n", us(res.cpu/time.Duration(max(res.chunks, 1))))
	fmt.Println()
}

// floorScenario measures what reading the same streams costs with no client
// at all: raw HTTP/1.1 requests written on kept-alive TCP connections, and
// the responses read into a buffer until [DONE], nothing parsed. It is the
// floor that the Go runtime and this machine's kernel put under any Go
// client: the client's cost per chunk minus this is what the client itself
// adds.
func floorScenario(d time.Duration) {
	url, stop := startSimulator(harnessSimulator())
	defer stop()
	addr := strings.TrimPrefix(url, "http://")
	body := `{"model":"sim-model","messages":[{"role":"user","content":"` + strings.Repeat("word ", 64) +
		`"}],"max_tokens":64,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`
	req := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	conns := make(chan net.Conn, 512)
	stream := func() int {
		var c net.Conn
		select {
		case c = <-conns:
		default:
			var err error
			if c, err = net.Dial("tcp", addr); err != nil {
				return 0
			}
		}
		if _, err := c.Write(req); err != nil {
			c.Close()
			return 0
		}
		buf := make([]byte, 32<<10)
		n, chunks := 0, 0
		for {
			m, err := c.Read(buf[n:])
			if err != nil {
				c.Close()
				return chunks
			}
			chunks += bytes.Count(buf[n:n+m], []byte("data: "))
			n += m
			if bytes.Contains(buf[max(0, n-m-16):n], []byte("[DONE]")) {
				// The terminating zero-length chunk follows [DONE].
				for !bytes.HasSuffix(buf[:n], []byte("0\r\n\r\n")) {
					m, err = c.Read(buf[n:])
					if err != nil {
						c.Close()
						return chunks
					}
					n += m
				}
				conns <- c
				return chunks
			}
			if n > len(buf)-4096 {
				copy(buf, buf[n-64:n])
				n = 64
			}
		}
	}
	run := func(rate float64, dur time.Duration) (int, int, time.Duration) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		total, done := 0, 0
		start := time.Now()
		cpu0 := cpuTime()
		for k := 1; ; k++ {
			at := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
			if at.Sub(start) >= dur {
				break
			}
			time.Sleep(time.Until(at))
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := stream()
				mu.Lock()
				total += n
				if n >= 64 {
					done++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		return total, done, cpuTime() - cpu0
	}
	run(50, 2*time.Second)
	events, done, cpu := run(200, d)
	// The client's figure is per content chunk (64 a request); the raw
	// stream also holds a role chunk, a usage chunk and [DONE].
	fmt.Println("## floor: the same 200 req/s x 64-token streams read raw, nothing parsed, one core")
	fmt.Println()
	fmt.Println("| complete streams | SSE events read | CPU per content chunk (64 per stream) |")
	fmt.Println("| --- | --- | --- |")
	fmt.Printf("| %d | %d | %s |\n\n", done, events, us(cpu/time.Duration(max(done*64, 1))))
}

// lastLag is the runner's Monitor: it keeps the last lag p99 and
// degradation verdict, which over a window as long as the run are the run's.
type lastLag struct {
	mu       sync.Mutex
	p99      float64
	degraded bool
}

func (m *lastLag) Lag(p99 float64, degraded bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.p99, m.degraded = p99, degraded
}

func (m *lastLag) get() (float64, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := 0.0
	if m.degraded {
		d = 1
	}
	return m.p99, d
}

func (*lastLag) Limits(int, float64, bool) {}
func (*lastLag) Rate(float64)              {}
func (*lastLag) InFlight(int)              {}
func (*lastLag) Clamped(uint64)            {}
func (*lastLag) Check(string)              {}
func (*lastLag) State(string)              {}
func (*lastLag) Stalls(workload.StallScan) {}
