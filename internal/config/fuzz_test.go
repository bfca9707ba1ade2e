package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// FuzzParse: whatever the bytes, Parse returns; its errors are at most
// MaxErrors lines and a count, each with a line unless it is the file's as
// a whole; a configuration it accepts is within the limits; and one parse
// allocates a bounded amount of memory.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 60s -parallel 1 ./internal/config/
func FuzzParse(f *testing.F) {
	old := secretReadTimeout
	secretReadTimeout = 50 * time.Millisecond // a fuzzed bearer_token_file may name a FIFO
	f.Cleanup(func() { secretReadTimeout = old })
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.yml"))
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		base, modulesBase, replayTargets, "", "---\n", "targets:\n", base + "---\ntargets: []\n",
		base + "    prompt:\n      input_tokens: {dist: lognormal, mean: 500, stddev: 200}\n      output_tokens: {dist: normal, mean: 50, stddev: 5, max: 80}\n",
		base + "    checks: [{prompt: p, expect: '(?i)x', every: 3}]\n",
		"a: &a [1]\nb: *a\n", "targets:\n  - &t\n    name: a\n    headers: *t\n", "\x00", "[[[[",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxFileBytes {
			t.Skip()
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c, err := Parse(data, filepath.Join("testdata", "fuzz.yml"))
		runtime.ReadMemStats(&m1)
		// yaml.v3 takes some 200 bytes per byte of a pathological file.
		if alloc, limit := m1.TotalAlloc-m0.TotalAlloc, uint64(64<<20+400*len(data)); alloc > limit {
			t.Errorf("one parse of %d bytes allocated %d MiB, over %d MiB", len(data), alloc>>20, limit>>20)
		}
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		checkFuzzConfig(t, c)
	})
}

// checkFuzzError checks the form of Parse's error.
func checkFuzzError(t *testing.T, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	if len(errs) > MaxErrors+1 {
		t.Errorf("%d errors, want at most %d", len(errs), MaxErrors+1)
	}
	if n := len(err.Error()); n > 2<<20 {
		t.Errorf("an error of %d bytes", n)
	}
	for i, e := range errs {
		var ce *Error
		switch {
		case errors.As(e, &ce):
			if ce.Line < 1 && !strings.HasPrefix(ce.Reason, "empty configuration") && !strings.HasPrefix(ce.Reason, "file larger") {
				t.Errorf("error %d has no line: %v", i, e)
			}
		case i == len(errs)-1 && strings.HasPrefix(e.Error(), "... and "):
		default:
			t.Errorf("error %d is not an *Error: %v", i, e)
		}
	}
}

// checkFuzzConfig checks that an accepted configuration is within the
// limits that keep the exporter's memory bounded.
func checkFuzzConfig(t *testing.T, c *Config) {
	t.Helper()
	if len(c.Targets) > MaxListItems || len(c.Workloads) > MaxListItems || len(c.Modules) > MaxListItems {
		t.Errorf("%d targets, %d workloads, %d modules", len(c.Targets), len(c.Workloads), len(c.Modules))
	}
	lengths := func(where string, p Prompt) {
		inHi, inOK := largest(&p.InputTokens)
		outHi, outOK := largest(&p.OutputTokens)
		if !inOK || !outOK || inHi < 1 || outHi < 1 || inHi+outHi > MaxTokens {
			t.Errorf("%s: lengths %+v, %+v: up to %d and %d tokens", where, p.InputTokens, p.OutputTokens, inHi, outHi)
		}
	}
	for _, tg := range c.Targets {
		if len(tg.Name) > MaxNameBytes || len(tg.Headers) > MaxHeaders {
			t.Errorf("target %.40q: %d headers", tg.Name, len(tg.Headers))
		}
	}
	for _, w := range c.Workloads {
		if w.Replay == nil {
			lengths("workload "+w.Name, w.Prompt)
		}
		for _, ch := range w.Checks {
			if ch.MaxTokens < 1 || ch.MaxTokens > MaxTokens {
				t.Errorf("workload %s: check max_tokens %d", w.Name, ch.MaxTokens)
			}
		}
	}
	for name, m := range c.Modules {
		lengths("module "+name, m.Prompt)
		if len(m.Headers) > MaxHeaders || len(m.KnownAnswers) > MaxKnownAnswers {
			t.Errorf("module %s: %d headers, %d known answers", name, len(m.Headers), len(m.KnownAnswers))
		}
		for _, ka := range m.KnownAnswers {
			if ka.MaxTokens < 1 || ka.MaxTokens > MaxTokens {
				t.Errorf("module %s: known answer max_tokens %d", name, ka.MaxTokens)
			}
		}
	}
}
