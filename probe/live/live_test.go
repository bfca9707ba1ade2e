package live

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// liveRunner is a chat workload against the simulator, with the live series.
func liveRunner(t *testing.T, cfg simulator.Config, reg *prometheus.Registry, sched workload.Schedule, in, out int, timeout time.Duration) (*workload.Runner, *Series) {
	t.Helper()
	baseURL, _ := simulatortest.StartTest(t, cfg)
	cl := client.New(client.Options{MaxConnsPerHost: 64})
	t.Cleanup(cl.Close)
	s := NewMetrics(reg).Series("sim", cfg.Model, "live", config.SLO{})
	return workload.Plan{
		Name: "live", Target: &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIChat},
		Source: workload.OpenLoop{Schedule: sched, Prompts: prompt.New(config.Distribution{Dist: "fixed", Mean: float64(in)}, config.Distribution{Dist: "fixed", Mean: float64(out)}, 1)},
		Client: cl, Limits: workload.Limits{MaxInFlight: 64}, Observer: s, Monitor: s,
		Template: plan.Template{Sampling: config.Sampling{IgnoreEOS: true}, Timeout: timeout},
	}.Runner(), s
}

func histCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestLiveFiguresLongGenerations: 20 s generations (400 tokens at 50 ms
// decode steps) at a constant 2 req/s. Eight seconds in, no request has
// ended, yet the TTFT histogram holds every first token so far and the
// streamed-token counter rises: each figure is observed when it happens,
// not when its request ends.
func TestLiveFiguresLongGenerations(t *testing.T) {
	testenv.Slow(t, "runs 8 s of real time")
	cfg := simulator.DefaultConfig()
	cfg.DecodeStep = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	ol, err := plan.Open(config.Arrival{Process: config.ProcessConstant, Rate: 2}, 1, plan.DefaultDegradedLag)
	if err != nil {
		t.Fatal(err)
	}
	r, s := liveRunner(t, cfg, reg, ol.Schedule, 64, 400, 2*time.Minute)
	r.Ceiling = ol.Ceiling
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	time.Sleep(7 * time.Second)
	before := testutil.ToFloat64(s.streamedContent)
	time.Sleep(time.Second)
	after := testutil.ToFloat64(s.streamedContent)
	ended := 0.0
	for _, c := range s.requests.All() {
		ended += testutil.ToFloat64(c)
	}
	ttfts := histCount(t, s.ttft)
	t.Logf("8 s in: %v requests ended, %d TTFT observations, streamed tokens %v -> %v, %d ITL observations", ended, ttfts, before, after, histCount(t, s.itl))
	if ended != 0 {
		t.Fatalf("%v requests ended within 8 s of 20 s generations: the test's premise is broken", ended)
	}
	if ttfts < 10 {
		t.Errorf("TTFT histogram holds %d observations 8 s in, want at least 10", ttfts)
	}
	if after <= before || before == 0 {
		t.Errorf("streamed tokens did not rise during the streams: %v -> %v", before, after)
	}
	if histCount(t, s.itl) == 0 {
		t.Error("no inter-token gap observed during the streams")
	}
}

// TestStreamedTokensMatchUsage: at the end, the streamed-token count equals
// the server's usage count, request by request and in the counters, for a
// server that sends one token per event (vLLM, the simulator).
func TestStreamedTokensMatchUsage(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.2 // 4 ms decode steps
	reg := prometheus.NewRegistry()
	offsets := make([]time.Duration, 12)
	for i := range offsets {
		offsets[i] = time.Duration(i) * 20 * time.Millisecond
	}
	r, s := liveRunner(t, cfg, reg, &listSchedule{offsets: offsets}, 32, 60, time.Minute)
	var mu sync.Mutex
	var obs []observation.Request
	onResult(r, func(o *observation.Request) {
		mu.Lock()
		obs = append(obs, *o)
		mu.Unlock()
	})
	r.Run(context.Background())
	if len(obs) != len(offsets) {
		t.Fatalf("%d results, want %d", len(obs), len(offsets))
	}
	for _, o := range obs {
		if o.Outcome != observation.Success || o.TokenSource != observation.TokensFromUsage || o.ContentEvents != o.OutputTokens || o.OutputTokens != 60 {
			t.Errorf("request %d: %s, %d events, %d tokens from %s", o.Seq, o.Outcome, o.ContentEvents, o.OutputTokens, o.TokenSource)
		}
	}
	if streamed, usage := testutil.ToFloat64(s.streamedContent), testutil.ToFloat64(s.completionTokens); streamed != usage || usage != 60*12 {
		t.Errorf("streamed tokens %v, usage %v, want both %d", streamed, usage, 60*12)
	}
	if n := histCount(t, s.ttft); n != 12 {
		t.Errorf("%d TTFT observations, want 12 (once each, not again at the end)", n)
	}
	if n := histCount(t, s.itl); n != 12*59 {
		t.Errorf("%d ITL observations, want %d", n, 12*59)
	}
}

// TestStallSeenWithinTwiceItsThreshold: a stream that stalls half-way (the
// simulator pauses it for 20 s after 20 tokens) shows in the stall gauge
// within twice the 1 s threshold of its stall, long before its 30 s
// timeout, and is counted once.
func TestStallSeenWithinTwiceItsThreshold(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.DecodeStep = 20 * time.Millisecond
	cfg.Faults = simulator.Faults{Slowdown: 1, ErrorStatus: 503, StallMidStream: 20 * time.Second, StallAfterTokens: 20}
	reg := prometheus.NewRegistry()
	r, s := liveRunner(t, cfg, reg, &listSchedule{offsets: []time.Duration{0}}, 16, 40, 30*time.Second)
	r.StallThreshold = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// The stall begins at the 20th token; the gauge must show it within
	// 2 s (twice the threshold) of that instant.
	deadline := time.Now().Add(10 * time.Second)
	var stallStart time.Time
	for time.Now().Before(deadline) {
		if stallStart.IsZero() && testutil.ToFloat64(s.streamedContent) >= 20 {
			stallStart = time.Now()
		}
		if testutil.ToFloat64(s.stalled) >= 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	seen := time.Now()
	if testutil.ToFloat64(s.stalled) < 1 {
		t.Fatal("the stalled stream never showed in infer_probe_stalled_requests")
	}
	if stallStart.IsZero() {
		t.Fatal("the stream never reached its stall")
	}
	if d := seen.Sub(stallStart); d > 2*time.Second {
		t.Errorf("stall seen %v after it began, want within 2 s (twice the threshold)", d)
	}
	if v := testutil.ToFloat64(s.stalls); v != 1 {
		t.Errorf("stalls_total = %v, want 1", v)
	}
	if age := testutil.ToFloat64(s.oldestAge); age < 1 {
		t.Errorf("oldest request age %v s, want at least the 1 s it has been stalled", age)
	}
	if v := testutil.ToFloat64(outcomeCounter(s, observation.Timeout)); v != 0 {
		t.Errorf("the request timed out (%v) before the stall was seen", v)
	}
}

// outcomeCounter is s's requests_total counter of outcome o.
func outcomeCounter(s *Series, o observation.Outcome) prometheus.Counter {
	c, _ := s.requests.Of(o)
	return c
}
