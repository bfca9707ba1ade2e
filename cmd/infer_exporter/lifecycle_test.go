package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// labelled sums the metrics of mf whose label name has value.
func labelled(mf *dto.MetricFamily, name, value string) float64 {
	var s float64
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return s
}

// TestTargetReadinessGates: the exporter starts while its server loads its
// model (3 s, answering 503 as llama.cpp does). Meanwhile
// infer_probe_target_ready is 0 and every arrival is skipped: counted in
// infer_probe_dropped_requests_total{reason="target_not_ready"}, in no
// outcome and no latency series. Once the server is ready the target turns
// ready, requests succeed, and no failure was counted.
func TestTargetReadinessGates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs seconds of real time")
	}
	cfg := simulator.DefaultConfig()
	cfg.LoadDelay, cfg.LoadMode = 3*time.Second, simulator.LoadUnready
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(func() { sim.Close() })
	file := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`targets:
  - {name: sim, url: "%s/v1", model: %s}
workloads:
  - name: w
    target: sim
    arrival: {process: constant, rate: 20}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: 4}}
`, srv.URL, cfg.Model)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startExporter(t, "--config.file="+file)
	time.Sleep(1500 * time.Millisecond)
	mfs := scrape(t, base+"/metrics")
	if v := labelled(mfs["infer_probe_target_ready"], "target", "sim"); v != 0 {
		t.Errorf("target_ready = %v while the server loads", v)
	}
	if v := sumCounter(mfs["infer_probe_requests_total"]); v != 0 {
		t.Errorf("%v requests in an outcome while the server loads, want 0", v)
	}
	if v := histCount(mfs["infer_probe_time_to_first_token_seconds"]); v != 0 {
		t.Errorf("%d TTFT observations while the server loads", v)
	}
	if v := labelled(mfs["infer_probe_dropped_requests_total"], "reason", "target_not_ready"); v < 5 {
		t.Errorf("%v arrivals skipped while the server loads, want some 30", v)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		mfs = scrape(t, base+"/metrics")
		if labelled(mfs["infer_probe_requests_total"], "outcome", "success") >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no success after the server's load")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v := labelled(mfs["infer_probe_target_ready"], "target", "sim"); v != 1 {
		t.Errorf("target_ready = %v once the server serves", v)
	}
	for _, o := range []string{"http_4xx", "http_5xx", "timeout", "stream_error", "disconnected", "dropped", "cancelled"} {
		if v := labelled(mfs["infer_probe_requests_total"], "outcome", o); v != 0 {
			t.Errorf("%v requests with outcome %s across the server's load", v, o)
		}
	}
}
