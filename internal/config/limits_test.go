package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// workload returns base with the workload's prompt block (and anything
// after it) set to extra, indented as a workload's fields.
func workload(extra string) string { return base + extra }

// TestTokenLimits: every token length, and the input and output of one
// request together, are bounded by MaxTokens; NaN and infinities are
// refused.
func TestTokenLimits(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"fixed input mean", workload("    prompt:\n      input_tokens: {dist: fixed, mean: 1e15}\n"),
			"c.yml:11: workloads[0].prompt.input_tokens.mean: at most 1048576 tokens (config.MaxTokens), got 1e+15"},
		{"fixed output mean", workload("    prompt:\n      output_tokens: {dist: fixed, mean: 2000000}\n"),
			"c.yml:11: workloads[0].prompt.output_tokens.mean: at most 1048576 tokens (config.MaxTokens), got 2e+06"},
		{"uniform max", workload("    prompt:\n      input_tokens: {dist: uniform, min: 1, max: 1048577}\n"),
			"c.yml:11: workloads[0].prompt.input_tokens.max: at most 1048576 tokens (config.MaxTokens), got 1048577"},
		{"min", workload("    prompt:\n      input_tokens: {dist: fixed, mean: 5, min: 99999999}\n"),
			"workloads[0].prompt.input_tokens.min: at most 1048576 tokens (config.MaxTokens), got 99999999"},
		{"negative max", workload("    prompt:\n      input_tokens: {dist: fixed, mean: 5, max: -1}\n"),
			"workloads[0].prompt.input_tokens.max: must not be negative, got -1"},
		{"normal max", workload("    prompt:\n      input_tokens: {dist: normal, mean: 100, stddev: 10, max: 4000000}\n"),
			"workloads[0].prompt.input_tokens.max: at most 1048576 tokens (config.MaxTokens), got 4000000"},
		{"lognormal stddev", workload("    prompt:\n      input_tokens: {dist: lognormal, mean: 100, stddev: 1e300}\n"),
			"workloads[0].prompt.input_tokens.stddev: at most 1048576 tokens (config.MaxTokens), got 1e+300"},
		{"NaN mean", workload("    prompt:\n      input_tokens: {dist: fixed, mean: .nan}\n"),
			"workloads[0].prompt.input_tokens.mean: must be a finite number, got NaN"},
		{"infinite mean", workload("    prompt:\n      output_tokens: {dist: normal, mean: .inf, stddev: 1}\n"),
			"workloads[0].prompt.output_tokens.mean: must be a finite number, got +Inf"},
		{"NaN stddev", workload("    prompt:\n      output_tokens: {dist: normal, mean: 5, stddev: .nan}\n"),
			"workloads[0].prompt.output_tokens.stddev: must be a finite number, got NaN"},
		{"uniform mean unused but bounded", workload("    prompt:\n      input_tokens: {dist: uniform, min: 1, max: 5, mean: 1e20}\n"),
			"workloads[0].prompt.input_tokens.mean: at most 1048576 tokens"},
		{"request too long", workload("    prompt:\n      input_tokens: {dist: fixed, mean: 1000000}\n      output_tokens: {dist: uniform, min: 1, max: 100000}\n"),
			"c.yml:10: workloads[0].prompt: input_tokens up to 1000000 plus output_tokens up to 100000 is 1100000 tokens: a request holds at most 1048576 (config.MaxTokens)"},
		{"unbounded normal does not fit", workload("    prompt:\n      input_tokens: {dist: normal, mean: 50000, stddev: 10}\n      output_tokens: {dist: fixed, mean: 1000000}\n"),
			"c.yml:11: workloads[0].prompt.input_tokens.max: a normal without max is clamped at 48576 tokens, so that the request stays within 1048576 (config.MaxTokens) with output_tokens up to 1000000; its min or mean 50000 is above that: set max"},
		{"two unbounded do not fit", workload("    prompt:\n      input_tokens: {dist: normal, mean: 600000, stddev: 10}\n      output_tokens: {dist: lognormal, mean: 600000, stddev: 10}\n"),
			"workloads[0].prompt: input_tokens of at least 600000 plus output_tokens of at least 600000 is 1200000 tokens"},
		{"module prompt", strings.Replace(base, "workloads:", "modules:\n  m:\n    prompt: {input_tokens: {dist: fixed, mean: 1e15}}\nworkloads:", 1),
			"c.yml:7: modules.m.prompt.input_tokens.mean: at most 1048576 tokens (config.MaxTokens), got 1e+15"},
		{"module known answer", strings.Replace(base, "workloads:", "modules:\n  m:\n    known_answers: [{prompt: p, expect: x, max_tokens: 9999999}]\nworkloads:", 1),
			"modules.m.known_answers[0].max_tokens: at most 1048576 tokens (config.MaxTokens), got 9999999"},
		{"module min_tokens", strings.Replace(base, "workloads:", "modules:\n  m:\n    sampling: {min_tokens: 9999999}\nworkloads:", 1),
			"modules.m.sampling.min_tokens: at most 1048576 tokens (config.MaxTokens), got 9999999"},
		{"check max_tokens", workload("    checks: [{prompt: p, expect: x, every: 2, max_tokens: 1099511627776}]\n"),
			"workloads[0].checks[0].max_tokens: at most 1048576 tokens (config.MaxTokens), got 1099511627776"},
		{"workload min_tokens", workload("    sampling: {min_tokens: 2000000}\n"),
			"c.yml:10: workloads[0].sampling.min_tokens: at most 1048576 tokens (config.MaxTokens), got 2000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}

func TestReplayBlockSizeLimit(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "t.jsonl", "")
	_, err := Parse([]byte(replayTargets+"  - {name: r, target: local, replay: {source: mooncake, path: t.jsonl, block_size: 99999999}}\n"), filepath.Join(dir, "c.yml"))
	if want := "workloads[0].replay.block_size: at most 1048576 tokens (config.MaxTokens), got 99999999"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestUnboundedLengthsClamped: a normal or lognormal without max is given
// one, so that the request stays within MaxTokens; a bounded one is kept.
func TestUnboundedLengthsClamped(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in, out       Distribution
		inMax, outMax int
	}{
		{"input unbounded", Distribution{Dist: "lognormal", Mean: 500, Stddev: 200}, Distribution{Dist: "fixed", Mean: 128},
			MaxTokens - 128, 0},
		{"output unbounded", Distribution{Dist: "uniform", Min: 10, Max: 1000}, Distribution{Dist: "normal", Mean: 50, Stddev: 5},
			1000, MaxTokens - 1000},
		{"both unbounded", Distribution{Dist: "normal", Mean: 500, Stddev: 20}, Distribution{Dist: "lognormal", Mean: 50, Stddev: 5},
			MaxTokens / 2, MaxTokens / 2},
		{"both unbounded, a long input", Distribution{Dist: "normal", Mean: 800000, Stddev: 20}, Distribution{Dist: "lognormal", Mean: 50, Stddev: 5},
			800000, MaxTokens - 800000},
		{"both unbounded, a long output", Distribution{Dist: "normal", Mean: 50, Stddev: 20}, Distribution{Dist: "lognormal", Mean: 900000, Min: 900001, Stddev: 5},
			MaxTokens - 900001, 900001},
		{"bounded", Distribution{Dist: "normal", Mean: 500, Stddev: 20, Max: 600}, Distribution{Dist: "fixed", Mean: 5, Max: 3},
			600, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := tc.in, tc.out
			if probs := CheckLengths(&in, &out); len(probs) > 0 {
				t.Fatalf("problems %+v", probs)
			}
			if in.Max != tc.inMax || out.Max != tc.outMax {
				t.Errorf("max = %d, %d; want %d, %d", in.Max, out.Max, tc.inMax, tc.outMax)
			}
			inHi, _ := largest(&in)
			outHi, _ := largest(&out)
			if inHi+outHi > MaxTokens {
				t.Errorf("a request can hold %d tokens", inHi+outHi)
			}
		})
	}
	// Through the file: the workload's distribution holds the clamp.
	c, err := Parse([]byte(workload("    prompt:\n      input_tokens: {dist: lognormal, mean: 500, stddev: 200}\n")), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Workloads[0].Prompt.InputTokens.Max; got != MaxTokens-DefaultOutputTokens {
		t.Errorf("input max = %d, want %d", got, MaxTokens-DefaultOutputTokens)
	}
}

// TestCountLimits: lists, names and strings are bounded.
func TestCountLimits(t *testing.T) {
	targets := func(n int) string {
		var b strings.Builder
		b.WriteString("targets:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: t%d, url: 'http://127.0.0.1:1', model: m}\n", i)
		}
		return b.String()
	}
	many := func(prefix, item string, n int) string {
		return prefix + "[" + strings.TrimSuffix(strings.Repeat(item+", ", n), ", ") + "]"
	}
	var headers strings.Builder
	for i := range MaxHeaders + 1 {
		fmt.Fprintf(&headers, "X-H%d: v, ", i)
	}
	var modules strings.Builder
	modules.WriteString("modules:\n")
	for i := range MaxListItems + 1 {
		fmt.Fprintf(&modules, "  m%d: {}\n", i)
	}
	nested := "x: [" + strings.TrimSuffix(strings.Repeat(many("", "0", 999)+", ", MaxNodes/999+1), ", ") + "]\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"targets", targets(MaxListItems + 1), "c.yml:2: targets: a list of 1001 items: at most 1000 (config.MaxListItems)"},
		{"workloads", base + strings.Repeat("  - {name: w, target: local, arrival: {rate: 1}}\n", MaxListItems),
			"c.yml:6: workloads: a list of 1001 items: at most 1000 (config.MaxListItems)"},
		{"modules", base + modules.String(), "c.yml:11: modules: a mapping of 1001 keys: at most 1000 (config.MaxListItems)"},
		{"unknown field", base + many("x: ", "0", 2000), "c.yml:10: x: a list of 2000 items: at most 1000 (config.MaxListItems)"},
		{"values", nested, "c.yml:1: x[199][995]: more than 200000 values in the file (config.MaxNodes)"},
		{"headers", strings.Replace(base, "model: m", "model: m\n    headers: {"+headers.String()+"}", 1),
			"c.yml:5: targets[0].headers: at most 100 headers (config.MaxHeaders), got 101"},
		{"stages", strings.Replace(base, "rate: 1", many("stages: ", "{duration: 1s, rate: 1}", MaxListItems+1), 1),
			"c.yml:9: workloads[0].arrival.stages: a list of 1001 items: at most 1000 (config.MaxListItems)"},
		{"allow hosts", base + many("probe:\n  allow:\n    hosts: ", "a.example", MaxListItems+1) + "\n",
			"c.yml:12: probe.allow.hosts: a list of 1001 items: at most 1000 (config.MaxListItems)"},
		{"target name", strings.Replace(base, "name: local", "name: "+strings.Repeat("n", MaxNameBytes+1), 1),
			"c.yml:2: targets[0].name: a name of 201 bytes: at most 200 (config.MaxNameBytes)"},
		{"workload name", strings.Replace(base, "name: w", "name: "+strings.Repeat("w", 300), 1),
			"c.yml:6: workloads[0].name: a name of 300 bytes: at most 200 (config.MaxNameBytes)"},
		{"module name", base + "modules:\n  " + strings.Repeat("m", 201) + ": {}\n",
			"c.yml:11: modules." + strings.Repeat("m", 201) + ": a module name of 201 bytes: at most 200 (config.MaxNameBytes)"},
		{"url", strings.Replace(base, "http://127.0.0.1:8000", "http://127.0.0.1:8000/"+strings.Repeat("p", MaxStringBytes), 1),
			"c.yml:3: targets[0].url: a string of 8214 bytes: at most 8 KiB (config.MaxStringBytes)"},
		{"header name", strings.Replace(base, "model: m", "model: m\n    headers:\n      ? "+strings.Repeat("k", MaxStringBytes+1)+"\n      : v", 1),
			"c.yml:6: targets[0].headers: a key of 8193 bytes: at most 8 KiB (config.MaxStringBytes)"},
		{"check prompt", base + "    checks: [{prompt: " + strings.Repeat("q", MaxPromptBytes+1) + ", expect: x, every: 1}]\n",
			"c.yml:10: workloads[0].checks[0].prompt: a string of 65537 bytes: at most 64 KiB (config.MaxPromptBytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				msg := fmt.Sprint(err)
				if len(msg) > 2000 {
					msg = msg[:2000]
				}
				t.Fatalf("error %s\nwant %q", msg, tc.want)
			}
		})
	}
	// At the limits, all is well.
	if _, err := Parse([]byte(targets(MaxListItems)), "c.yml"); err != nil {
		t.Errorf("%d targets: %v", MaxListItems, err)
	}
	long := strings.Replace(base, "name: local", "name: "+strings.Repeat("n", MaxNameBytes), 1)
	long = strings.Replace(long, "target: local", "target: "+strings.Repeat("n", MaxNameBytes), 1)
	if _, err := Parse([]byte(long), "c.yml"); err != nil {
		t.Errorf("a name of %d bytes: %v", MaxNameBytes, err)
	}
}

// TestErrorsCapped: a file with many problems reports MaxErrors of them and
// counts the rest, for the validator's errors and for yaml.v3's.
func TestErrorsCapped(t *testing.T) {
	var bad strings.Builder
	bad.WriteString("targets:\n")
	for i := range 300 {
		fmt.Fprintf(&bad, "  - {name: t%d, url: 'ftp://x', model: m}\n", i)
	}
	typeErrs := "targets:\n" + strings.Repeat("  - {name: [x], url: [x]}\n", 200)
	longStrings := "targets:\n" + strings.Repeat("  - "+strings.Repeat("s", MaxStringBytes+1)+"\n", 120)
	for _, tc := range []struct {
		name, yaml string
		more       int
	}{
		{"validation", bad.String(), 200},
		{"yaml type errors", typeErrs, 300},
		{"form", longStrings, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != MaxErrors+1 {
				t.Errorf("%d lines, want %d", len(lines), MaxErrors+1)
			}
			if last, want := lines[len(lines)-1], fmt.Sprintf("... and %d more errors", tc.more); last != want {
				t.Errorf("last line %q, want %q", last, want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Line == 0 {
				t.Errorf("first error %v has no line", ce)
			}
		})
	}
	if err := JoinErrors(make([]error, 0)); err != nil {
		t.Errorf("JoinErrors of none = %v", err)
	}
}

// TestFileSizeLimit: data over MaxFileBytes is refused before it is parsed.
func TestFileSizeLimit(t *testing.T) {
	data := []byte(base + "# " + strings.Repeat("x", MaxFileBytes) + "\n")
	_, err := Parse(data, "c.yml")
	if want := "c.yml: file larger than 1 MiB (config.MaxFileBytes)"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	// Just under it: parsed.
	data = []byte(base + "# " + strings.Repeat("x", MaxFileBytes-len(base)-3) + "\n")
	if len(data) != MaxFileBytes {
		t.Fatalf("test data of %d bytes", len(data))
	}
	if _, err := Parse(data, "c.yml"); err != nil {
		t.Fatal(err)
	}
}

func TestQuote(t *testing.T) {
	if got := quote("ab"); got != `"ab"` {
		t.Errorf("quote = %s", got)
	}
	s := strings.Repeat("é", 100)
	got := quote(s)
	if !strings.HasSuffix(got, "... (200 bytes)") || strings.Contains(got, `\x`) {
		t.Errorf("quote = %s", got)
	}
}
