package main

import (
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/quality"
)

// TestDemoPerplexity: --demo wires the quality probe: /metrics shows the
// live perplexity gauge and /probe answers the perplexity module, both
// equal to the demo simulator's ground truth.
func TestDemoPerplexity(t *testing.T) {
	base := startExporter(t, "--demo")
	ref := quality.Reference()
	want, tokens := simulator.ExpectedPerplexity(simulator.DefaultConfig().Seed, ref.Body, 0)
	near := func(v float64) bool { return math.Abs(v-want) <= 1e-9*want }

	// The first score runs when the configuration is applied.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mfs := scrape(t, base+"/metrics")
		if mf := mfs["infer_probe_perplexity"]; mf != nil {
			m := mf.GetMetric()[0]
			if v := m.GetGauge().GetValue(); !near(v) {
				t.Errorf("infer_probe_perplexity %v, the simulator's truth %v", v, want)
			}
			if v := mfs["infer_probe_perplexity_tokens"].GetMetric()[0].GetGauge().GetValue(); v != float64(tokens) {
				t.Errorf("infer_probe_perplexity_tokens %v, want %d", v, tokens)
			}
			checkHelp(t, mfs)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no infer_probe_perplexity within 20 s of the start")
		}
		time.Sleep(100 * time.Millisecond)
	}

	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<code>(http://127\.0\.0\.1:\d+)</code>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("the landing page does not show the demo target's URL")
	}
	mfs := scrape(t, base+"/probe?module=demo-perplexity&target="+url.QueryEscape(string(m[1])))
	if v := mfs["probe_success"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("probe_success %v", v)
	}
	if mf := mfs["probe_perplexity"]; mf == nil || !near(mf.GetMetric()[0].GetGauge().GetValue()) {
		t.Errorf("probe_perplexity %v, the simulator's truth %v", mf, want)
	}
	checkHelp(t, mfs)
}
