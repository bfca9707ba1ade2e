package prober

import (
	"net/http"
	"strings"
	"testing"
)

// responsesConfig probes the simulator's /v1/responses: a target of flavor
// openai-responses, whose modules use it.
const responsesConfig = `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
    flavor: openai-responses
modules:
  responses:
    target: sim
    requests: 3
    concurrency: 2
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: 8}
    sampling: {ignore_eos: true}
    known_answers:
      - prompt: "Say some words."
        expect: '^( (WORDS))+$'
  wrong_model:
    target: sim
    model: nope
probe:
  max_requests_per_second: 1000
  max_concurrent_probes: 100
`

// TestProbeResponsesFlavor: a /probe of a module whose target speaks the
// Responses API, against the simulator in reasoning mode: every request a
// success with its TTFT, TTFA and TPOT, its output and reasoning tokens
// from response.completed's usage, the known answer read from the
// output_text deltas; a model the server does not serve is an http_4xx.
func TestProbeResponsesFlavor(t *testing.T) {
	cfg := instantSim()
	cfg.ReasoningTokens = 5
	url, _, rec := startSim(t, cfg)
	yml := strings.Replace(responsesConfig, "WORDS", simWords, 1)
	e := newEnv(t, loadConfig(t, yml, url), nil)
	code, body := e.scrape(t, "responses", url, "10", false)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	m := parseMetrics(t, body)
	for k, v := range map[string]float64{
		"probe_success":                                  1,
		`probe_requests{outcome="success"}`:              3,
		"probe_output_tokens":                            3 * 8,
		"probe_reasoning_tokens":                         3 * 5,
		"probe_time_to_first_token_seconds_count":        3,
		"probe_time_per_output_token_seconds_count":      3,
		"probe_time_to_first_answer_token_seconds_count": 3,
		"probe_known_answer_success":                     1,
	} {
		if got := m.must(t, k); got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if n := rec.count(); n != 4 {
		t.Errorf("%d requests to /v1/, want 3 and the known answer's", n)
	}

	code, body = e.scrape(t, "wrong_model", url, "10", false)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	m = parseMetrics(t, body)
	if m.must(t, "probe_success") != 0 || m.must(t, `probe_requests{outcome="http_4xx"}`) != 1 || m.must(t, `probe_http_errors{code="404"}`) != 1 {
		t.Errorf("wrong model: %s", body)
	}
}
