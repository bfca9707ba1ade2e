package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// seriesValue is the value of the counter of mf whose labels include every
// pair of want (0 when there is none).
func seriesValue(mf *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
series:
	for _, m := range mf.GetMetric() {
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue series
			}
		}
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// byLabel sums mf's series for model by the values of label, for a
// failure's message.
func byLabel(mf *dto.MetricFamily, model, label string) map[string]float64 {
	sums := map[string]float64{}
	for _, m := range mf.GetMetric() {
		var mod, val string
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "model":
				mod = lp.GetValue()
			case label:
				val = lp.GetValue()
			}
		}
		if mod == model && m.GetCounter().GetValue() > 0 {
			sums[val] += m.GetCounter().GetValue()
		}
	}
	return sums
}

// writeConfig writes a configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestLoRATargetsOneServer is docs/kinds.md's "LoRA adapters": one
// simulator serving sim-model and the adapter sql-lora, and two targets on
// its URL, one per model name, each with its workload. Both workloads'
// requests succeed, each series carries its target's model, and the
// simulator's /metrics shows sql-lora among its LoRA adapters.
func TestLoRATargetsOneServer(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.05
	cfg.LoRAAdapters = []string{"sql-lora"}
	simURL, _ := simulatortest.StartTest(t, cfg)
	file := writeConfig(t, fmt.Sprintf(`targets:
  - {name: base, url: %[1]q, model: sim-model, timeout: 30s}
  - {name: sql-lora, url: %[1]q, model: sql-lora, timeout: 30s}
workloads:
  - name: base
    target: base
    arrival: {process: constant, rate: 20}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: 4}}
  - name: sql-lora
    target: sql-lora
    arrival: {process: constant, rate: 20}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: 4}}
`, simURL))
	base := startExporter(t, "--config.file="+file)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mfs := scrape(t, base+"/metrics")
		reqs := mfs["infer_probe_requests_total"]
		ok := func(target, model string) float64 {
			return seriesValue(reqs, map[string]string{"target": target, "model": model, "workload": target, "outcome": "success"})
		}
		if reqs != nil && ok("base", "sim-model") >= 5 && ok("sql-lora", "sql-lora") >= 5 {
			// Every request sent succeeds. An arrival dropped at the rate
			// ceiling (its dispatcher late, as on a CPU starved under the
			// race detector) was never sent: the exporter says its own
			// client was saturated, which says nothing of the routing by
			// model this test is about.
			late := mfs["infer_probe_dropped_requests_total"]
			for _, model := range []string{"sim-model", "sql-lora"} {
				all := seriesValue(reqs, map[string]string{"model": model})
				bad := all - seriesValue(reqs, map[string]string{"model": model, "outcome": "success"}) -
					seriesValue(late, map[string]string{"model": model, "reason": "rate_ceiling"})
				if bad > 0 {
					t.Errorf("%v of %v requests for %s did not succeed; by outcome %v, dropped by reason %v",
						bad, all, model, byLabel(reqs, model, "outcome"), byLabel(late, model, "reason"))
				}
			}
			// Every series of a target carries its model: its tokens, and
			// nothing of the one model under the other target.
			toks := mfs["infer_probe_completion_tokens_total"]
			if seriesValue(toks, map[string]string{"target": "sql-lora", "model": "sql-lora"}) == 0 ||
				seriesValue(toks, map[string]string{"target": "sql-lora", "model": "sim-model"}) != 0 ||
				seriesValue(toks, map[string]string{"target": "base", "model": "sql-lora"}) != 0 {
				t.Errorf("completion tokens by target and model: %v", toks)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30 s: base %v, sql-lora %v successful requests; want 5 each", ok("base", "sim-model"), ok("sql-lora", "sql-lora"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestImageWorkloadPromptTokens: a workload with images {count: 2} runs
// against two simulators that differ only in their image tokens (576 and
// 0). The exporter reads prompt tokens from the server's usage, so its
// infer_probe_prompt_tokens_total per successful request differs between
// the two by exactly 2 x 576, and equals the first simulator's own prompt
// length per request (vllm:request_prompt_tokens).
func TestImageWorkloadPromptTokens(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.05
	withImages, simA := simulatortest.StartTest(t, cfg)
	cfg.ImageTokens = 0
	without, _ := simulatortest.StartTest(t, cfg)
	file := writeConfig(t, fmt.Sprintf(`targets:
  - {name: a, url: %q, model: sim-model, timeout: 30s}
  - {name: b, url: %q, model: sim-model, timeout: 30s}
workloads:
  - name: a
    target: a
    arrival: {process: constant, rate: 20}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: 4}}
    images: {count: 2, width: 8, height: 8}
  - name: b
    target: b
    arrival: {process: constant, rate: 20}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: 4}}
    images: {count: 2, width: 8, height: 8}
`, withImages, without))
	base := startExporter(t, "--config.file="+file)
	// The server-reported prompt lengths of the successful requests, from
	// one histogram: its sum and count are read together. (The counters
	// infer_probe_prompt_tokens_total and infer_probe_requests_total are
	// each added to as a request ends, one after the other: a scrape
	// between the two, which the race detector's slowness made likely,
	// read 152 tokens of 8 requests over 7.)
	perRequest := func(mfs map[string]*dto.MetricFamily, target string) (tokens, requests float64) {
		for _, m := range mfs["infer_probe_prompt_length_tokens"].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "target" && lp.GetValue() == target {
					tokens += m.GetHistogram().GetSampleSum()
					requests += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return tokens, requests
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mfs := scrape(t, base+"/metrics")
		ta, ra := perRequest(mfs, "a")
		tb, rb := perRequest(mfs, "b")
		if ra >= 5 && rb >= 5 {
			if diff := ta/ra - tb/rb; diff != 2*simulator.DefaultImageTokens {
				t.Errorf("prompt tokens per request: %v with image tokens, %v without; differ by %v, want %d",
					ta/ra, tb/rb, diff, 2*simulator.DefaultImageTokens)
			}
			// The simulator's own prompt lengths (vllm:request_prompt_tokens,
			// of its finished requests; their count may differ from the
			// exporter's at this instant, so compare the means).
			var simTokens, simRequests float64
			mfsA, _ := simA.Registry().Gather()
			for _, mf := range mfsA {
				if mf.GetName() == "vllm:request_prompt_tokens" {
					simRequests = float64(mf.GetMetric()[0].GetHistogram().GetSampleCount())
					simTokens = mf.GetMetric()[0].GetHistogram().GetSampleSum()
				}
			}
			if simRequests == 0 || simTokens/simRequests != ta/ra {
				t.Errorf("the simulator prefilled %v tokens per request, the exporter counted %v", simTokens/simRequests, ta/ra)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30 s: %v and %v successful requests; want 5 each", ra, rb)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
