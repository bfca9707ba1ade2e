package live

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// flavorEngines is the simulated engine that speaks each flavor natively.
var flavorEngines = map[string]string{
	"openai-chat": simulator.EngineVLLM, "openai-completions": simulator.EngineVLLM, "openai-responses": simulator.EngineVLLM,
	"tgi": simulator.EngineTGI, "llamacpp": simulator.EngineLlamaCpp,
	"ollama-generate": simulator.EngineOllama, "ollama-chat": simulator.EngineOllama,
	"triton": simulator.EngineTriton, "sglang": simulator.EngineSGLang,
}

// TestHTTPErrorsByCodeEveryFlavor (issue 25): the simulator's injected
// 429s and 503s, on every flavor's native engine, are counted under their
// code in infer_probe_http_errors_total, beside their outcome; every other
// code of the set exists at 0 from the start.
func TestHTTPErrorsByCodeEveryFlavor(t *testing.T) {
	for _, name := range client.FlavorNames() {
		flavor, _ := client.ParseFlavor(name)
		engine, ok := flavorEngines[name]
		if !ok {
			t.Fatalf("flavor %s has no simulated engine in this test", name)
		}
		for _, tc := range []struct {
			status  int
			outcome observation.Outcome
		}{{429, observation.HTTP4xx}, {503, observation.HTTP5xx}} {
			t.Run(name+"/"+strconv.Itoa(tc.status), func(t *testing.T) {
				cfg := simulatortest.InstantConfig()
				cfg.Engine = engine
				cfg.Faults.ErrorRate, cfg.Faults.ErrorStatus = 1, tc.status
				base, _ := simulatortest.StartTest(t, cfg)
				cl := client.New(client.Options{MaxConnsPerHost: 1})
				defer cl.Close()
				s := NewMetrics(prometheus.NewRegistry()).Series("sim", cfg.Model, "w", config.SLO{})
				for code, c := range s.httpErrors {
					if v := testutil.ToFloat64(c); v != 0 {
						t.Fatalf("code %s starts at %v, want 0", code, v)
					}
				}
				const n = 3
				for range n {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					obs := &observation.Request{Scheduled: time.Now()}
					cl.Do(ctx, &client.Target{BaseURL: base, Flavor: flavor, Model: cfg.Model}, &client.Request{Prompt: "p", MaxTokens: 8}, obs)
					cancel()
					if obs.HTTPStatus != tc.status || obs.Outcome != tc.outcome {
						t.Fatalf("status %d outcome %s (%v), want %d %s", obs.HTTPStatus, obs.Outcome, obs.Err, tc.status, tc.outcome)
					}
					s.Observe(obs)
				}
				want := observation.StatusCode(tc.status)
				if len(s.httpErrors) != len(observation.StatusCodes) {
					t.Fatalf("%d codes, want %d", len(s.httpErrors), len(observation.StatusCodes))
				}
				for code, c := range s.httpErrors {
					w := 0.0
					if code == want {
						w = n
					}
					if v := testutil.ToFloat64(c); v != w {
						t.Errorf("http_errors_total{code=%q} = %v, want %v", code, v, w)
					}
				}
				if v := testutil.ToFloat64(outcomeCounter(s, tc.outcome)); v != n {
					t.Errorf("requests_total{outcome=%q} = %v, want %d", tc.outcome, v, n)
				}
			})
		}
	}
}

// TestHTTPErrorsSeriesBounded: a workload has one http_errors_total series
// per code of the set, at 0 from the start, and none once deleted.
func TestHTTPErrorsSeriesBounded(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	s := m.Series("t", "m", "w", config.SLO{})
	m.Series("t", "m", "other", config.SLO{})
	if n := testutil.CollectAndCount(m.httpErrors); n != 2*len(observation.StatusCodes) {
		t.Errorf("http_errors_total series = %d, want %d", n, 2*len(observation.StatusCodes))
	}
	// A status outside the set counts under other; a failure without a
	// response, or a 2xx stream that broke, counts under no code.
	s.Observe(&observation.Request{Outcome: observation.HTTP4xx, HTTPStatus: 418})
	s.Observe(&observation.Request{Outcome: observation.Disconnected})
	s.Observe(&observation.Request{Outcome: observation.StreamError, HTTPStatus: 200})
	if v := testutil.ToFloat64(m.httpErrors.WithLabelValues("t", "m", "w", "other")); v != 1 {
		t.Errorf("code other = %v, want 1", v)
	}
	if n := testutil.CollectAndCount(m.httpErrors); n != 2*len(observation.StatusCodes) {
		t.Errorf("http_errors_total series = %d after the failures, want still %d", n, 2*len(observation.StatusCodes))
	}
	s.Delete()
	if n := testutil.CollectAndCount(m.httpErrors); n != len(observation.StatusCodes) {
		t.Errorf("http_errors_total series after Delete = %d, want the other workload's %d", n, len(observation.StatusCodes))
	}
}
