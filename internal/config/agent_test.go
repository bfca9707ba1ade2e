package config

import (
	"strings"
	"testing"
	"time"
)

// tools is a workload's tools block, for an agent.
const tools = "    tools: [{name: search}]\n"

// TestAgentConfig: an agent block as written, and its defaults; its turns
// are its turn limit.
func TestAgentConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       Agent
		turns      float64
	}{
		{"as written", base + tools + `    sessions:
      agent:
        tool_latency: {dist: uniform, min: 10ms, max: 30ms}
        tool_result_tokens: {dist: uniform, min: 5, max: 50}
        max_turns: 5
`, Agent{
			ToolLatency:      ThinkTime{Dist: "uniform", Min: 10 * time.Millisecond, Max: 30 * time.Millisecond},
			ToolResultTokens: Distribution{Dist: "uniform", Min: 5, Max: 50},
			MaxTurns:         5,
		}, 5},
		{"defaults", base + tools + "    sessions: {agent: {}}\n", Agent{
			ToolLatency:      ThinkTime{Dist: "fixed", Mean: DefaultToolLatency},
			ToolResultTokens: Distribution{Dist: "fixed", Mean: DefaultToolResultTokens},
			MaxTurns:         DefaultAgentMaxTurns,
		}, DefaultAgentMaxTurns},
		{"unbounded results get their bound", base + tools + "    sessions: {agent: {tool_result_tokens: {dist: lognormal, mean: 100, stddev: 50}}}\n", Agent{
			ToolLatency:      ThinkTime{Dist: "fixed", Mean: DefaultToolLatency},
			ToolResultTokens: Distribution{Dist: "lognormal", Mean: 100, Stddev: 50, Max: MaxToolResultTokens},
			MaxTurns:         DefaultAgentMaxTurns,
		}, DefaultAgentMaxTurns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "c.yml")
			if err != nil {
				t.Fatal(err)
			}
			s := c.Workloads[0].Sessions
			if s == nil || s.Agent == nil || *s.Agent != tc.want {
				t.Fatalf("agent = %+v\nwant    %+v", s.Agent, tc.want)
			}
			if want := (Distribution{Dist: "fixed", Mean: tc.turns}); s.Turns != want {
				t.Errorf("turns = %+v, want %+v", s.Turns, want)
			}
		})
	}
}

// TestAgentConfigErrors: every problem of an agent block is refused with
// its file, line and field.
func TestAgentConfigErrors(t *testing.T) {
	a := func(body string) string { return base + tools + "    sessions:\n      agent:\n" + body }
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no tools", base + "    sessions: {agent: {}}\n", "c.yml:10: workloads[0].sessions.agent: needs the workload's tools block"},
		{"with turns", base + tools + "    sessions:\n      turns: {dist: fixed, mean: 3}\n      agent: {}\n", "c.yml:12: workloads[0].sessions.turns: cannot be set with agent"},
		{"with think time", base + tools + "    sessions:\n      think_time: {dist: fixed, mean: 1s}\n      agent: {}\n", "c.yml:12: workloads[0].sessions.think_time: cannot be set with agent"},
		{"unknown field", a("        tool_latencies: {}\n"), `c.yml:13: workloads[0].sessions.agent.tool_latencies: unknown field`},
		{"max turns", a("        max_turns: 101\n"), "c.yml:13: workloads[0].sessions.agent.max_turns: must be between 1 and 100 (config.MaxSessionTurns), got 101"},
		{"negative max turns", a("        max_turns: -1\n"), "workloads[0].sessions.agent.max_turns: must be between 1 and 100"},
		{"latency dist", a("        tool_latency: {dist: pareto, mean: 1s}\n"), `c.yml:13: workloads[0].sessions.agent.tool_latency.dist: "pareto" is not one of`},
		{"latency too long", a("        tool_latency: {dist: fixed, mean: 2h}\n"), "c.yml:13: workloads[0].sessions.agent.tool_latency.mean: must be between 0 and 1h0m0s (config.MaxThinkTime)"},
		{"result dist", a("        tool_result_tokens: {dist: zipf}\n"), `workloads[0].sessions.agent.tool_result_tokens.dist: "zipf" is not one of`},
		{"result too long", a("        tool_result_tokens: {dist: fixed, mean: 9000}\n"), "c.yml:13: workloads[0].sessions.agent.tool_result_tokens: must be at most 8192 tokens (config.MaxToolResultTokens), got up to 9000"},
		{"not chat", strings.Replace(base, "model: m", "model: m\n    flavor: openai-completions", 1) + tools + "    sessions: {agent: {}}\n",
			"workloads[0].sessions: an agent needs flavor openai-chat"},
		{"with images", base + tools + "    images: {count: 1, width: 8, height: 8}\n    sessions: {agent: {}}\n", "not with an agent: its turns carry tools only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "c.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
