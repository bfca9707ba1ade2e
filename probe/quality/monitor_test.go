package quality

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// series is one gathered sample: its labels and value.
type series struct {
	labels map[string]string
	value  float64
}

func gather(t *testing.T, reg *prometheus.Registry, name string) []series {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []series
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			default:
				s.value = m.GetGauge().GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

// waitFor polls until cond holds, failing after a generous deadline: the
// monitor scores in the background.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMonitorAgainstSimulator runs the live gauge against the simulator:
// the gauge shows the simulator's true perplexity, follows the
// degradation fault at the next score, counts failures by reason for an
// unreachable target, and drops a target removed from the configuration.
func TestMonitorAgainstSimulator(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	base, sim := simulatortest.StartTest(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	m := NewMonitor(MonitorOptions{})
	// A score's deadline is its interval (one may not outlast the next):
	// 1 s, where 200 ms timed the healthy target out beside two busy loops.
	m.minInterval = time.Second
	defer m.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	q := &config.Quality{Interval: time.Millisecond, Timeout: 5 * time.Second} // clamped to 1 s both
	c := &config.Config{Targets: []config.Target{
		{Name: "sim", URL: base, Model: cfg.Model, Flavor: "openai-completions", Quality: q},
		{Name: "gone", URL: closed, Model: "m", Flavor: "sglang", Quality: q},
		{Name: "unscored", URL: base, Model: cfg.Model, Flavor: "openai-chat"},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	ref := Reference()
	pplOf := func(target string) (float64, bool) {
		for _, s := range gather(t, reg, "infer_probe_perplexity") {
			if s.labels["target"] == target {
				if s.labels["model"] != cfg.Model || s.labels["text"] != ref.Label() {
					t.Errorf("labels %v", s.labels)
				}
				return s.value, true
			}
		}
		return 0, false
	}
	healthy, n := simulator.ExpectedPerplexity(cfg.Seed, ref.Body, 0)
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*want }
	waitFor(t, "the first score", func() bool { v, ok := pplOf("sim"); return ok && near(v, healthy) })
	if problems, err := testutil.CollectAndLint(m); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	for _, s := range gather(t, reg, "infer_probe_perplexity_tokens") {
		if s.value != float64(n) {
			t.Errorf("tokens %v, want %d", s.value, n)
		}
	}
	for _, s := range gather(t, reg, "infer_probe_perplexity_last_success_timestamp_seconds") {
		if age := time.Since(time.Unix(0, int64(s.value*1e9))); age < 0 || age > time.Minute {
			t.Errorf("last success %v ago", age)
		}
	}

	// The model degrades: the gauge follows at its next score.
	if err := sim.SetFaults(simulator.Faults{LogprobPenalty: 0.5}); err != nil {
		t.Fatal(err)
	}
	degraded := healthy * math.Exp(0.5)
	waitFor(t, "the degraded score", func() bool { v, _ := pplOf("sim"); return near(v, degraded) })

	// The unreachable target has failures, no gauge, and every reason's
	// counter; the target without a quality block has nothing.
	waitFor(t, "a connection failure", func() bool {
		for _, s := range gather(t, reg, "infer_probe_perplexity_failures_total") {
			if s.labels["target"] == "gone" && s.labels["reason"] == ReasonConnection && s.value >= 1 {
				return true
			}
		}
		return false
	})
	counters := map[string]int{}
	for _, s := range gather(t, reg, "infer_probe_perplexity_failures_total") {
		counters[s.labels["target"]]++
		if s.labels["target"] == "sim" && s.value != 0 {
			t.Errorf("the healthy target failed: %v", s)
		}
	}
	if counters["sim"] != len(Reasons) || counters["gone"] != len(Reasons) || counters["unscored"] != 0 {
		t.Errorf("failure counters per target %v, want %d for sim and gone, none for unscored", counters, len(Reasons))
	}
	if _, ok := pplOf("gone"); ok {
		t.Error("an unreachable target has a perplexity")
	}

	// Reload without the sim target: its series go.
	c.Targets = c.Targets[1:]
	if err := m.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, ok := pplOf("sim"); ok {
		t.Error("a removed target still has a perplexity")
	}
	for _, s := range gather(t, reg, "infer_probe_perplexity_failures_total") {
		if s.labels["target"] == "sim" {
			t.Errorf("a removed target still has %v", s)
		}
	}
}

// TestMonitorRefusesUnsupported: a configuration built in code with a
// target that cannot be scored is refused by Apply, not scored forever.
func TestMonitorRefusesUnsupported(t *testing.T) {
	m := NewMonitor(MonitorOptions{})
	defer m.Close()
	err := m.Apply(context.Background(), &config.Config{Targets: []config.Target{
		{Name: "ll", URL: "http://127.0.0.1:1", Model: "m", Flavor: "llamacpp", Quality: &config.Quality{}},
	}})
	if err == nil || !strings.Contains(err.Error(), "llama.cpp") {
		t.Errorf("Apply: %v, want a refusal saying why llama.cpp cannot be scored", err)
	}
}
