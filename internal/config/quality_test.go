package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const qualityBase = `targets:
  - name: local
    url: http://127.0.0.1:8000
    model: m
    flavor: openai-completions
    quality: {}
  - name: sg
    url: http://127.0.0.1:30000
    model: m
    flavor: sglang
    quality:
      interval: 2m
      timeout: 10s
  - name: plain
    url: http://127.0.0.1:9000
    model: m
modules:
  ppl:
    kind: perplexity
    max_perplexity: 20
  ppl_sg:
    kind: perplexity
    target: sg
  gen:
    kind: generation
`

// TestQualityGood: the block turns the probe on with its defaults, takes
// what it is given, and stays off where it is absent; module kinds parse.
func TestQualityGood(t *testing.T) {
	c, err := Parse([]byte(qualityBase), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target            string
		on                bool
		interval, timeout time.Duration
	}{
		{"local", true, DefaultQualityInterval, DefaultQualityTimeout},
		{"sg", true, 2 * time.Minute, 10 * time.Second},
		{"plain", false, 0, 0},
	} {
		tg, _ := c.Target(tc.target)
		if (tg.Quality != nil) != tc.on {
			t.Errorf("%s: quality on = %v, want %v", tc.target, tg.Quality != nil, tc.on)
			continue
		}
		if tc.on && (tg.Quality.Interval != tc.interval || tg.Quality.Timeout != tc.timeout) {
			t.Errorf("%s: quality %+v, want interval %v timeout %v", tc.target, *tg.Quality, tc.interval, tc.timeout)
		}
	}
	for name, want := range map[string]bool{"ppl": true, "ppl_sg": true, "gen": false} {
		m, _ := c.Module(name)
		if m.IsPerplexity() != want {
			t.Errorf("module %s: IsPerplexity %v, want %v", name, m.IsPerplexity(), want)
		}
	}
	if m, _ := c.Module("ppl"); m.MaxPerplexity != 20 {
		t.Errorf("max_perplexity %v, want 20", m.MaxPerplexity)
	}
}

// TestQualityErrors: every bound and every misplaced setting is refused
// with its file:line, naming why.
func TestQualityErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           string
	}{
		{"interval too short", "      interval: 2m\n", "      interval: 10s\n", "c.yml:12: targets[1].quality.interval: must be between 30s and 24h0m0s, got 10s"},
		{"interval too long", "      interval: 2m\n", "      interval: 48h\n", "c.yml:12: targets[1].quality.interval: must be between"},
		{"timeout above interval", "      timeout: 10s\n", "      timeout: 3m\n", "c.yml:13: targets[1].quality.timeout: 3m0s must not exceed the interval 2m0s"},
		{"negative timeout", "      timeout: 10s\n", "      timeout: -1s\n", "targets[1].quality.timeout: must be positive"},
		{"unsupported flavor", "    flavor: sglang\n", "    flavor: llamacpp\n", "c.yml:11: targets[1].quality: a llamacpp target cannot be scored: llama.cpp's /completion returns probabilities (n_probs) of generated tokens only"},
		{"ollama", "    flavor: sglang\n", "    flavor: ollama-chat\n", "targets[1].quality: a ollama-chat target cannot be scored: Ollama returns log-probabilities"},
		{"unknown field", "      timeout: 10s\n", "      timeout: 10s\n      text: mine\n", `c.yml:14: targets[1].quality.text: unknown field "text"; known here: interval, timeout`},
		{"unknown kind", "    kind: generation\n", "    kind: ppl\n", `c.yml:25: modules.gen.kind: "ppl" is not generation or perplexity`},
		{"threshold on a generation module", "    kind: generation\n", "    kind: generation\n    max_perplexity: 5\n", "modules.gen.max_perplexity: applies to modules of kind perplexity only"},
		{"threshold below 1", "    max_perplexity: 20\n", "    max_perplexity: 0.5\n", "modules.ppl.max_perplexity: 0.5 is below 1"},
		{"threshold too high", "    max_perplexity: 20\n", "    max_perplexity: 1e9\n", "modules.ppl.max_perplexity: must be between 0 (no threshold) and 1e+06"},
		{"known answers on perplexity", "    max_perplexity: 20\n", "    max_perplexity: 20\n    known_answers: [{prompt: a, expect: b}]\n", "modules.ppl.known_answers: a perplexity module sends no generations to check"},
		{"slo on perplexity", "    max_perplexity: 20\n", "    max_perplexity: 20\n    slo: {ttft: 1s}\n", "modules.ppl.slo: a perplexity module sends no generations to time"},
		{"requests on perplexity", "    max_perplexity: 20\n", "    max_perplexity: 20\n    requests: 3\n", "modules.ppl.requests: a perplexity module scores the text once"},
		{"module of an unsupported flavor", "    max_perplexity: 20\n", "    max_perplexity: 20\n    flavor: triton\n", "modules.ppl.kind: a triton module cannot be scored: Triton's generate endpoint"},
		{"module through an unsupported target", "    flavor: sglang\n    quality:\n      interval: 2m\n      timeout: 10s\n", "    flavor: llamacpp\n", "modules.ppl_sg.kind: a llamacpp module cannot be scored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(qualityBase, tc.old) {
				t.Fatalf("the base lacks %q", tc.old)
			}
			y := strings.Replace(qualityBase, tc.old, tc.new, 1)
			_, err := Parse([]byte(y), "c.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "c.yml" {
				t.Errorf("error %v is not a *Error naming the file", err)
			}
		})
	}
}

// TestPerplexityFlavorsCover: every flavor the configuration accepts is
// either scored or refused with a reason.
func TestPerplexityFlavorsCover(t *testing.T) {
	for _, f := range Flavors {
		ok, why := PerplexityCapable(Flavor(f))
		if ok == (why != "") {
			t.Errorf("flavor %s: capable %v with reason %q", f, ok, why)
		}
		_, listed := PerplexityUnsupported[f]
		if ok == listed {
			t.Errorf("flavor %s: capable %v, and listed as unsupported %v", f, ok, listed)
		}
	}
}
