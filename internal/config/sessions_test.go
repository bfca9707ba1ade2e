package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSessionsConfig: a sessions block as written, and its defaults.
func TestSessionsConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       Sessions
	}{
		{"as written", base + `    max_in_flight: 8
    sessions:
      turns: {dist: uniform, min: 2, max: 6}
      think_time: {dist: exponential, mean: 2s, max: 30s}
      user_tokens: {dist: fixed, mean: 64}
      output_tokens: {dist: uniform, min: 16, max: 128}
      max_conversation_tokens: 4096
      max_active: 4
      seed: 3
`, Sessions{
			Turns:                 Distribution{Dist: "uniform", Min: 2, Max: 6},
			ThinkTime:             ThinkTime{Dist: "exponential", Mean: 2 * time.Second, Max: 30 * time.Second},
			UserTokens:            Distribution{Dist: "fixed", Mean: 64},
			OutputTokens:          Distribution{Dist: "uniform", Min: 16, Max: 128},
			MaxConversationTokens: 4096, MaxActive: 4, Seed: 3,
		}},
		{"defaults", base + "    max_in_flight: 8\n    sessions: {}\n", Sessions{
			Turns:                 Distribution{Dist: "fixed", Mean: DefaultSessionTurns},
			ThinkTime:             ThinkTime{Dist: "fixed", Mean: DefaultThinkTime},
			UserTokens:            Distribution{Dist: "fixed", Mean: DefaultUserTokens},
			OutputTokens:          Distribution{Dist: "fixed", Mean: DefaultOutputTokens},
			MaxConversationTokens: DefaultMaxConversationTokens, MaxActive: 8,
		}},
		{"unbounded draws get their bounds", base + `    sessions:
      turns: {dist: lognormal, mean: 3, stddev: 2}
      think_time: {dist: lognormal, mean: 5s, stddev: 3s}
`, Sessions{
			Turns:                 Distribution{Dist: "lognormal", Mean: 3, Stddev: 2, Max: MaxSessionTurns},
			ThinkTime:             ThinkTime{Dist: "lognormal", Mean: 5 * time.Second, Stddev: 3 * time.Second, Max: MaxThinkTime},
			UserTokens:            Distribution{Dist: "fixed", Mean: DefaultUserTokens},
			OutputTokens:          Distribution{Dist: "fixed", Mean: DefaultOutputTokens},
			MaxConversationTokens: DefaultMaxConversationTokens, MaxActive: DefaultMaxInFlight,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "c.yml")
			if err != nil {
				t.Fatal(err)
			}
			s := c.Workloads[0].Sessions
			if s == nil || *s != tc.want {
				t.Errorf("sessions = %+v\nwant       %+v", s, tc.want)
			}
		})
	}
	c, err := Parse([]byte(base), "c.yml")
	if err != nil || c.Workloads[0].Sessions != nil {
		t.Errorf("a workload without sessions: %+v, %v", c.Workloads[0].Sessions, err)
	}
}

// TestSessionsConfigErrors: every problem of a sessions block is refused
// with its file, line and field.
func TestSessionsConfigErrors(t *testing.T) {
	s := func(body string) string { return base + "    sessions:\n" + body }
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown field", s("      turn: 3\n"), `c.yml:11: workloads[0].sessions.turn: unknown field "turn"; did you mean turns?`},
		{"with prompt", base + "    prompt: {input_tokens: {dist: fixed, mean: 5}}\n    sessions: {}\n", "c.yml:10: workloads[0].prompt: cannot be set with sessions"},
		{"with replay", base + "    replay: {source: azure, path: /nonexistent/trace.csv}\n    sessions: {}\n", "c.yml:10: workloads[0].replay: cannot be set with sessions"},
		{"with checks", base + "    checks: [{prompt: p, expect: x}]\n    sessions: {}\n", "c.yml:10: workloads[0].checks: cannot be set with sessions"},
		{"turns above the bound", s("      turns: {dist: fixed, mean: 101}\n"), "c.yml:11: workloads[0].sessions.turns.mean: must be between 1 and 100 turns (config.MaxSessionTurns), got 101"},
		{"turns below one", s("      turns: {dist: fixed, mean: 0.2}\n"), "c.yml:11: workloads[0].sessions.turns.mean: must be between 1 and 100"},
		{"uniform turns max", s("      turns: {dist: uniform, min: 2, max: 500}\n"), "c.yml:11: workloads[0].sessions.turns.max: must be between 0 (unset) and 100"},
		{"uniform turns inverted", s("      turns: {dist: uniform, min: 5, max: 2}\n"), "c.yml:11: workloads[0].sessions.turns.min: uniform needs 1 <= min <= max <= 100"},
		{"turns NaN stddev", s("      turns: {dist: normal, mean: 3, stddev: .nan}\n"), "workloads[0].sessions.turns.stddev: must be between 0 and 100"},
		{"turns dist", s("      turns: {dist: zipf, mean: 3}\n"), `workloads[0].sessions.turns.dist: "zipf" is not one of`},
		{"think dist", s("      think_time: {dist: pareto, mean: 1s}\n"), `c.yml:11: workloads[0].sessions.think_time.dist: "pareto" is not one of [fixed uniform exponential lognormal]`},
		{"think too long", s("      think_time: {dist: fixed, mean: 2h}\n"), "c.yml:11: workloads[0].sessions.think_time.mean: must be between 0 and 1h0m0s (config.MaxThinkTime), got 2h0m0s"},
		{"negative think", s("      think_time: {dist: uniform, min: -1s, max: 1s}\n"), "workloads[0].sessions.think_time.min: must be between 0 and 1h0m0s"},
		{"think max below min", s("      think_time: {dist: uniform, min: 2s, max: 1s}\n"), "workloads[0].sessions.think_time.max: 1s must not be below min 2s"},
		{"exponential without mean", s("      think_time: {dist: exponential, max: 1s}\n"), "workloads[0].sessions.think_time.mean: must be positive"},
		{"lognormal without stddev", s("      think_time: {dist: lognormal, mean: 1s}\n"), "workloads[0].sessions.think_time.stddev: must be positive"},
		{"user tokens too long", s("      user_tokens: {dist: fixed, mean: 2000000}\n"), "c.yml:11: workloads[0].sessions.user_tokens.mean: at most 1048576 tokens (config.MaxTokens)"},
		{"output dist", s("      output_tokens: {dist: zipf}\n"), `workloads[0].sessions.output_tokens.dist: "zipf" is not one of`},
		{"conversation too long", s("      max_conversation_tokens: 2000000\n"), "c.yml:11: workloads[0].sessions.max_conversation_tokens: must be between 2 and 1048576"},
		{"first turn does not fit", s("      user_tokens: {dist: fixed, mean: 300}\n      max_conversation_tokens: 400\n"),
			"c.yml:12: workloads[0].sessions.max_conversation_tokens: 400 cannot hold even the first turn: user_tokens of at least 300 plus output_tokens of at least 128"},
		{"too many active", s("      max_active: 20000\n"), "c.yml:11: workloads[0].sessions.max_active: must be between 1 and 10000 (config.MaxActiveSessions)"},
		{"too much held", s("      max_active: 1000\n      max_conversation_tokens: 1000000\n"),
			"c.yml:11: workloads[0].sessions.max_active: 1000 sessions of up to 1000000 tokens is 1000000000 tokens held at once: at most 33554432 (config.MaxSessionTokens)"},
		{"negative active", s("      max_active: -1\n"), "workloads[0].sessions.max_active: must be between 1 and 10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
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
