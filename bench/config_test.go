package bench

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if s.Stability.Window != 20*time.Second || s.Stability.MaxDuration != 3*DefaultDuration || !s.Stability.On() {
		t.Errorf("stability %+v", s.Stability)
	}
	if *s.Weights != (Weights{Latency: 1}) {
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
	if *c.Bench.Weights != DefaultWeights || c.Bench.Warmup != DefaultWarmup || c.Bench.Regression.Metrics[0] != "e2e_p99" {
		t.Errorf("%+v", c.Bench)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown bench field", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  duraton: 1s\n",
			[]string{"b.yml:4: field duraton not found"}},
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
		{"sweep without slo", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  sweep: {factor: 1}\n",
			[]string{"bench.sweep.factor: must be above 1", "a sweep needs bench.slo"}},
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
