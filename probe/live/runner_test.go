package live

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/arrival"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// listSchedule replays fixed offsets.
type listSchedule struct {
	offsets []time.Duration
	i       int
}

func (s *listSchedule) Next() (time.Duration, bool) {
	if s.i >= len(s.offsets) {
		return 0, false
	}
	s.i++
	return s.offsets[s.i-1], true
}
func (s *listSchedule) Rate(time.Duration) float64 { return 1 }
func (s *listSchedule) Clamped() uint64            { return 0 }

// fakeDoer answers after a fixed delay with a scripted outcome, and blocks
// while gate is closed.
type fakeDoer struct {
	delay   time.Duration
	outcome observation.Outcome
	gate    chan struct{}
	mu      sync.Mutex
	prompts []string
	ids     []string
	traces  []observation.Trace
}

// Do fills the observation as the client does, events included.
func (d *fakeDoer) Do(ctx context.Context, _ *client.Target, r *client.Request, o *observation.Request) {
	d.mu.Lock()
	d.prompts = append(d.prompts, r.Prompt)
	d.ids = append(d.ids, r.RequestID)
	d.traces = append(d.traces, r.Trace)
	d.mu.Unlock()
	o.Sent = time.Now()
	if r.Events != nil {
		r.Events.Sent(o)
	}
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
		}
	}
	time.Sleep(d.delay)
	now := time.Now()
	o.FirstToken, o.FirstAnswer = now, now
	for i := range 3 {
		o.TokenTimes = append(o.TokenTimes, now.Add(time.Duration(i)*time.Millisecond))
		o.ContentEvents++
		if r.Events != nil {
			r.Events.Content(o)
		}
	}
	o.End = now.Add(2 * time.Millisecond)
	o.Outcome = d.outcome
	o.OutputTokens, o.PromptTokens, o.TokenSource = 3, 10, observation.TokensFromUsage
	if d.outcome != observation.Success {
		o.Err = errors.New("scripted failure")
	}
}

func newTestRunner(t *testing.T, reg *prometheus.Registry, sched workload.Schedule, doer workload.Doer, maxInFlight int) *workload.Runner {
	t.Helper()
	s := NewMetrics(reg).Series("t", "m", "w", config.SLO{TTFT: time.Second})
	return workload.Plan{
		Name: "w", Target: &client.Target{Name: "t", Model: "m"},
		Source: workload.OpenLoop{Schedule: sched, Prompts: prompt.New(config.Distribution{Dist: "fixed", Mean: 4}, config.Distribution{Dist: "fixed", Mean: 3}, 1)},
		Client: doer, Limits: workload.Limits{MaxInFlight: maxInFlight},
		Observer: s, Monitor: s,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}.Runner()
}

func TestRunnerCountsOutcomesAndDrops(t *testing.T) {
	reg := prometheus.NewRegistry()
	gate := make(chan struct{})
	doer := &fakeDoer{outcome: observation.Success, gate: gate}
	// Five arrivals at once with a cap of two: two are sent, three dropped.
	sched := &listSchedule{offsets: []time.Duration{0, 0, 0, 0, 0}}
	r := newTestRunner(t, reg, sched, doer, 2)
	var got []observation.Outcome
	var mu sync.Mutex
	onResult(r, func(o *observation.Request) {
		mu.Lock()
		got = append(got, o.Outcome)
		mu.Unlock()
	})
	done := make(chan struct{})
	go func() { r.Run(context.Background()); close(done) }()
	// The dispatcher finishes its schedule only once the cap released its
	// slots; release them after all five arrivals were considered.
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(gate)
	<-done
	want := map[string]float64{"success": 2, "dropped": 3, "timeout": 0}
	for outcome, n := range want {
		if v := testutil.ToFloat64(liveSeries(r).m.requests.WithLabelValues("t", "m", "w", outcome)); v != n {
			t.Errorf("requests_total{outcome=%q} = %v, want %v", outcome, v, n)
		}
	}
	if v := testutil.ToFloat64(liveSeries(r).m.dropped.WithLabelValues("t", "m", "w", workload.DropInFlightCap)); v != 3 {
		t.Errorf("dropped{reason=in_flight_cap} = %v, want 3", v)
	}
	if v := testutil.ToFloat64(liveSeries(r).m.completionTokens.WithLabelValues("t", "m", "w")); v != 6 {
		t.Errorf("completion tokens = %v, want 6", v)
	}
	if v := testutil.ToFloat64(liveSeries(r).m.inFlight.WithLabelValues("t", "m", "w")); v != 0 {
		t.Errorf("in flight after run = %v, want 0", v)
	}
}

// TestRunnerLatencyFromSchedule shows that latency starts at the scheduled
// instant: a request whose dispatch is late still counts the lateness.
func TestRunnerLatencyFromSchedule(t *testing.T) {
	reg := prometheus.NewRegistry()
	doer := &fakeDoer{outcome: observation.Success, delay: 20 * time.Millisecond}
	r := newTestRunner(t, reg, &listSchedule{offsets: []time.Duration{0}}, doer, 1)
	var obs observation.Request
	onResult(r, func(o *observation.Request) { obs = *o })
	r.Run(context.Background())
	ttft, ok := obs.TTFT()
	if !ok || ttft < 20*time.Millisecond {
		t.Fatalf("TTFT = %v, want at least the 20ms the server took", ttft)
	}
	if lag, _ := obs.ScheduleLag(); lag < 0 {
		t.Fatalf("negative schedule lag %v", lag)
	}
	if n := testutil.CollectAndCount(reg, "infer_probe_time_to_first_token_seconds"); n != 1 {
		t.Fatalf("ttft series = %d", n)
	}
	// The SLO (TTFT 1s) was met.
	if v := testutil.ToFloat64(liveSeries(r).goodput); v != 1 {
		t.Errorf("goodput = %v, want 1", v)
	}
}

func TestMetricsHelpText(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Series("t", "m", "w", config.SLO{})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.TrimSpace(mf.GetHelp()) == "" {
			t.Errorf("%s has no help", mf.GetName())
		}
		if !strings.HasPrefix(mf.GetName(), "infer_probe_") {
			t.Errorf("%s lacks the infer_probe_ prefix", mf.GetName())
		}
	}
}

// TestRunnerRateCeilingDropsOverdue: arrivals that are all overdue at once
// (a stalled dispatcher) are not fired in a burst above max_rate: the wire
// ceiling lets WireBurst go and the rest are dropped with their reason.
func TestRunnerRateCeilingDropsOverdue(t *testing.T) {
	reg := prometheus.NewRegistry()
	doer := &fakeDoer{outcome: observation.Success}
	r := newTestRunner(t, reg, &listSchedule{offsets: make([]time.Duration, 10)}, doer, 100)
	r.Ceiling = arrival.NewWireCeiling(1, 0) // one request per second
	r.Run(context.Background())
	if v := testutil.ToFloat64(liveSeries(r).m.dropped.WithLabelValues("t", "m", "w", workload.DropRateCeiling)); v != 10-arrival.WireBurst {
		t.Errorf("dropped{reason=rate_ceiling} = %v, want %d", v, 10-arrival.WireBurst)
	}
	if v := testutil.ToFloat64(outcomeCounter(liveSeries(r), observation.Success)); v != arrival.WireBurst {
		t.Errorf("sent = %v, want %d", v, arrival.WireBurst)
	}
}

// TestRefusedApplyLeavesNoSeries: a configuration whose second workload
// cannot be built is refused, and the series Build had made for its first
// (new) workload are removed; the running workload's series stay.
func TestRefusedApplyLeavesNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewManager(NewMetrics(reg), Options{}, slog.New(slog.DiscardHandler))
	defer m.Stop()
	good, err := config.Parse([]byte(`targets:
  - {name: t, url: "http://127.0.0.1:9", model: m}
workloads:
  - {name: running, target: t, arrival: {process: constant, rate: 1}}
`), "good.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	bad, err := config.Parse([]byte(`targets:
  - {name: t, url: "http://127.0.0.1:9", model: m}
workloads:
  - {name: fresh, target: t, arrival: {process: constant, rate: 1}}
  - {name: broken, target: t, arrival: {process: constant, rate: 1}}
`), "bad.yml")
	if err != nil {
		t.Fatal(err)
	}
	// Break the second workload after validation, as a trace that vanished
	// between the check and the build would.
	bad.Workloads[1].Target = "nowhere"
	if err := m.Apply(context.Background(), bad); err == nil {
		t.Fatal("a configuration that cannot be built was applied")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "workload" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	if seen["fresh"] {
		t.Error("series of the refused configuration's workload remain")
	}
	if !seen["running"] {
		t.Error("the running workload's series were removed")
	}
}

// TestRequestIDs: every request carries its workload's name and its
// arrival's sequence number, for the server's logs.
func TestRequestIDs(t *testing.T) {
	doer := &fakeDoer{outcome: observation.Success}
	r := newTestRunner(t, prometheus.NewRegistry(), &listSchedule{offsets: make([]time.Duration, 4)}, doer, 10)
	r.Run(context.Background())
	slices.Sort(doer.ids)
	if want := []string{"w-0", "w-1", "w-2", "w-3"}; !slices.Equal(doer.ids, want) {
		t.Errorf("request ids %q, want %q", doer.ids, want)
	}
	// TTFT was observed live, once per request, through the client's events.
	if n := histCount(t, liveSeries(r).ttft); n != 4 {
		t.Errorf("%d TTFT observations, want 4", n)
	}
}

// countingTracer hands out trace contexts numbered from 1, every other one
// sampled.
type countingTracer struct {
	mu sync.Mutex
	n  byte
}

func (c *countingTracer) Trace() observation.Trace {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return observation.Trace{TraceID: [16]byte{c.n}, SpanID: [8]byte{c.n}, Sampled: c.n%2 == 0}
}

// TestTraceContextsAndStalls: with a Tracer, each request is sent with a
// trace context of its own from it (the client sends it as traceparent),
// without one with none; a request silent past the stall threshold ends
// with Stalled set, one that is not without.
func TestTraceContextsAndStalls(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tracer    workload.Tracer
		delay     time.Duration
		threshold time.Duration
		stalled   bool
	}{
		// Silent 300 ms past a threshold of 50 ms (scanned every 25 ms)
		// is seen however loaded the machine; a request that answers at
		// once would need a pause of 2 s to be taken for stalled.
		{"traced, not stalled", &countingTracer{}, 0, 2 * time.Second, false},
		{"untraced, stalled", nil, 300 * time.Millisecond, 50 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doer := &fakeDoer{outcome: observation.Success, delay: tc.delay}
			var mu sync.Mutex
			var stalled []bool
			r := workload.Plan{
				Name: "w", Target: &client.Target{Name: "t", Model: "m"},
				Source: workload.OpenLoop{Schedule: &listSchedule{offsets: make([]time.Duration, 4)},
					Prompts: prompt.New(config.Distribution{Dist: "fixed", Mean: 4}, config.Distribution{Dist: "fixed", Mean: 3}, 1)},
				Client: doer, Tracer: tc.tracer,
				Limits: workload.Limits{MaxInFlight: 10, StallThreshold: tc.threshold},
				Observer: workload.Results(func(o *observation.Request) {
					mu.Lock()
					defer mu.Unlock()
					stalled = append(stalled, o.Stalled)
				}),
			}.Runner()
			r.Run(context.Background())
			seen := map[observation.Trace]bool{}
			for _, tr := range doer.traces {
				if tc.tracer == nil && tr != (observation.Trace{}) || tc.tracer != nil && (!tr.Valid() || seen[tr]) {
					t.Errorf("trace contexts %+v", doer.traces)
					break
				}
				seen[tr] = true
			}
			if len(stalled) != 4 {
				t.Fatalf("%d requests ended, want 4", len(stalled))
			}
			for _, s := range stalled {
				if s != tc.stalled {
					t.Errorf("Stalled %v, want %v", stalled, tc.stalled)
					break
				}
			}
		})
	}
}
