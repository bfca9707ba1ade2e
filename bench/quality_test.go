package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/quality"
)

// TestPerplexityFigure runs the bench against two simulators alike but for
// the degradation fault, and checks the perplexity figure against their
// ground truth and its place in the ranking's accuracy component: the
// healthy target scores 1, the degraded one the ratio of the
// perplexities, exp(-penalty).
func TestPerplexityFigure(t *testing.T) {
	healthy := startSim(t, 2*time.Millisecond, 1, 0)
	degraded := startSim(t, 2*time.Millisecond, 1, 0)
	const penalty = 0.7
	if err := degraded.Sim.SetFaults(simulator.Faults{LogprobPenalty: penalty}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "b.yml", targetsYAML([]string{"healthy", "degraded"}, []*simTarget{healthy, degraded})+`
bench:
  matrix: {concurrencies: [1], shapes: [{input_tokens: 8, output_tokens: 2}]}
  warmup: 0s
  duration: 200ms
  repeats: 1
  prompt_set_size: 4
  stability: {enabled: false}
  ranking: {resamples: 100}
  perplexity: {repeats: 2}
`)
	out := filepath.Join(dir, "out")
	if code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+out); code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)
	ref := quality.Reference()
	seed := healthy.Sim.Config().Seed
	want := map[string]float64{}
	for name, p := range map[string]float64{"healthy": 0, "degraded": penalty} {
		want[name], _ = simulator.ExpectedPerplexity(seed, ref.Body, p)
	}
	_, tokens := simulator.ExpectedPerplexity(seed, ref.Body, 0)
	if len(r.Perplexity) != 2 {
		t.Fatalf("perplexity results %+v", r.Perplexity)
	}
	for _, p := range r.Perplexity {
		w := want[p.Target]
		for _, v := range []report.Num{p.Perplexity, p.Min, p.Max} {
			if math.Abs(float64(v)-w) > 1e-9*w {
				t.Errorf("%s: perplexity %v (min %v, max %v), the simulator's truth %v", p.Target, p.Perplexity, p.Min, p.Max, w)
			}
		}
		if p.Tokens != tokens || p.Scores != 2 || p.Repeats != 2 || p.Failures != nil || p.TextSHA256 != ref.SHA256 ||
			p.Dialect != quality.DialectOpenAIEcho || math.Abs(float64(p.MeanLogprob)+math.Log(w)) > 1e-9 {
			t.Errorf("%s: %+v", p.Target, p)
		}
	}
	// The HTML report shows the JSON's numbers.
	html, err := os.ReadFile(filepath.Join(out, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Perplexity {
		if cell := `data-q="perplexity" data-value="` + report.FormatFloat(float64(p.Perplexity)) + `"`; !strings.Contains(string(html), cell) {
			t.Errorf("the HTML report lacks %s", cell)
		}
	}
	if !strings.Contains(string(html), ref.SHA256) {
		t.Error("the HTML report does not name the text's hash")
	}
	if !strings.Contains(strings.Join(r.Ranking.Components, ","), "accuracy") {
		t.Fatalf("components %v lack accuracy", r.Ranking.Components)
	}
	for _, e := range r.Ranking.Entries {
		w := map[string]float64{"healthy": 1, "degraded": math.Exp(-penalty)}[e.Target]
		if math.Abs(float64(e.Accuracy)-w) > 1e-9 {
			t.Errorf("%s: accuracy score %v, want %v", e.Target, e.Accuracy, w)
		}
	}
}

// TestAccuracyCombination: the accuracy component is the mean of the
// sub-scores that exist.
func TestAccuracyCombination(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name       string
		fractions  []float64
		perplexity []float64
		want       []float64 // nil: not scored
	}{
		{"neither", nil, nil, nil},
		{"checks only", []float64{1, 0.5}, nil, []float64{1, 0.5}},
		{"perplexity only", nil, []float64{10, 20}, []float64{1, 0.5}},
		{"both", []float64{0.5, 1}, []float64{10, 40}, []float64{0.75, 0.625}},
		{"one target not scored", nil, []float64{8, nan, 16}, []float64{1, 0, 0.5}},
		{"not scored, with checks", []float64{1, 1}, []float64{nan, 5}, []float64{0.5, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &rankInput{perplexity: tc.perplexity}
			got := in.accuracy(tc.fractions)
			if (got == nil) != (tc.want == nil) || len(got) != len(tc.want) {
				t.Fatalf("accuracy %v, want %v", got, tc.want)
			}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-12 {
					t.Errorf("target %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestPerplexityConfig: bench.perplexity's bounds, and a target that cannot
// be scored, are refused at load with their line.
func TestPerplexityConfig(t *testing.T) {
	const head = "targets:\n  - {name: a, url: 'http://127.0.0.1:1', model: m, flavor: %s}\nbench:\n  matrix: {rates: [1]}\n"
	for _, tc := range []struct {
		name, flavor, block string
		want                string // "" accepted
	}{
		{"defaults", "openai-chat", "  perplexity: {}\n", ""},
		{"tgi", "tgi", "  perplexity: {repeats: 5, timeout: 30s}\n", ""},
		{"too many repeats", "sglang", "  perplexity: {repeats: 21}\n", "b.yml:5: bench.perplexity.repeats: must be between 1 and 20"},
		{"bad timeout", "sglang", "  perplexity: {timeout: 1h}\n", "bench.perplexity.timeout: must be positive and at most 10m0s"},
		{"unsupported", "ollama-generate", "  perplexity: {}\n", `b.yml:5: bench.perplexity: target "a" (ollama-generate) cannot be scored: Ollama returns`},
		{"unknown field", "tgi", "  perplexity: {text: mine}\n", `b.yml:5: bench.perplexity.text: unknown field "text"; known here: repeats, timeout`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(strings.Replace(head, "%s", tc.flavor, 1)+tc.block), "b.yml")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if p := c.Bench.Perplexity; p == nil || p.Repeats < 1 || p.Timeout <= 0 {
					t.Errorf("perplexity spec %+v", p)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAccuracyWithValidity: the answers' valid ratio is one more
// sub-score of the accuracy component; a target none of whose answers was
// checked (NaN) is scored on the others.
func TestAccuracyWithValidity(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name                string
		fractions, validity []float64
		want                []float64
	}{
		{"validity only", nil, []float64{0.9, 1}, []float64{0.9, 1}},
		{"beside checks", []float64{1, 0.5}, []float64{0.6, 1}, []float64{0.8, 0.75}},
		{"one target unchecked", []float64{1, 0.5}, []float64{0.6, nan}, []float64{0.8, 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&rankInput{validity: tc.validity}).accuracy(tc.fractions)
			if len(got) != len(tc.want) {
				t.Fatalf("accuracy %v, want %v", got, tc.want)
			}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-12 {
					t.Errorf("target %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
