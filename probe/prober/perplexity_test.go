package prober

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/quality"
)

// pplConfig has the simulator as its one target and perplexity modules; its
// threshold, {{MAX}}, lies between the healthy and the degraded
// perplexity.
var pplConfig = `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
    bearer_token_file: token
modules:
  ppl:
    kind: perplexity
  ppl_strict:
    kind: perplexity
    max_perplexity: {{MAX}}
  ppl_wrong_model:
    kind: perplexity
    model: nope
  ppl_tgi:
    kind: perplexity
    flavor: tgi
probe:
  max_requests_per_second: 1000
  max_concurrent_probes: 100
`

// TestPerplexityModule probes the simulator with perplexity modules,
// healthy and degraded, and checks the answer against its ground truth:
// the perplexity and tokens it reports, the threshold's verdict, the
// failure reasons, and that no generation series is sent.
func TestPerplexityModule(t *testing.T) {
	url, sim, _ := startSim(t, instantSim())
	ref := quality.Reference()
	healthy, tokens := simulator.ExpectedPerplexity(sim.Config().Seed, ref.Body, 0)
	const penalty = 0.5
	degraded := healthy * math.Exp(penalty)
	limit := (healthy + degraded) / 2
	cfg := loadConfig(t, strings.ReplaceAll(pplConfig, "{{MAX}}", fmt.Sprint(limit)), url)
	e := newEnv(t, cfg, nil)
	label := fmt.Sprintf("{text=%q}", ref.Label())

	for _, tc := range []struct {
		name, module, target string
		penalty              float64
		success              bool
		reason               string  // probe_failed_due_to
		scoreReason          string  // probe_perplexity_failed_due_to
		perplexity           float64 // 0: absent
		status               float64
	}{
		{"healthy", "ppl", url, 0, true, "", "", healthy, 200},
		{"within the threshold", "ppl_strict", url, 0, true, "", "", healthy, 200},
		{"degraded past the threshold", "ppl_strict", url, penalty, false, ReasonPerplexityExceeded, "", degraded, 200},
		{"degraded without a threshold", "ppl", url, penalty, true, "", "", degraded, 200},
		{"unknown model", "ppl_wrong_model", url, 0, false, ReasonRequestFailed, quality.ReasonHTTPStatus, 0, 404},
		{"engine without the dialect", "ppl_tgi", url, 0, false, ReasonRequestFailed, quality.ReasonHTTPStatus, 0, 404},
		{"target not allowed", "ppl", "http://127.0.0.1:1", 0, false, ReasonNotAllowed, "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := sim.SetFaults(simulator.Faults{LogprobPenalty: tc.penalty}); err != nil {
				t.Fatal(err)
			}
			code, body := e.scrape(t, tc.module, tc.target, "10", false)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			m := parseMetrics(t, body)
			if got := m.must(t, "probe_success"); got != b2f(tc.success) {
				t.Errorf("probe_success %v, want %v:\n%s", got, b2f(tc.success), body)
			}
			if got := m.failedReason(t); got != tc.reason {
				t.Errorf("probe_failed_due_to %q, want %q", got, tc.reason)
			}
			if got := m.must(t, "probe_http_status_code"); got != tc.status {
				t.Errorf("probe_http_status_code %v, want %v", got, tc.status)
			}
			v, ok := m["probe_perplexity"+label]
			switch {
			case tc.perplexity == 0 && ok:
				t.Errorf("probe_perplexity %v without a score", v)
			case tc.perplexity != 0 && (!ok || math.Abs(v-tc.perplexity) > 1e-9*tc.perplexity):
				t.Errorf("probe_perplexity %v (present %v), the simulator's truth %v", v, ok, tc.perplexity)
			case tc.perplexity != 0 && m["probe_perplexity_tokens"+label] != float64(tokens):
				t.Errorf("probe_perplexity_tokens %v, want %d", m["probe_perplexity_tokens"+label], tokens)
			}
			if got, ok := m["probe_perplexity_max"]; (tc.module == "ppl_strict") != ok || ok && got != limit {
				t.Errorf("probe_perplexity_max %v (present %v), want %v for ppl_strict only", got, ok, limit)
			}
			for _, r := range quality.Reasons {
				if got := m.must(t, fmt.Sprintf("probe_perplexity_failed_due_to{reason=%q}", r)); got != b2f(r == tc.scoreReason) {
					t.Errorf("probe_perplexity_failed_due_to{reason=%q} %v", r, got)
				}
			}
			for k := range m {
				if strings.HasPrefix(k, "probe_requests") || strings.HasPrefix(k, "probe_time_to_first") {
					t.Errorf("a perplexity probe sent the generation series %s", k)
				}
			}
		})
	}
	if strings.Contains(e.logs.String(), testToken) {
		t.Error("the logs hold the bearer token")
	}
	for _, a := range e.connects.list() {
		if strings.HasSuffix(a, ":1") {
			t.Errorf("the refused target was dialled: %s", a)
		}
	}
}

// TestPerplexitySeriesDocumented: docs/probe.md defines every series of a
// perplexity probe, and the reason only it gives.
func TestPerplexitySeriesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/probe.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	want := []string{ReasonPerplexityExceeded, "kind: perplexity", "max_perplexity"}
	for _, d := range []*prometheus.Desc{descPPL, descPPLTokens, descPPLMax, descPPLFailed} {
		want = append(want, "`"+name.FindStringSubmatch(d.String())[1])
	}
	for _, w := range want {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/probe.md does not mention %s", w)
		}
	}
}
