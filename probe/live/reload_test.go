package live

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// tally counts, per workload, the requests about to be written (Sent) and
// those that ended (Done) by outcome: every request sent must end in a
// counted outcome.
type tally struct {
	mu   sync.Mutex
	sent map[string]int
	done map[string]map[observation.Outcome]int
}

func newTally() *tally {
	return &tally{sent: map[string]int{}, done: map[string]map[observation.Outcome]int{}}
}

type tallyObserver struct {
	t    *tally
	name string
}

func (o tallyObserver) Sent(*observation.Request) {
	o.t.mu.Lock()
	o.t.sent[o.name]++
	o.t.mu.Unlock()
}
func (tallyObserver) FirstToken(*observation.Request) {}
func (tallyObserver) Token(*observation.Request)      {}
func (o tallyObserver) Done(r *observation.Request) {
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	if o.t.done[o.name] == nil {
		o.t.done[o.name] = map[observation.Outcome]int{}
	}
	if !r.Sent.IsZero() {
		o.t.done[o.name][r.Outcome]++
	}
}
func (tallyObserver) Dropped(*observation.Request) {}

// ended is the requests of workload name that ended, and of them those
// cancelled.
func (t *tally) ended(name string) (sent, ended, cancelled int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.done[name] {
		ended += n
	}
	return t.sent[name], ended, t.done[name][observation.Cancelled]
}

// syncBuffer is a log sink tests read while the manager writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reloadConfig is two workloads against the simulator at url, b at rate
// bRate; outTokens sets each request's length.
func reloadConfig(t *testing.T, url string, bRate float64, outTokens int) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(fmt.Sprintf(`targets:
  - {name: sim, url: %q, model: sim-model}
workloads:
  - name: a
    target: sim
    max_in_flight: 64
    arrival: {process: constant, rate: 10}
    sampling: {ignore_eos: true}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: %d}}
  - name: b
    target: sim
    max_in_flight: 64
    arrival: {process: constant, rate: %v}
    sampling: {ignore_eos: true}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: %d}}
`, url+"/v1", outTokens, bRate, outTokens)), "reload.yml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// reloadManager is a manager against a simulator whose decode steps take
// 20 ms, with a tally of every workload's requests and its log.
func reloadManager(t *testing.T, drain time.Duration) (*Manager, *Metrics, *tally, *syncBuffer, string) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.DecodeStep = 20 * time.Millisecond
	url, _ := simulatortest.StartTest(t, cfg)
	tl := newTally()
	logs := &syncBuffer{}
	metrics := NewMetrics(prometheus.NewRegistry())
	m := NewManager(metrics, Options{
		DrainTimeout: drain,
		Observe: func(_ *config.Target, w *config.Workload) workload.Observer {
			return tallyObserver{tl, w.Name}
		},
	}, slog.New(slog.NewTextHandler(logs, nil)))
	return m, metrics, tl, logs, url
}

func (m *Manager) runnerOf(name string) *workload.Runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.running {
		if x.r.Name == name {
			return x.r
		}
	}
	return nil
}

func requestsOf(metrics *Metrics, name string, o observation.Outcome) float64 {
	return testutil.ToFloat64(metrics.requests.WithLabelValues("sim", "sim-model", name, string(o)))
}

// waitInFlight waits until workload name has requests in flight.
func waitInFlight(t *testing.T, m *Manager, name string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r := m.runnerOf(name); r != nil && r.InFlight() > 0 && r.Status().State == workload.StateRunning {
			time.Sleep(300 * time.Millisecond)
			return r.InFlight()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("workload %s never had requests in flight", name)
	return 0
}

// TestNoopReloadKeepsWorkloads: a reload of the same configuration under
// load keeps both runners (no "workloads started"), loses no request and
// resets no series; the shutdown's drain then lets every request in flight
// end within its grace, each counted.
func TestNoopReloadKeepsWorkloads(t *testing.T) {
	testenv.Slow(t, "runs seconds of real time")
	m, metrics, tl, logs, url := reloadManager(t, 30*time.Second)
	defer m.Stop()
	// Requests of 50 tokens at 20 ms: about a second each, some ten in
	// flight per workload.
	if err := m.Apply(context.Background(), reloadConfig(t, url, 10, 50)); err != nil {
		t.Fatal(err)
	}
	waitInFlight(t, m, "a")
	waitInFlight(t, m, "b")
	ra, rb := m.runnerOf("a"), m.runnerOf("b")
	beforeA := requestsOf(metrics, "a", observation.Success)
	started := strings.Count(logs.String(), "workloads started")
	if err := m.Apply(context.Background(), reloadConfig(t, url, 10, 50)); err != nil {
		t.Fatal(err)
	}
	if m.runnerOf("a") != ra || m.runnerOf("b") != rb {
		t.Error("a no-op reload replaced a runner")
	}
	if n := strings.Count(logs.String(), "workloads started"); n != started {
		t.Errorf("a no-op reload logged %q", "workloads started")
	}
	if strings.Contains(logs.String(), "workload finished") {
		t.Error("a no-op reload finished a workload")
	}
	time.Sleep(time.Second)
	if after := requestsOf(metrics, "a", observation.Success); after <= beforeA {
		t.Errorf("successes of a %v after the reload, %v before: the series was reset or stopped", after, beforeA)
	}
	inFlight := ra.InFlight() + rb.InFlight()
	m.Stop()
	for _, name := range []string{"a", "b"} {
		sent, ended, cancelled := tl.ended(name)
		if sent == 0 || sent != ended {
			t.Errorf("%s: %d requests sent, %d ended in an outcome", name, sent, ended)
		}
		if cancelled != 0 {
			t.Errorf("%s: %d requests cancelled within a 30 s grace", name, cancelled)
		}
		var counted float64
		for _, o := range observation.Outcomes {
			if o != observation.Dropped {
				counted += requestsOf(metrics, name, o)
			}
		}
		if int(counted) != ended {
			t.Errorf("%s: infer_probe_requests_total counts %v, the observers %d", name, counted, ended)
		}
	}
	t.Logf("%d requests in flight at the shutdown, all ended and counted", inFlight)
	if !strings.Contains(logs.String(), "workload drained") {
		t.Error("the shutdown did not drain")
	}
}

// TestReloadChangesOneOfTwo: a reload that changes b (its rate) keeps a's
// runner and counters untouched; b drains, and with a grace shorter than
// its requests, those still in flight end counted as cancelled, never
// lost; then the new b starts on the same series.
func TestReloadChangesOneOfTwo(t *testing.T) {
	testenv.Slow(t, "runs seconds of real time")
	m, metrics, tl, logs, url := reloadManager(t, 200*time.Millisecond)
	defer m.Stop()
	// Requests of 200 tokens at 20 ms: about 4 s each, far beyond the grace.
	if err := m.Apply(context.Background(), reloadConfig(t, url, 10, 200)); err != nil {
		t.Fatal(err)
	}
	waitInFlight(t, m, "a")
	flyingB := waitInFlight(t, m, "b")
	ra, rb := m.runnerOf("a"), m.runnerOf("b")
	sentA0, _, _ := tl.ended("a")
	if err := m.Apply(context.Background(), reloadConfig(t, url, 5, 200)); err != nil {
		t.Fatal(err)
	}
	if m.runnerOf("a") != ra {
		t.Error("the unchanged workload's runner was replaced")
	}
	if m.runnerOf("b") == rb {
		t.Error("the changed workload's runner was kept")
	}
	if rb.InFlight() != 0 {
		t.Errorf("the old b has %d requests in flight after its drain", rb.InFlight())
	}
	sentB, endedB, cancelledB := tl.ended("b")
	if sentB != endedB {
		t.Errorf("b: %d requests sent, %d ended in an outcome after its drain", sentB, endedB)
	}
	if cancelledB == 0 || float64(cancelledB) != requestsOf(metrics, "b", observation.Cancelled) {
		t.Errorf("b: %d cancelled, series says %v; %d were in flight shortly before", cancelledB,
			requestsOf(metrics, "b", observation.Cancelled), flyingB)
	}
	if c := requestsOf(metrics, "a", observation.Cancelled); c != 0 {
		t.Errorf("a: %v requests cancelled by a reload that did not change it", c)
	}
	// a's schedule went on: it sent through the reload.
	time.Sleep(500 * time.Millisecond)
	if sentA, _, _ := tl.ended("a"); sentA <= sentA0 {
		t.Errorf("a sent %d requests before the reload and %d after", sentA0, sentA)
	}
	if n := strings.Count(logs.String(), "workloads started"); n != 2 {
		t.Errorf("%d %q lines, want 2 (the start, and b's restart)", n, "workloads started")
	}
	// The new b sends on the same series.
	deadline := time.Now().Add(10 * time.Second)
	for m.runnerOf("b").InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if m.runnerOf("b").InFlight() == 0 {
		t.Error("the new b sends nothing")
	}
	m.Stop()
	for _, name := range []string{"a", "b"} {
		if sent, ended, _ := tl.ended(name); sent != ended {
			t.Errorf("%s: %d sent, %d ended after the shutdown", name, sent, ended)
		}
	}
}

// TestReloadRecalibratesEstimates: a workload whose prompts are estimates
// because its target's /tokenize did not answer is rebuilt by a reload of
// the same configuration, so that a reload still calibrates it.
func TestReloadRecalibratesEstimates(t *testing.T) {
	c := func() *config.Config {
		c, err := config.Parse([]byte(`targets:
  - {name: t, url: "http://127.0.0.1:9", model: m}
workloads:
  - {name: w, target: t, arrival: {process: constant, rate: 1}}
`), "unreached.yml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	metrics := NewMetrics(prometheus.NewRegistry())
	m := NewManager(metrics, Options{DrainTimeout: -1}, slog.New(slog.DiscardHandler))
	defer m.Stop()
	if err := m.Apply(context.Background(), c()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.runnerOf("w").Status().State == workload.StateCalibrating && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !metrics.calibrator.Unreached("t", "m", "w") {
		t.Fatal("the unreachable tokenizer was not noted")
	}
	first := m.runnerOf("w")
	if err := m.Apply(context.Background(), c()); err != nil {
		t.Fatal(err)
	}
	if m.runnerOf("w") == first {
		t.Error("a reload kept a workload whose prompts are estimates for an unreachable tokenizer")
	}
}
