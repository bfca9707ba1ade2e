package bench

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// TestBenchResponsesFlavor: a bench of a target that speaks the Responses
// API (openai-responses), against the simulator in reasoning mode: every
// measured request succeeds with its TTFT, TTFA and TPOT, and its output
// and reasoning tokens are the ones response.completed's usage reports.
// A logic test: no figure's value is judged but the token counts.
func TestBenchResponsesFlavor(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.DecodeStep, cfg.DecodePerSeq, cfg.PrefillTokensPerSecond = 2*time.Millisecond, 0, 1e6
	cfg.ReasoningTokens = 2
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := wrapSim(t, sim)
	dir := t.TempDir()
	out, _ := runBenchOK(t, dir, fmt.Sprintf(`targets:
  - {name: sim, url: %s, model: sim-model, flavor: openai-responses, timeout: 30s}
bench:
  matrix: {concurrencies: [1], shapes: [{input_tokens: 8, output_tokens: 6}]}
  warmup: 0s
  duration: 300ms
  repeats: 1
  prompt_set_size: 4
  sampling: {ignore_eos: true}
  stability: {enabled: false}
  ranking: {resamples: 100}
`, st.URL))
	r := readReport(t, out)
	if len(r.Cells) != 1 {
		t.Fatalf("%d cells", len(r.Cells))
	}
	s := r.Cells[0].Summary
	if s.Requests == 0 || s.Successes != s.Requests {
		t.Fatalf("%d requests, %d successes (%v)", s.Requests, s.Successes, s.Outcomes)
	}
	if s.TTFT.Count != s.Successes || s.TTFA.Count != s.Successes || s.TPOT.Count != s.Successes {
		t.Errorf("TTFT %d, TTFA %d, TPOT %d values for %d successes", s.TTFT.Count, s.TTFA.Count, s.TPOT.Count, s.Successes)
	}
	if s.ReasoningTokens != 2*s.Successes || s.ReasoningRequests != s.Successes {
		t.Errorf("reasoning tokens %d over %d requests, want 2 each of %d", s.ReasoningTokens, s.ReasoningRequests, s.Successes)
	}
	if !(s.TTFA.P50 > s.TTFT.P50) {
		t.Errorf("TTFA p50 %v not after TTFT p50 %v: the answer follows two reasoning tokens", s.TTFA.P50, s.TTFT.P50)
	}
	if s.InputTokens == 0 {
		t.Error("no input tokens: the usage's input_tokens were not read")
	}
}
