package prober

import (
	"net/http"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/memwatch"
)

// TestProbeOversizedAnswer: a module whose known answer may run to 512
// tokens, against a server sending 1,000,000 bytes of text a token. Before
// the kept text had a bound, one scrape appended every event to the answer
// (512 MB, then copied into the observation): the exporter died of it
// under a 3 GB cap. Now the check ends at the answer's bound as a stream
// error, the probe fails as a failed request, and the scrape holds a few
// MB.
func TestProbeOversizedAnswer(t *testing.T) {
	cfg := instantSim()
	cfg.Faults.PadContentBytes = 1_000_000
	url, _, _ := startSim(t, cfg)
	yml := `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
modules:
  big_answer:
    known_answers:
      - prompt: "Say some words."
        expect: 'words'
        max_tokens: 512
      - prompt: "And more."
        expect: 'more'
        max_tokens: 512
probe:
  max_requests_per_second: 1000
`
	e := newEnv(t, loadConfig(t, yml, url), nil)
	w := memwatch.Start(100<<20, nil)
	code, body := e.scrape(t, "big_answer", url, "20", false)
	peak, over := w.Stop()
	t.Logf("heap growth peak %d KB over one scrape", peak>>10)
	if over {
		t.Fatalf("one scrape grew the heap by %d MB", peak>>20)
	}
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	m := parseMetrics(t, body)
	if m.must(t, "probe_success") != 0 || m.must(t, "probe_known_answer_success") != 0 {
		t.Fatalf("an oversized answer passed:\n%s", body)
	}
	if r := m.failedReason(t); r != ReasonRequestFailed {
		t.Errorf("failed due to %q, want %q", r, ReasonRequestFailed)
	}
	for _, check := range []string{"0", "1"} {
		if m.must(t, `probe_known_answer_check_success{check="`+check+`"}`) != 0 {
			t.Errorf("check %s passed", check)
		}
	}
	if logs := e.logs.String(); !strings.Contains(logs, "answer text over its bound of 65536 bytes") {
		t.Errorf("the logs do not say why the checks failed:\n%s", logs)
	}
}

// TestProbeBuildsPromptsAsTaken: a probe of 50 requests of 80,000-token
// prompts, one at a time, holds one prompt and body at a time. Built all
// before the first was sent (as they were), they held some 50 MB for the
// whole probe; at concurrency 100 and 1M-token prompts, 1.5 GB.
func TestProbeBuildsPromptsAsTaken(t *testing.T) {
	sc := instantSim()
	sc.MaxModelLen = 100_000
	url, _, rec := startSim(t, sc)
	yml := `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
modules:
  long_prompts:
    requests: 50
    concurrency: 1
    prompt:
      input_tokens: {dist: fixed, mean: 80000}
      output_tokens: {dist: fixed, mean: 1}
probe:
  max_requests_per_second: 1000
`
	e := newEnv(t, loadConfig(t, yml, url), nil)
	w := memwatch.Start(24<<20, nil)
	code, body := e.scrape(t, "long_prompts", url, "60", false)
	peak, over := w.Stop()
	t.Logf("heap growth peak %d KB over one scrape", peak>>10)
	if over {
		t.Errorf("one scrape grew the heap by %d MB", peak>>20)
	}
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	m := parseMetrics(t, body)
	if got := m.must(t, `probe_requests{outcome="success"}`); got != 50 || rec.count() != 50 {
		t.Errorf("%v successful requests, %d at the server; want 50", got, rec.count())
	}
}
