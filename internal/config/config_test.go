package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadGood(t *testing.T) {
	c, err := LoadFile(filepath.Join("testdata", "good.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.Workloads); got != 2 {
		t.Fatalf("workloads = %d, want 2", got)
	}
	tg, ok := c.Target("local")
	if !ok {
		t.Fatal("target local missing")
	}
	if tg.BearerToken != "sk-test-do-not-leak" {
		t.Errorf("token not read from file")
	}
	if s := fmt.Sprintf("%v %+v", tg.BearerToken, *tg); strings.Contains(s, "sk-test") {
		t.Errorf("secret leaks through fmt: %s", s)
	}
	if tg.Timeout != 30*time.Second {
		t.Errorf("timeout = %v", tg.Timeout)
	}
	w := c.Workloads[1]
	if w.MaxInFlight != 8 || w.Arrival.PeakRate() != 5 || w.Arrival.MaxRate != 0 {
		t.Errorf("ramp workload = %+v", w)
	}
	if c.Workloads[0].MaxInFlight != DefaultMaxInFlight {
		t.Errorf("default in-flight cap not applied")
	}
	if c.Workloads[0].SLO.TTFT != 500*time.Millisecond {
		t.Errorf("slo ttft = %v", c.Workloads[0].SLO.TTFT)
	}
}

const base = `targets:
  - name: local
    url: http://127.0.0.1:8000
    model: m
workloads:
  - name: w
    target: local
    arrival:
      rate: 1
`

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string // substrings of the error, each "file:line: ..."
	}{
		{"unknown top-level field", base + "extra: 1\n", []string{`c.yml:10: extra: unknown field "extra"; known here: modules, probe, targets, workloads`}},
		{"unknown nested field", strings.Replace(base, "      rate: 1\n", "      rate: 1\n      rat: 2\n", 1), []string{`c.yml:10: workloads[0].arrival.rat: unknown field "rat"; did you mean rate?`}},
		{"wrong type", strings.Replace(base, "rate: 1", "rate: fast", 1), []string{`c.yml:9: workloads[0].arrival.rate: expected a number, got "fast"`}},
		{"bad duration", base + "    duration: 5\n", []string{`c.yml:10: workloads[0].duration: expected a duration such as 500ms, 30s or 5m (0 for none), got "5": write 5ms for milliseconds or 5s for seconds`}},
		{"syntax", "targets: [\n", []string{"c.yml"}},
		{"missing url", strings.Replace(base, "    url: http://127.0.0.1:8000\n", "", 1), []string{"c.yml:2: targets[0].url: is required"}},
		{"bad scheme", strings.Replace(base, "http://127", "file://127", 1), []string{"c.yml:3: targets[0].url:", "http or https"}},
		{"credentials in url", strings.Replace(base, "http://127", "http://u:p@127", 1), []string{"c.yml:3: targets[0].url: must not hold credentials"}},
		{"unknown target", strings.Replace(base, "target: local", "target: nope", 1), []string{`c.yml:7: workloads[0].target: "nope" is not a configured target`}},
		{"bad flavor", strings.Replace(base, "model: m", "model: m\n    flavor: grpc", 1), []string{`c.yml:5: targets[0].flavor: "grpc" is not one of`}},
		{"negative rate", strings.Replace(base, "rate: 1", "rate: -1", 1), []string{"c.yml:9: workloads[0].arrival.rate: must be a finite rate ≥ 0"}},
		{"ceiling below rate", strings.Replace(base, "rate: 1", "rate: 10\n      max_rate: 5", 1), []string{"c.yml:10: workloads[0].arrival.max_rate: 5 req/s must be above the peak configured rate 10"}},
		{"gamma without burstiness", strings.Replace(base, "rate: 1", "rate: 1\n      process: gamma", 1), []string{"c.yml:8: workloads[0].arrival.burstiness: must be a finite number > 0"}},
		{"rate and ramp", strings.Replace(base, "rate: 1", "rate: 1\n      ramp: {from: 1, to: 2, over: 1m}", 1), []string{"c.yml:9: workloads[0].arrival.rate: set only one of rate, ramp or stages"}},
		{"bad stage", strings.Replace(base, "rate: 1", "stages:\n        - {duration: 1m, rate: 1}\n        - {duration: 0s, rate: 2}", 1), []string{"c.yml:11: workloads[0].arrival.stages[1].duration"}},
		{"bad dist", base + "    prompt:\n      input_tokens: {dist: zipf}\n", []string{`c.yml:11: workloads[0].prompt.input_tokens.dist: "zipf" is not one of`}},
		// Enum values get the "did you mean" of field names.
		{"flavor typo", strings.Replace(base, "model: m", "model: m\n    flavor: openai-chatt", 1), []string{`c.yml:5: targets[0].flavor: "openai-chatt" is not one of`, `; did you mean "openai-chat"?`}},
		{"process typo", strings.Replace(base, "rate: 1", "rate: 1\n      process: poison", 1), []string{`workloads[0].arrival.process: must be one of "constant", "poisson", "gamma"; got "poison"; did you mean "poisson"?`}},
		{"dist typo", base + "    prompt:\n      input_tokens: {dist: lognormall}\n", []string{`"lognormall" is not one of fixed, uniform, normal, lognormal; did you mean "lognormal"?`}},
		{"engine typo", strings.Replace(base, "model: m", "model: m\n    metrics: {engine: vlm}", 1), []string{`targets[0].metrics.engine: "vlm" is not one of auto, none,`, `; did you mean "vllm"?`}},
		{"no near value", strings.Replace(base, "model: m", "model: m\n    flavor: grpc", 1), []string{`"grpc" is not one of [llamacpp ollama-chat ollama-generate openai-chat openai-completions openai-responses sglang tgi triton]`}},
		{"duplicate target", strings.Replace(base, "workloads:", "  - name: local\n    url: http://127.0.0.1:1\n    model: m\nworkloads:", 1), []string{`c.yml:5: targets[1].name: "local" is used by another target`}},
		{"authorization header", strings.Replace(base, "model: m", "model: m\n    headers: {Authorization: x}", 1), []string{"targets[0].headers: must not set Authorization"}},
		{"header value with CR LF", strings.Replace(base, "model: m", "model: m\n    headers: {X-A: \"v\\r\\nX-Injected: 1\"}", 1), []string{`targets[0].headers.X-A: header value has a control character ('\r' at byte 1)`}},
		{"header name with a space", strings.Replace(base, "model: m", "model: m\n    headers: {\"X B\": v}", 1), []string{`targets[0].headers.X B: header name "X B" is not an HTTP token`}},
		{"header value with NUL", strings.Replace(base, "model: m", "model: m\n    headers: {X-A: \"a\\0b\"}", 1), []string{`targets[0].headers.X-A: header value has a control character ('\x00' at byte 1)`}},
		// A model name is the server's, so it has no pattern, but it goes
		// into labels, span attributes and request bodies: no control
		// characters, as in names.
		{"model with CR LF", strings.Replace(base, "model: m", "model: \"m\\r\\nX: 1\"", 1), []string{`c.yml:4: targets[0].model: model name has a control character ('\r' at byte 1)`}},
		{"model with LF", strings.Replace(base, "model: m", "model: \"m\\nx\"", 1), []string{`targets[0].model: model name has a control character ('\n' at byte 1)`}},
		{"model with NUL", strings.Replace(base, "model: m", "model: \"m\\0\"", 1), []string{`targets[0].model: model name has a control character ('\x00' at byte 1)`}},
		{"model with DEL", strings.Replace(base, "model: m", "model: \"m\\x7f\"", 1), []string{`targets[0].model: model name has a control character ('\x7f' at byte 1)`}},
		{"model too long", strings.Replace(base, "model: m", "model: "+strings.Repeat("m", MaxModelBytes+1), 1), []string{`targets[0].model: a model name of 257 bytes: at most 256 (config.MaxModelBytes)`}},
		{"module model with LF", base + "modules:\n  mod:\n    model: \"a\\nb\"\n", []string{`modules.mod.model: model name has a control character ('\n' at byte 1)`}},
		{"empty header name", strings.Replace(base, "model: m", "model: m\n    headers: {\"\": v}", 1), []string{`targets[0].headers.: header name "" is not an HTTP token`}},
		{"missing token file", strings.Replace(base, "model: m", "model: m\n    bearer_token_file: /nonexistent/token", 1), []string{"c.yml:5: targets[0].bearer_token_file: cannot read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "c.yml" {
				t.Errorf("error %v is not a *Error naming the file", err)
			}
		})
	}
}

func TestParseAllErrorsAtOnce(t *testing.T) {
	y := strings.Replace(base, "model: m", "model: \"\"", 1)
	y = strings.Replace(y, "rate: 1", "rate: -1", 1)
	_, err := Parse([]byte(y), "c.yml")
	if err == nil || !strings.Contains(err.Error(), "model") || !strings.Contains(err.Error(), "rate") {
		t.Fatalf("want both errors, got %v", err)
	}
}
