package bench

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// TestBenchAnswerValidity: two targets answer a shape with a JSON schema
// and a shape with tools, one of them (the simulator's invalid_structured
// fault) breaking 10% of its structured answers and tool calls. Each
// cell counts its answers' validity; the faulty target's valid ratio is
// 0.9 within four standard deviations of the count it measured, the other
// target's is 1; the ranking's accuracy component is each target's
// pooled ratio; the CSV, Markdown and HTML reports carry the figures.
// The fault breaks an answer by a hash of its prompt, so the prompt set
// is larger than the requests sent: each answer is a draw of its own.
// A logic test: counts, not timings.
func TestBenchAnswerValidity(t *testing.T) {
	testenv.Slow(t, "runs a bench of four 2-second cells in real time")
	t.Parallel()
	start := func(invalid float64) string {
		cfg := simulator.DefaultConfig()
		cfg.DecodeStep, cfg.DecodePerSeq, cfg.PrefillTokensPerSecond = time.Millisecond, 0, 1e6
		cfg.Faults.InvalidStructured = invalid
		sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return wrapSim(t, sim).URL
	}
	faulty, good := start(0.1), start(0)
	dir := t.TempDir()
	out, _ := runBenchOK(t, dir, fmt.Sprintf(`targets:
  - {name: faulty, url: %s, model: sim-model, timeout: 30s}
  - {name: good, url: %s, model: sim-model, timeout: 30s}
bench:
  matrix:
    concurrencies: [8]
    shapes:
      - name: json
        input_tokens: 8
        output_tokens: 12
        response_format:
          type: json_schema
          schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
      - name: tools
        input_tokens: 8
        output_tokens: 12
        tools:
          - name: get_weather
            parameters: {type: object, properties: {city: {type: string}}, required: [city]}
        tool_choice: required
  warmup: 0s
  duration: 2s
  repeats: 1
  prompt_set_size: 5000
  sampling: {ignore_eos: true}
  stability: {enabled: false}
  weights: {latency: 0.4, throughput: 0.3, accuracy: 0.3}
  ranking: {resamples: 100}
`, faulty, good))
	r := readReport(t, out)
	checked := map[string][2]int{} // target: valid, all
	for i := range r.Cells {
		c := &r.Cells[i]
		counts := func(s *report.Stats) map[string]int { return s.StructuredChecks }
		other := func(s *report.Stats) map[string]int { return s.ToolCallChecks }
		if strings.Contains(c.Key, "tools") {
			counts, other = other, counts
		}
		if !math.IsNaN(report.ValidRatio(c, other)) {
			t.Errorf("%s: the other check counted answers", c.Key)
		}
		valid, all := 0, 0
		for j := range c.Repeats {
			for res, n := range counts(&c.Repeats[j].Stats) {
				all += n
				if res == "valid" {
					valid += n
				}
			}
		}
		if s := c.Summary; all != s.Successes || s.Successes == 0 {
			t.Errorf("%s: %d answers checked of %d successes", c.Key, all, s.Successes)
		}
		v := checked[c.Target]
		checked[c.Target] = [2]int{v[0] + valid, v[1] + all}
		ratio := report.ValidRatio(c, counts)
		if c.Target == "good" && ratio != 1 {
			t.Errorf("%s: valid ratio %v, want 1", c.Key, ratio)
		}
		if c.Target == "faulty" {
			// Binomial(all, 0.9): four standard deviations.
			if sd := math.Sqrt(0.09 / float64(all)); all < 50 || math.Abs(ratio-0.9) > 4*sd {
				t.Errorf("%s: valid ratio %.4f of %d answers, want 0.9 ± %.4f", c.Key, ratio, all, 4*sd)
			}
		}
	}
	for _, e := range r.Ranking.Entries {
		v := checked[e.Target]
		want := float64(v[0]) / float64(v[1])
		if got := float64(e.Accuracy); math.Abs(got-want) > 1e-9 {
			t.Errorf("ranking: %s accuracy %v, want its pooled valid ratio %v", e.Target, got, want)
		}
	}
	if !strings.Contains(strings.Join(r.Ranking.Components, ","), "accuracy") {
		t.Errorf("ranking components %v: no accuracy", r.Ranking.Components)
	}
	for file, want := range map[string][]string{
		"report.csv":  {"structured_valid_ratio", "tool_call_valid_ratio"},
		"report.md":   {"## Answer validity", "| faulty/"},
		"report.html": {`id="validity"`, `data-col="structured_valid_ratio"`},
	} {
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s has no %q", file, w)
			}
		}
	}
	if !render.HasValidity(r) {
		t.Error("HasValidity: false")
	}
}
