package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

const goodConfig = `# A bench of two targets.
targets:
  - name: a
    url: http://127.0.0.1:8000
    model: m
  - name: b
    url: http://127.0.0.1:8001
    model: m
    flavor: openai-completions
bench:
  seed: 5
  matrix:
    rates: [1, 2.5]
    concurrencies: [4]
    shapes:
      - {input_tokens: 128, output_tokens: 32}
      - name: long
        input_tokens: {dist: uniform, min: 500, max: 700}
        output_tokens: 64
    replays:
      - {name: trace, source: azure, path: trace.csv, speed: 2}
  warmup: 0s
  slo: {ttft: 500ms}
  sweep: {start: 2}
  weights: {latency: 1}
  known_answers:
    - {prompt: "2+2=", expect: "4"}
`

func TestParseGood(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, dir, "trace.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:31:22.2632200,10,2\n")
	c, err := Parse([]byte(goodConfig), filepath.Join(dir, "bench.yml"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Bench
	if len(c.Targets) != 2 || c.Targets[1].Flavor != "openai-completions" || c.Targets[0].Flavor != config.FlavorOpenAIChat || c.Targets[0].Timeout != config.DefaultTimeout {
		t.Errorf("targets %+v", c.Targets)
	}
	if s.Matrix.Shapes[0].Name != "in128-out32" || s.Matrix.Shapes[1].InputTokens.Dist != "uniform" || s.Matrix.Shapes[1].OutputTokens.Mean != 64 {
		t.Errorf("shapes %+v", s.Matrix.Shapes)
	}
	if s.Warmup != 0 || s.Duration != DefaultDuration || s.Repeats != 3 || s.Matrix.Process != "poisson" {
		t.Errorf("defaults: warmup %v duration %v repeats %d process %s", s.Warmup, s.Duration, s.Repeats, s.Matrix.Process)
	}
	if s.Stability.Window != 20*time.Second || s.Stability.MaxDuration != DefaultStabilityMaxDuration || !s.Stability.On() {
		t.Errorf("stability %+v", s.Stability)
	}
	if *s.Weights != (report.Weights{Latency: 1}) {
		t.Errorf("weights %+v: a weights block replaces the defaults", *s.Weights)
	}
	if s.Sweep.Factor != 2 || s.Sweep.Warmup != 0 || s.Sweep.Duration != DefaultDuration || s.Sweep.MinGoodput != 0.95 {
		t.Errorf("sweep %+v", *s.Sweep)
	}
	if s.KnownAnswers[0].Pattern == nil || s.KnownAnswers[0].MaxTokens != config.DefaultKnownAnswerMaxTokens {
		t.Errorf("known answers %+v", s.KnownAnswers)
	}
	if r := s.Matrix.Replays[0]; r.Path != filepath.Join(dir, "trace.csv") || r.Sample != 1 || r.Speed != 2 {
		t.Errorf("replay %+v", r)
	}
	if len(c.SHA256) != 64 || !strings.Contains(c.EffectiveYAML(), "in128-out32") {
		t.Errorf("sha %q", c.SHA256)
	}
	d, _ := Parse([]byte(goodConfig+"\n"), filepath.Join(dir, "bench.yml"))
	if d.SHA256 == c.SHA256 {
		t.Error("the SHA-256 does not cover the file's bytes")
	}
}

func TestParseDefaultsWeights(t *testing.T) {
	c, err := Parse([]byte("targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench: {matrix: {rates: [1]}}\n"), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	if *c.Bench.Weights != DefaultWeights || c.Bench.Warmup != DefaultWarmup || c.Bench.MinSuccess != 0.999 {
		t.Errorf("%+v", c.Bench)
	}
	// 0 is a floor of its own (none), not the default's placeholder.
	c, err = Parse([]byte("targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench: {matrix: {rates: [1]}, min_success: 0}\n"), "x.yml")
	if err != nil || c.Bench.MinSuccess != 0 || !strings.Contains(c.EffectiveYAML(), "min_success: 0\n") {
		t.Errorf("min_success: 0: %v, %+v", err, c)
	}
	// The default gate: TTFT and TPOT at p50 and p99, E2E p99, the
	// throughput and the success ratio.
	want := []string{"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p99", "output_tokens_per_second", "success_ratio"}
	if !slices.Equal(c.Bench.Regression.Metrics, want) {
		t.Errorf("gated by default %v, want %v", c.Bench.Regression.Metrics, want)
	}
	// Every figure with an interval may be gated; a TTFA quantile, which
	// has none, may not.
	if _, err := Parse([]byte("targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench: {matrix: {rates: [1]}, regression: {metrics: [goodput_ratio, success_ratio, output_tokens_per_second, e2e_p90]}}\n"), "x.yml"); err != nil {
		t.Errorf("the figures with intervals: %v", err)
	}
	if _, err := Parse([]byte("targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench: {matrix: {rates: [1]}, regression: {metrics: [ttfa_p99]}}\n"), "x.yml"); err == nil || !strings.Contains(err.Error(), "bench.regression.metrics[0]") {
		t.Errorf("ttfa_p99 gated: %v, want refused", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown bench field", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  duraton: 1s\n",
			[]string{`b.yml:4: bench.duraton: unknown field "duraton"; did you mean duration?`}},
		{"target checked by the exporter's loader, line kept", "bench:\n  matrix: {rates: [1]}\ntargets:\n  - name: a\n    url: ftp://x\n    model: m\n",
			[]string{"b.yml:5: targets[0].url:"}},
		{"no targets", "bench: {matrix: {rates: [1]}}\n", []string{"b.yml:1: targets: at least one target"}},
		{"empty matrix", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {}\n",
			[]string{"b.yml:3: bench.matrix.rates: the matrix needs"}},
		{"bad rate and concurrency", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix:\n    rates: [1, -2]\n    concurrencies: [0]\n",
			[]string{"b.yml:4: bench.matrix.rates[1]: must be a positive rate", "b.yml:5: bench.matrix.concurrencies[0]: must be at least 1"}},
		{"bad length key", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix:\n    rates: [1]\n    shapes:\n      - input_tokens: {dist: fixed, maen: 3}\n",
			[]string{"b.yml:6: field maen not found in a length"}},
		{"bad length value", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix:\n    rates: [1]\n    shapes:\n      - input_tokens: lots\n",
			[]string{"b.yml:6:", "not a token count"}},
		{"unknown subset target", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  targets: [a, z]\n  matrix: {rates: [1]}\n",
			[]string{"b.yml:3: bench.targets[1]: \"z\" is not a configured target"}},
		{"ranking and regression", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  ranking: {latency: e2e_p42}\n  regression:\n    metrics: [tpot_p99, nope]\n",
			[]string{"b.yml:4: bench.ranking.latency:", "b.yml:6: bench.regression.metrics[1]:"}},
		{"goodput sweep without slo", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  sweep: {factor: 1, pass: goodput}\n",
			[]string{"bench.sweep.factor: must be above 1", "bench.sweep.pass: pass: goodput needs bench.slo"}},
		{"bad sweep rule", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  sweep: {pass: latency, min_success: 1.5}\n",
			[]string{"b.yml:4: bench.sweep.pass: \"latency\": goodput or success", "bench.sweep.min_success: must be a ratio in (0, 1]"}},
		{"min_success outside 0..1", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  min_success: 1.5\n",
			[]string{"b.yml:4: bench.min_success: must be a ratio between 0 and 1, got 1.5"}},
		{"negative min_success", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  min_success: -0.1\n",
			[]string{"b.yml:4: bench.min_success: must be a ratio between 0 and 1, got -0.1"}},
		{"bad replay words", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix:\n    replays:\n      - {name: t, source: azure, path: b.yml, words: fresh}\n",
			[]string{"b.yml:5: bench.matrix.replays[0].words: \"fresh\": per_repeat or reuse"}},
		{"bad known answer", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  known_answers:\n    - {prompt: x, expect: '('}\n",
			[]string{"b.yml:5: bench.known_answers[0].expect:"}},
		{"missing trace", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix:\n    replays:\n      - {name: t, source: azure, path: /nonexistent/x.csv}\n",
			[]string{"b.yml:5: bench.matrix.replays[0].path: cannot read"}},
		{"poisson rate validated by arrival", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1], process: weibull}\n",
			[]string{"b.yml:3: bench.matrix.rates[0]:", "process"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "b.yml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

const oneTarget = "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\n"

// shapes is a bench block with the given shapes list (flow items).
func shapes(items ...string) string {
	return oneTarget + "bench:\n  matrix:\n    rates: [1]\n    shapes:\n" + "      - " + strings.Join(items, "\n      - ") + "\n"
}

// TestParseLimits: the bench configuration's lengths and counts are bounded
// as the exporter's are (config.MaxTokens and the rest).
func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"fixed length", shapes("{input_tokens: {dist: fixed, mean: 1e15}}"),
			[]string{"b.yml:6: bench.matrix.shapes[0].input_tokens.mean: at most 1048576 tokens (config.MaxTokens), got 1e+15"}},
		{"plain integer length", shapes("{input_tokens: 128, output_tokens: 99999999999}"),
			[]string{"b.yml:6: bench.matrix.shapes[0].output_tokens.mean: at most 1048576 tokens (config.MaxTokens), got 9.9999999999e+10"}},
		{"uniform max", shapes("{input_tokens: {dist: uniform, min: 1, max: 5000000}}"),
			[]string{"bench.matrix.shapes[0].input_tokens.max: at most 1048576 tokens (config.MaxTokens), got 5000000"}},
		{"NaN", shapes("{output_tokens: {dist: normal, mean: .nan, stddev: 1}}"),
			[]string{"bench.matrix.shapes[0].output_tokens.mean: must be a finite number, got NaN"}},
		{"request too long", shapes("{input_tokens: 1000000, output_tokens: 100000}"),
			[]string{"b.yml:6: bench.matrix.shapes[0]: input_tokens up to 1000000 plus output_tokens up to 100000 is 1100000 tokens: a request holds at most 1048576 (config.MaxTokens)"}},
		{"unbounded lognormal does not fit", shapes("{input_tokens: {dist: lognormal, mean: 60000, stddev: 5}, output_tokens: 1000000}"),
			[]string{"bench.matrix.shapes[0].input_tokens.max: a lognormal without max is clamped at 48576 tokens"}},
		{"shape name", shapes("{name: " + strings.Repeat("s", 201) + ", input_tokens: 5}"),
			[]string{"bench.matrix.shapes[0].name: a name of 201 bytes: at most 200 (config.MaxNameBytes)"}},
		{"known answer max_tokens", oneTarget + "bench:\n  matrix: {rates: [1]}\n  known_answers: [{prompt: p, expect: x, max_tokens: 9999999}]\n",
			[]string{"b.yml:4: bench.known_answers[0].max_tokens: at most 1048576 tokens (config.MaxTokens), got 9999999"}},
		{"min_tokens", oneTarget + "bench:\n  matrix: {rates: [1]}\n  sampling: {min_tokens: 9999999}\n",
			[]string{"b.yml:4: bench.sampling.min_tokens: at most 1048576 tokens (config.MaxTokens), got 9999999"}},
		{"prompt set size", oneTarget + "bench:\n  matrix: {rates: [1]}\n  prompt_set_size: 1000000000\n",
			[]string{"b.yml:4: bench.prompt_set_size: at most 100000 (bench.MaxPromptSetSize), got 1000000000"}},
		{"prompt set tokens", shapes("{input_tokens: 500000, output_tokens: 10}", "{input_tokens: 100000, output_tokens: 10}"),
			[]string{"b.yml:2: bench.prompt_set_size: 1000 prompts × 600000 input tokens (the mean of each shape, summed) × 1 targets is 600000000 tokens held in memory: at most 67108864 (bench.MaxPromptSetTokens)"}},
		{"resamples", oneTarget + "bench:\n  matrix: {rates: [1]}\n  ranking: {resamples: 1000000000}\n",
			[]string{"b.yml:4: bench.ranking.resamples: at most 100000 (bench.MaxResamples), got 1000000000"}},
		{"rates", oneTarget + "bench:\n  matrix:\n    rates: [" + strings.TrimSuffix(strings.Repeat("1, ", 1001), ", ") + "]\n",
			[]string{"b.yml:4: bench.matrix.rates: a list of 1001 items: at most 1000 (config.MaxListItems)"}},
		{"replay block size", oneTarget + "bench:\n  matrix:\n    replays:\n      - {name: t, source: mooncake, path: /nonexistent, block_size: 99999999}\n",
			[]string{"b.yml:5: bench.matrix.replays[0].block_size: at most 1048576 tokens (config.MaxTokens), got 99999999"}},
		{"empty", "", []string{"b.yml: empty configuration: no targets and no bench block"}},
		{"comments only", "# soon\n", []string{"b.yml: empty configuration: no targets and no bench block"}},
		{"document start only", "---\n", []string{"b.yml: empty configuration: no targets and no bench block"}},
		{"second document", oneTarget + "bench: {matrix: {rates: [1]}}\n---\nbench: {}\n",
			[]string{"b.yml:3: a second YAML document (---): the configuration is one document"}},
		{"NUL byte", oneTarget + "bench:\x00\n", []string{"b.yml:2: invalid byte 0x00 at offset 64 (binary file?)"}},
		{"too large", oneTarget + "# " + strings.Repeat("x", config.MaxFileBytes) + "\n", []string{"b.yml: file larger than 1 MiB (config.MaxFileBytes)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "b.yml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// A lognormal without max is clamped so that the request fits.
	c, err := Parse([]byte(shapes("{input_tokens: {dist: lognormal, mean: 500, stddev: 100}, output_tokens: 64}")), "b.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Bench.Matrix.Shapes[0].InputTokens.Max; got != config.MaxTokens-64 {
		t.Errorf("input max %d, want %d", got, config.MaxTokens-64)
	}
}

// TestParseErrorsCapped: a file with many problems reports
// config.MaxErrors of them and counts the rest.
func TestParseErrorsCapped(t *testing.T) {
	y := oneTarget + "bench:\n  matrix:\n    rates: [" + strings.TrimSuffix(strings.Repeat("-1, ", 250), ", ") + "]\n"
	_, err := Parse([]byte(y), "b.yml")
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != config.MaxErrors+1 || lines[len(lines)-1] != "... and 150 more errors" {
		t.Errorf("%d lines, the last %q", len(lines), lines[len(lines)-1])
	}
}

// TestLoadFileContext: the bench configuration is read as the exporter's:
// bounded, and ended by the context.
func TestLoadFileContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := writeTestFile(t, t.TempDir(), "b.yml", oneTarget+"bench: {matrix: {rates: [1]}}\n")
	if _, err := LoadFileContext(ctx, p); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: error %v, want context.Canceled", err)
	}
	if _, err := LoadFile(p); err != nil {
		t.Errorf("LoadFile: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err := LoadFile("/dev/zero")
		if want := "/dev/zero: file larger than 1 MiB (config.MaxFileBytes)"; err == nil || err.Error() != want {
			t.Errorf("/dev/zero: error %v, want %q", err, want)
		}
	}
}

// FuzzParse: whatever the bytes, the bench configuration's Parse returns,
// with at most config.MaxErrors errors and a count, and what it accepts is
// within the limits.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 60s -parallel 1 ./bench/
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		goodConfig, oneTarget + "bench: {matrix: {rates: [1]}}\n", shapes("{input_tokens: {dist: lognormal, mean: 500, stddev: 100}, output_tokens: 64}"),
		"bench:\n  matrix: {rates: [1]}\ntargets:\n  - name: a\n    url: ftp://x\n    model: m\n", "", "---\n", "\x00",
	} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile(filepath.Join("..", "internal", "config", "testdata", "good.yml")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > config.MaxFileBytes {
			t.Skip()
		}
		// A short context: a fuzzed bearer_token_file may name a FIFO.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		c, err := parse(ctx, data, filepath.Join(t.TempDir(), "b.yml"))
		if err != nil {
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			if len(errs) > config.MaxErrors+1 {
				t.Errorf("%d errors", len(errs))
			}
			return
		}
		if len(c.Targets) == 0 || len(c.Bench.Matrix.Shapes) > config.MaxListItems {
			t.Errorf("%d targets, %d shapes", len(c.Targets), len(c.Bench.Matrix.Shapes))
		}
		for _, sh := range c.Bench.Matrix.Shapes {
			in, out := sh.InputTokens.Distribution, sh.OutputTokens.Distribution
			if in.Max < 0 || out.Max < 0 || in.Max > config.MaxTokens || out.Max > config.MaxTokens ||
				((in.Dist == "normal" || in.Dist == "lognormal") && in.Max == 0) || ((out.Dist == "normal" || out.Dist == "lognormal") && out.Max == 0) {
				t.Errorf("shape %s: %+v, %+v", sh.Name, in, out)
			}
		}
		if c.Bench.PromptSetSize > MaxPromptSetSize || c.Bench.Ranking.Resamples > MaxResamples {
			t.Errorf("prompt set %d, resamples %d", c.Bench.PromptSetSize, c.Bench.Ranking.Resamples)
		}
	})
}
