package config

import (
	"strings"
	"testing"
	"time"
)

func TestWorkloadChecksGood(t *testing.T) {
	c, err := Parse([]byte(base+`    checks:
      - prompt: "What is the capital of France?"
        expect: "(?i)paris"
        every: 50
      - prompt: "2+2="
        expect: "\\b4\\b"
        max_tokens: 4
        interval: 1m
`), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	checks := c.Workloads[0].Checks
	if len(checks) != 2 {
		t.Fatalf("checks = %d, want 2", len(checks))
	}
	if checks[0].Every != 50 || checks[0].MaxTokens != DefaultKnownAnswerMaxTokens || checks[0].Pattern == nil {
		t.Errorf("check 0 = %+v", checks[0])
	}
	if checks[1].Interval != time.Minute || checks[1].MaxTokens != 4 {
		t.Errorf("check 1 = %+v", checks[1])
	}
	// Go RE2, matched anywhere in the answer: the same as module known_answers.
	if !checks[0].Pattern.MatchString("It is Paris.") || checks[0].Pattern.MatchString("Lyon") {
		t.Errorf("pattern semantics differ from known_answers")
	}
	if !checks[1].Pattern.MatchString(" 4") || checks[1].Pattern.MatchString("42") {
		t.Errorf("pattern %q matched wrongly", checks[1].Expect)
	}
}

func TestWorkloadChecksErrors(t *testing.T) {
	for _, tc := range []struct {
		name, checks, want string
	}{
		{"no prompt", `{expect: x, every: 1}`, "c.yml:11: workloads[0].checks[0].prompt: is required"},
		{"no expect", `{prompt: p, every: 1}`, "workloads[0].checks[0].expect: is required"},
		{"bad regexp", `{prompt: p, expect: "(", every: 1}`, "workloads[0].checks[0].expect: is not a valid regular expression"},
		{"no schedule", `{prompt: p, expect: x}`, "workloads[0].checks[0].every: set every"},
		{"both schedules", `{prompt: p, expect: x, every: 2, interval: 1m}`, "workloads[0].checks[0].interval: set either every or interval"},
		{"negative every", `{prompt: p, expect: x, every: -1}`, "workloads[0].checks[0].every: must not be negative"},
		{"short interval", `{prompt: p, expect: x, interval: 10ms}`, "workloads[0].checks[0].interval: must be at least 1s"},
		{"negative max_tokens", `{prompt: p, expect: x, every: 1, max_tokens: -1}`, "workloads[0].checks[0].max_tokens: must be at least 1"},
		{"unknown field", `{prompt: p, expect: x, every: 1, rate: 2}`, `workloads[0].checks[0].rate: unknown field "rate"; known here: every, expect, interval, max_tokens, prompt`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(base+"    checks:\n      - "+tc.checks+"\n"), "c.yml")
			if err == nil {
				t.Fatalf("accepted %s", tc.checks)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestWorkloadChecksBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(base + "    checks:\n")
	for range MaxKnownAnswers + 1 {
		b.WriteString("      - {prompt: p, expect: x, every: 1}\n")
	}
	_, err := Parse([]byte(b.String()), "c.yml")
	if err == nil || !strings.Contains(err.Error(), "workloads[0].checks: at most") {
		t.Fatalf("err = %v, want a bound on checks", err)
	}
}
