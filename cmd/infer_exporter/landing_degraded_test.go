package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// TestLandingDegradedSaysHowLate: a workload the live series flag
// degraded reads, on the landing page, with the figures behind the flag
// (its schedule lag p99, the goroutine scheduling latency p99) and what
// to change; a workload not flagged reads running.
func TestLandingDegradedSaysHowLate(t *testing.T) {
	reg := prometheus.NewRegistry()
	labels := []string{"target", "model", "workload"}
	degraded := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "infer_probe_measurement_degraded"}, labels)
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "infer_probe_schedule_lag_p99_seconds"}, labels)
	sched := prometheus.NewGauge(prometheus.GaugeOpts{Name: "infer_exporter_scheduling_latency_p99_seconds"})
	reg.MustRegister(degraded, lag, sched)
	degraded.WithLabelValues("t", "m", "late").Set(1)
	lag.WithLabelValues("t", "m", "late").Set(0.0482)
	degraded.WithLabelValues("t", "m", "fine").Set(0)
	lag.WithLabelValues("t", "m", "fine").Set(0.001)
	sched.Set(0.0003)

	figures := degradedWorkloads(reg)
	running := workload.Status{State: workload.StateRunning}
	figures["late"].bound = 10 * time.Millisecond
	got, class := verdict(running, figures["late"], recentSummary{})
	for _, want := range []string{"degraded: the client is behind its schedule", "schedule lag p99 48.2 ms", "goroutine scheduling latency p99 0.3 ms",
		"against a bound of 10.0 ms, --probe.degraded-lag", "lower the workload's rate (arrival.rate)", "fewer workloads", "GOMAXPROCS"} {
		if !strings.Contains(got, want) || class != "warn" {
			t.Errorf("verdict %q (%s) lacks %q", got, class, want)
		}
	}
	if got, class := verdict(running, figures["fine"], recentSummary{}); got != "running" || class != "ok" {
		t.Errorf("a workload not flagged: %q (%s), want running", got, class)
	}
}
