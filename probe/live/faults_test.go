package live

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// TestMain fails the package if any test leaves a goroutine behind: the
// runner, the client and the simulator must all clean up, whatever the
// target did.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestFaultsCountedByOutcome drives the real runner and client against each
// of the simulator's faults and checks the outcome every request is counted
// under.
func TestFaultsCountedByOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		faults  simulator.Faults
		timeout time.Duration
		want    observation.Outcome
		// firstToken: whether requests still get a first token (and so a
		// TTFT observation) before failing.
		firstToken bool
	}{
		{"none", simulator.Faults{}, 10 * time.Second, observation.Success, true},
		{"slowdown", simulator.Faults{Slowdown: 3}, 10 * time.Second, observation.Success, true},
		{"429", simulator.Faults{ErrorRate: 1, ErrorStatus: 429}, 10 * time.Second, observation.HTTP4xx, false},
		{"500", simulator.Faults{ErrorRate: 1, ErrorStatus: 500}, 10 * time.Second, observation.HTTP5xx, false},
		{"503", simulator.Faults{ErrorRate: 1, ErrorStatus: 503}, 10 * time.Second, observation.HTTP5xx, false},
		{"stall before first token", simulator.Faults{StallBeforeFirstToken: 5 * time.Second}, 300 * time.Millisecond, observation.Timeout, false},
		{"stall mid-stream", simulator.Faults{StallMidStream: 5 * time.Second, StallAfterTokens: 3}, 500 * time.Millisecond, observation.Timeout, true},
		{"disconnect mid-stream", simulator.Faults{DisconnectAfterTokens: 3}, 10 * time.Second, observation.Disconnected, true},
		{"malformed chunk", simulator.Faults{MalformedAfterTokens: 3}, 10 * time.Second, observation.StreamError, true},
		{"slow headers", simulator.Faults{SlowHeaders: 5 * time.Second}, 300 * time.Millisecond, observation.Timeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			cfg.TimeScale = 0.05 // 1 ms decode steps: fast, but still streamed over time
			f := tc.faults
			if f.Slowdown == 0 {
				f.Slowdown = 1
			}
			if f.ErrorStatus == 0 {
				f.ErrorStatus = 503
			}
			cfg.Faults = f
			baseURL, _ := simulatortest.StartTest(t, cfg)
			cl := client.New(client.Options{MaxConnsPerHost: 4})
			defer cl.Close()
			reg := prometheus.NewRegistry()
			const n = 4
			offsets := make([]time.Duration, n)
			for i := range offsets {
				offsets[i] = time.Duration(i) * 10 * time.Millisecond
			}
			var (
				mu      sync.Mutex
				results []observation.Request
			)
			r := workload.Plan{
				Name: "faults", Target: &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIChat},
				Source: workload.OpenLoop{Schedule: &listSchedule{offsets: offsets}, Prompts: prompt.New(config.Distribution{Dist: "fixed", Mean: 16}, config.Distribution{Dist: "fixed", Mean: 12}, 1)},
				Client: cl, Limits: workload.Limits{MaxInFlight: n},
				Monitor:  NewMetrics(reg).Series("sim", cfg.Model, "faults", config.SLO{}),
				Template: plan.Template{Sampling: config.Sampling{IgnoreEOS: true}, Timeout: tc.timeout},
			}.Runner()
			r.Observer = liveSeries(r)
			onResult(r, func(o *observation.Request) {
				mu.Lock()
				results = append(results, *o)
				mu.Unlock()
			})
			r.Run(context.Background())
			if got := testutil.ToFloat64(outcomeCounter(liveSeries(r), tc.want)); got != n {
				for _, o := range results {
					t.Logf("outcome %s status %d err %v", o.Outcome, o.HTTPStatus, o.Err)
				}
				t.Fatalf("requests_total{outcome=%q} = %v, want %d", tc.want, got, n)
			}
			ttfts := testutil.CollectAndCount(reg, "infer_probe_time_to_first_token_seconds")
			var ttftCount uint64
			for _, o := range results {
				if _, ok := o.TTFT(); ok {
					ttftCount++
				}
			}
			if tc.firstToken != (ttftCount == n) || (!tc.firstToken && ttftCount != 0) {
				t.Errorf("%d of %d requests had a first token (series %d), want all: %v", ttftCount, n, ttfts, tc.firstToken)
			}
			if tc.want == observation.Success {
				if got := testutil.ToFloat64(liveSeries(r).completionTokens); got != 12*n {
					t.Errorf("completion tokens = %v, want %d", got, 12*n)
				}
			}
		})
	}
}

// TestFaultSlowdownShowsInITL: the slow-down knob multiplies step times, and
// the measured inter-token latency follows it.
func TestFaultSlowdownShowsInITL(t *testing.T) {
	medianITL := func(slowdown float64) time.Duration {
		cfg := simulator.DefaultConfig()
		// 20 ms steps: a step of 5 ms let a busy machine's late timers
		// (a few ms) move the base median enough to push the ratio out.
		cfg.TimeScale = 1
		cfg.Faults = simulator.NoFaults()
		cfg.Faults.Slowdown = slowdown
		baseURL, _ := simulatortest.StartTest(t, cfg)
		cl := client.New(client.Options{MaxConnsPerHost: 1})
		defer cl.Close()
		obs := &observation.Request{Scheduled: time.Now()}
		cl.Do(context.Background(), &client.Target{BaseURL: baseURL, Model: cfg.Model}, &client.Request{Prompt: "a b c", MaxTokens: 11, IgnoreEOS: true}, obs)
		if obs.Outcome != observation.Success {
			t.Fatalf("slowdown %v: %s %v", slowdown, obs.Outcome, obs.Err)
		}
		var gaps []time.Duration
		obs.ITLs(func(d time.Duration) { gaps = append(gaps, d) })
		return quantile(gaps, 0.5)
	}
	base, slow := medianITL(1), medianITL(4)
	// The decode step is 20 ms (+ per-sequence cost); four times slower is
	// about 80 ms. Ratios within 3x..5x leave room for the
	// scheduler without accepting a knob that does nothing.
	if ratio := float64(slow) / float64(base); ratio < 3 || ratio > 5 {
		t.Errorf("median ITL %v at slowdown 1, %v at 4: ratio %.2f, want about 4", base, slow, ratio)
	}

}
