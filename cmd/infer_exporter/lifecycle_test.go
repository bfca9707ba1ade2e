package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
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
	testenv.Slow(t, "runs seconds of real time")
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

// restartable serves the current simulator's handler: a restart replaces
// the simulator (a new process start, a new load) on the same address.
// It counts each life's /tokenize requests.
type restartable struct {
	h        atomic.Pointer[http.Handler]
	tokenize atomic.Int64 // of the current life
}

func (r *restartable) serve(sim *simulator.Simulator) {
	h := sim.Handler()
	r.tokenize.Store(0)
	r.h.Store(&h)
}

func (r *restartable) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/tokenize" {
		r.tokenize.Add(1)
	}
	(*r.h.Load()).ServeHTTP(w, req)
}

// metricWith is the value of mf's metric whose labels include all of want.
func metricWith(mf *dto.MetricFamily, want map[string]string) float64 {
	var s float64
	for _, m := range mf.GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n == len(want) {
			s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return s
}

// TestCalibrationFollowsTheServer: the exporter starts while its server
// loads (3 s, 503 as llama.cpp answers). Both workloads send estimates
// meanwhile. Once the server is ready, one workload's prompts are
// calibrated by the server's /tokenize within 3 s, without a reload; the
// other's, too long for the server's 1024-token context, is refused and
// stops. The server then restarts (a new process, another load, a context
// of 32768): the target turns not ready, the prompts are calibrated again
// against the new server's /tokenize, and the refused workload is retried
// and succeeds.
func TestCalibrationFollowsTheServer(t *testing.T) {
	testenv.Slow(t, "runs seconds of real time")
	newSim := func(maxModelLen int) *simulator.Simulator {
		cfg := simulator.DefaultConfig()
		cfg.LoadDelay, cfg.LoadMode, cfg.MaxModelLen = 3*time.Second, simulator.LoadUnready, maxModelLen
		sim, err := simulator.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sim.Close() })
		return sim
	}
	var front restartable
	first := newSim(1024)
	front.serve(first)
	srv := httptest.NewServer(&front)
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`targets:
  - {name: sim, url: "%s/v1", model: sim-model, metrics: {interval: 1s}}
workloads:
  - name: fits
    target: sim
    arrival: {process: constant, rate: 10}
    prompt: {input_tokens: {dist: fixed, mean: 64}, output_tokens: {dist: fixed, mean: 4}}
  - name: long
    target: sim
    arrival: {process: constant, rate: 2}
    prompt: {input_tokens: {dist: fixed, mean: 2000}, output_tokens: {dist: fixed, mean: 8}}
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startExporter(t, "--config.file="+file)
	info := func(mfs map[string]*dto.MetricFamily, workload, tokenizer string) float64 {
		return metricWith(mfs["infer_probe_prompt_info"], map[string]string{"workload": workload, "tokenizer": tokenizer})
	}
	waitFor := func(what string, limit time.Duration, cond func(map[string]*dto.MetricFamily) bool) (map[string]*dto.MetricFamily, time.Time) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			mfs := scrape(t, base+"/metrics")
			if cond(mfs) {
				return mfs, time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, limit)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// While the server loads, both workloads come to estimates (each
	// calibration first tries the tokenizer's three dialects, which a
	// loaded machine takes a while over).
	for {
		mfs := scrape(t, base+"/metrics")
		if info(mfs, "fits", "estimate") == 1 && info(mfs, "long", "estimate") == 1 {
			break
		}
		if time.Now().After(first.ReadyAt().Add(-100 * time.Millisecond)) {
			t.Fatalf("the server is ready and the workloads were not both on estimates while it loaded: %v", mfs["infer_probe_prompt_info"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, at := waitFor("the server's calibration after ready", 10*time.Second, func(m map[string]*dto.MetricFamily) bool {
		return info(m, "fits", "server") == 1
	})
	t.Logf("calibrated by the server %v after it was ready", at.Sub(first.ReadyAt()).Round(10*time.Millisecond))
	if d := at.Sub(first.ReadyAt()); d > 3*time.Second {
		t.Errorf("calibrated %v after ready, want within 3 s", d)
	}
	waitFor("the long workload refused for the context length", 10*time.Second, func(m map[string]*dto.MetricFamily) bool {
		return metricWith(m["infer_probe_workload_state"], map[string]string{"workload": "long", "state": "failed"}) == 1
	})

	// The restart.
	second := newSim(32768)
	front.serve(second)
	waitFor("not ready during the restart's load", 2*time.Second, func(m map[string]*dto.MetricFamily) bool {
		return labelled(m["infer_probe_target_ready"], "target", "sim") == 0
	})
	mfs, at := waitFor("the long workload's success on the restarted server", 20*time.Second, func(m map[string]*dto.MetricFamily) bool {
		return metricWith(m["infer_probe_requests_total"], map[string]string{"workload": "long", "outcome": "success"}) > 0
	})
	t.Logf("the refused workload succeeded %v after the restart's ready; /tokenize asked %d times of the new server",
		at.Sub(second.ReadyAt()).Round(10*time.Millisecond), front.tokenize.Load())
	if front.tokenize.Load() == 0 {
		t.Error("the restarted server's /tokenize was never asked: no calibration after the restart")
	}
	if info(mfs, "fits", "server") != 1 {
		t.Errorf("fits is not on the server's calibration after the restart: %v", mfs["infer_probe_prompt_info"])
	}
	// Between the restart and the poll that found it loading (1 s
	// interval), the fits workload met 503s: at most its rate times the
	// interval, plus one.
	if v := metricWith(mfs["infer_probe_requests_total"], map[string]string{"workload": "fits", "outcome": "http_5xx"}); v > 12 {
		t.Errorf("%v failures of fits across the restart, want at most a poll interval's", v)
	}
}
