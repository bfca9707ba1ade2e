package otlp

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// TestManagerHook: the observer the manager's Observe hook adds hears a
// real workload's requests and its stall scans: against the simulator,
// with injected 500s and a stall in every stream, the OTLP totals equal the
// live series' once the workload has finished.
func TestManagerHook(t *testing.T) {
	testenv.Slow(t, "runs 2 s of real time")
	cfg := simulator.DefaultConfig()
	cfg.DecodeStep = 5 * time.Millisecond
	cfg.Faults.ErrorRate, cfg.Faults.ErrorStatus = 0.25, 500
	cfg.Faults.StallMidStream, cfg.Faults.StallAfterTokens = 300*time.Millisecond, 4
	baseURL, _ := simulatortest.StartTest(t, cfg)
	c, err := config.Parse([]byte(strings.ReplaceAll(`targets:
  - {name: sim, url: SIM, flavor: openai-chat, model: sim-model, timeout: 10s}
workloads:
  - name: chat
    target: sim
    arrival: {process: constant, rate: 20}
    max_in_flight: 64
    duration: 2s
    stall_threshold: 100ms
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: 8}
    sampling: {ignore_eos: true}
    slo: {ttft: 50ms}
`, "SIM", baseURL)), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	p, reader := newTestPusher(t, Exponential)
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	runners, clients, err := live.Build(ctx, c, live.NewMetrics(reg), live.Options{
		Observe: func(t *config.Target, w *config.Workload) workload.Observer { return p.Workload(t, w) },
	}, slog.New(slog.DiscardHandler))
	for _, cl := range clients {
		defer cl.Close()
	}
	if err != nil || len(runners) != 1 {
		t.Fatalf("Build: %v (%d runners)", err, len(runners))
	}
	runners[0].Run(ctx)
	ms := collect(t, reader)

	for _, tc := range []struct {
		otlp       string
		keep       func(attribute.Set) bool
		prometheus string
		promKeep   func(map[string]string) bool
	}{
		{NameTimeToFirstChunk, nil, "infer_probe_time_to_first_token_seconds", nil},
		{NameTimePerOutputChunk, nil, "infer_probe_inter_token_latency_seconds", nil},
		{NameOperationDuration, lacks("error.type"), "infer_probe_request_duration_seconds", nil},
		{NameOperationDuration, has("error.type", "http_5xx"), "infer_probe_requests_total", label("outcome", "http_5xx")},
		{NameTimePerOutputToken, nil, "infer_probe_time_per_output_token_seconds", nil},
		{NameScheduleLag, nil, "infer_probe_schedule_lag_seconds", nil},
		{NameGoodput, nil, "infer_probe_goodput_requests_total", nil},
		{NameStalls, nil, "infer_probe_stalls_total", nil},
	} {
		n, s := total(ms, tc.otlp, tc.keep)
		pn, ps := prom(t, reg, tc.prometheus, tc.promKeep)
		if n != pn || n == 0 {
			t.Errorf("%s count %d, Prometheus %s %d (want equal and not zero)", tc.otlp, n, tc.prometheus, pn)
		}
		if tc.prometheus != "infer_probe_requests_total" && math.Abs(s-ps) > 1e-9*math.Max(1, ps) {
			t.Errorf("%s sum %g, Prometheus %s %g", tc.otlp, s, tc.prometheus, ps)
		}
	}
}
