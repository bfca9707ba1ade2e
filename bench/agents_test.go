package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestSearchAgents: against a server that holds exactly `holds` agents (a
// monotone pass/fail), the search finds it, doubling from start and then
// bisecting to adjacent counts, and says when start failed or max_agents
// passed; a count whose client was degraded counts for neither side and
// ends the search there, as the client's limit.
func TestSearchAgents(t *testing.T) {
	for _, tc := range []struct {
		name        string
		start, most int
		holds       int
		degraded    []int // counts at which the client is degraded
		want, fail  int
		client      int
		tried       []int
		note        string
	}{
		{name: "mid-range", start: 1, most: 64, holds: 11, want: 11, fail: 12, tried: []int{1, 2, 4, 8, 16, 12, 10, 11}},
		{name: "a power of two", start: 1, most: 64, holds: 8, want: 8, fail: 9, tried: []int{1, 2, 4, 8, 16, 12, 10, 9}},
		{name: "start fails", start: 4, most: 64, holds: 3, want: 0, fail: 4, tried: []int{4}, note: "even 4 agents failed the tier (failed TPOT): lower bench.agents.start"},
		// A failing server (30% of its answers errors, say): no lower
		// count to try, so no remedy of the start's.
		{name: "one agent fails", start: 1, most: 64, holds: 0, want: 0, fail: 1, tried: []int{1}, note: "even 1 agent failed the tier (failed TPOT): the server holds no agent within it"},
		{name: "max passes", start: 1, most: 20, holds: 100, want: 20, tried: []int{1, 2, 4, 8, 16, 20}, note: "passed up to max_agents 20"},
		{name: "start is max", start: 5, most: 5, holds: 5, want: 5, tried: []int{5}, note: "passed up to max_agents 5"},
		{name: "first doubling fails", start: 3, most: 64, holds: 4, want: 4, fail: 5, tried: []int{3, 6, 4, 5}},
		{name: "client degraded while doubling", start: 1, most: 64, holds: 11, degraded: []int{8, 16}, want: 4, client: 8,
			tried: []int{1, 2, 4, 8}, note: "the search stopped at 8 agents, the client's limit, not the server's (client degraded: late); the server passed the tier up to 4 agents"},
		{name: "client degraded while bisecting", start: 1, most: 64, holds: 11, degraded: []int{10}, want: 8, fail: 12, client: 10,
			tried: []int{1, 2, 4, 8, 16, 12, 10}, note: "stopped at 10 agents, the client's limit, not the server's (client degraded: late); the server passed the tier at 8 agents and failed it at 12"},
		{name: "client degraded at start", start: 4, most: 64, holds: 11, degraded: []int{4}, client: 4,
			tried: []int{4}, note: "stopped at 4 agents, the client's limit, not the server's (client degraded: late); it was the first count tried"},
		{name: "client degraded past the failing count", start: 1, most: 64, holds: 3, degraded: []int{8}, want: 3, fail: 4,
			tried: []int{1, 2, 4, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tried []int
			var res report.AgentSearch
			err := searchAgents(tc.start, tc.most, &res, func(n int) (report.AgentPoint, error) {
				tried = append(tried, n)
				pt := report.AgentPoint{Agents: n, Pass: n <= tc.holds, JobsPerHourPerAgent: float64(1000 - n)}
				switch {
				case slices.Contains(tc.degraded, n):
					pt.Pass, pt.Degraded, pt.Note = false, true, "client degraded: late"
				case !pt.Pass:
					pt.Note = "failed TPOT"
				}
				return pt, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.MaxAgents != tc.want || res.FirstFailingAgents != tc.fail || res.ClientLimitedAgents != tc.client {
				t.Errorf("max %d, first failing %d, client-limited %d; want %d, %d, %d",
					res.MaxAgents, res.FirstFailingAgents, res.ClientLimitedAgents, tc.want, tc.fail, tc.client)
			}
			if fmt.Sprint(tried) != fmt.Sprint(tc.tried) {
				t.Errorf("tried %v, want %v", tried, tc.tried)
			}
			if len(res.Points) != len(tried) {
				t.Errorf("%d points for %d tries", len(res.Points), len(tried))
			}
			if tc.want > 0 && res.JobsPerHourPerAgent != float64(1000-tc.want) {
				t.Errorf("jobs per hour per agent %v, want the passing point's %v", res.JobsPerHourPerAgent, 1000-tc.want)
			}
			if !strings.Contains(res.Note, tc.note) || (tc.note == "") != (res.Note == "") {
				t.Errorf("note %q, want %q", res.Note, tc.note)
			}
		})
	}
	// A point that cannot be measured ends the search with its error.
	var res report.AgentSearch
	boom := errors.New("boom")
	if err := searchAgents(1, 8, &res, func(int) (report.AgentPoint, error) { return report.AgentPoint{}, boom }); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
}

// TestAgentPointClientVerdict: a point's turns get the matrix's client
// verdict: a client that sent its turns late for a second, or whose
// goroutines waited for a CPU, is degraded, and the point fails with the
// client's note whatever the tier said; one on time is not, and a
// handful of turns is not judged.
func TestAgentPointClientVerdict(t *testing.T) {
	for _, tc := range []struct {
		name     string
		turns    int
		lag      time.Duration
		schedP99 float64
		degraded bool
		note     string
	}{
		{name: "on time", turns: 40, lag: time.Millisecond},
		{name: "late for good", turns: 40, lag: 50 * time.Millisecond, degraded: true, note: "client degraded: 100% of 40 arrivals (40, in 1 run)"},
		{name: "saturated", turns: 40, lag: time.Millisecond, schedP99: 0.05, degraded: true, note: "client degraded: its goroutines waited"},
		{name: "too few turns", turns: 5, lag: 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			m := &agentMeter{duration: 3 * time.Second}
			for i := range tc.turns {
				// 70 ms apart: 40 turns span 2.7 s, one run past minLateRun.
				m.turns = append(m.turns, agentTurn{scheduled: start.Add(time.Duration(i) * 70 * time.Millisecond), seq: uint64(i),
					outcome: observation.Success, ttft: 10 * time.Millisecond, tpot: time.Millisecond, lag: tc.lag})
			}
			pt := m.judge(&AgentSLO{Quantile: 0.9, MinSuccess: 0.99}, 4, 3*time.Second, tc.schedP99)
			if pt.Degraded != tc.degraded || pt.Pass == tc.degraded || pt.Turns != tc.turns {
				t.Errorf("degraded %v, pass %v, %d turns; want degraded %v, %d turns (note %q)", pt.Degraded, pt.Pass, pt.Turns, tc.degraded, tc.turns, pt.Note)
			}
			if !strings.Contains(pt.Note, tc.note) || (tc.note == "") != (pt.Note == "") {
				t.Errorf("note %q, want %q", pt.Note, tc.note)
			}
			if tc.degraded && !strings.HasSuffix(pt.Note, "the point measured the client, not the server") {
				t.Errorf("note %q does not say the point measured the client", pt.Note)
			}
		})
	}
}

// TestAgentsConfigErrors: the agents block's settings are refused with
// their line.
func TestAgentsConfigErrors(t *testing.T) {
	const head = oneTarget + "bench:\n  matrix: {rates: [1]}\n  agents:\n"
	const tools = "    tools: [{name: search, description: Searches.}]\n"
	for _, tc := range []struct {
		name, block string
		want        []string
	}{
		{"no tools", "    start: 1\n", []string{"b.yml:4: bench.agents.tools: is required"}},
		{"counts", tools + "    start: 4\n    max_agents: 2\n", []string{"b.yml:7: bench.agents.max_agents: must be between start (4)"}},
		{"zero start", tools + "    start: -1\n", []string{"b.yml:6: bench.agents.start: must be at least 1 agent"}},
		{"tier", tools + "    slo: {ttft: -1s, quantile: 1.5, min_success: 2}\n",
			[]string{"b.yml:6: bench.agents.slo.ttft: bounds must not be negative", "bench.agents.slo.quantile: must be in (0, 1)", "bench.agents.slo.min_success: must be a ratio"}},
		{"agent block", tools + "    agent:\n      max_turns: 101\n      tool_latency: {dist: gamma}\n      tool_result_tokens: {dist: fixed, mean: 9000}\n",
			[]string{"b.yml:7: bench.agents.agent.max_turns: must be between 1 and 100", "b.yml:8: bench.agents.agent.tool_latency.dist:", "bench.agents.agent.tool_result_tokens: must be at most 8192"}},
		{"lengths", tools + "    user_tokens: 0\n    max_conversation_tokens: 1\n",
			[]string{"b.yml:6: bench.agents.user_tokens", "b.yml:7: bench.agents.max_conversation_tokens: must be between 2"}},
		{"durations", tools + "    duration: -1s\n", []string{"b.yml:6: bench.agents.duration: must be positive"}},
		{"unknown field", tools + "    agnets: 3\n", []string{"b.yml:6: bench.agents.agnets: unknown field"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tc.block), "b.yml")
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
	// A completions target cannot carry an agent's turns.
	yml := "targets: [{name: a, url: 'http://127.0.0.1:1', model: m, flavor: openai-completions}]\nbench:\n  matrix: {rates: [1]}\n  agents:\n" + tools
	if _, err := Parse([]byte(yml), "b.yml"); err == nil || !strings.Contains(err.Error(), "b.yml:5: bench.agents.tools: an agent needs flavor openai-chat") {
		t.Errorf("error %v, want the flavor refused", err)
	}
	// The defaults.
	c, err := Parse([]byte(head+tools), "b.yml")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Bench.Agents
	if a.Start != 1 || a.MaxAgents != 64 || a.SLO.Quantile != 0.9 || a.SLO.MinSuccess != 0.99 || a.Agent.MaxTurns != 8 ||
		a.Duration != c.Bench.Duration || a.Warmup != c.Bench.Warmup || a.MaxConversationTokens != config.DefaultMaxConversationTokens {
		t.Errorf("defaults %+v", a)
	}
}

// agentSearch runs the repeatability test's search against a fresh simulator:
// an agent model of two tool turns, whose decode step grows with the
// turns decoding at once, so that TPOT grows with the agents.
func agentSearch(t *testing.T, tpot time.Duration) report.AgentSearch {
	t.Helper()
	cfg := simulatortest.InstantConfig()
	cfg.ToolTurns = 2
	cfg.TimeScale = 0.25
	cfg.DecodeStep = 4 * time.Millisecond
	cfg.DecodePerSeq = 2 * time.Millisecond
	url, _ := simulatortest.StartTest(t, cfg)
	c, err := Parse([]byte(fmt.Sprintf(`targets: [{name: sim, url: %q, model: sim-model, timeout: 10s}]
bench:
  matrix: {rates: [1]}
  agents:
    tools: [{name: search, description: Searches., parameters: {type: object, properties: {q: {type: string}}}}]
    user_tokens: 40
    output_tokens: 16
    max_conversation_tokens: 4096
    agent: {tool_latency: {dist: fixed, mean: 20ms}, tool_result_tokens: {dist: fixed, mean: 8}}
    slo: {tpot: %v}
    max_agents: 32
    warmup: 300ms
    duration: 1500ms
`, url, tpot)), filepath.Join(t.TempDir(), "b.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tg := c.Targets[0]
	ct, err := client.TargetOf(&tg)
	if err != nil {
		t.Fatal(err)
	}
	spec := c.Bench.Agents
	a := &agentSearcher{spec: spec, seed: 1, sampling: config.Sampling{IgnoreEOS: true}, logger: slog.New(slog.DiscardHandler)}
	res, err := a.search(context.Background(), &tg, ct)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAccuracyAgentSearchRepeatable runs the whole agents search three
// times against the simulator, with a TPOT bound between the TPOTs of a
// mid-range count's neighbours: the three answers are within an agent of
// each other, and mid-range.
func TestAccuracyAgentSearchRepeatable(t *testing.T) {
	testenv.Timing(t)
	// The simulator's TPOT p90 was 6.7-6.95 ms at 12 agents and 7.3-7.4 ms
	// at 13 (2 cores, 3 runs): the bound falls between them.
	const tpot = 7100 * time.Microsecond
	var answers []int
	for run := range 3 {
		res := agentSearch(t, tpot)
		answers = append(answers, res.MaxAgents)
		var pts []string
		for _, p := range res.Points {
			pts = append(pts, fmt.Sprintf("%d agents: TPOT p90 %.2f ms, %d turns, success %.3f, %d jobs, %.0f jobs/h/agent, pass %v",
				p.Agents, float64(p.TPOTSeconds)*1000, p.Turns, p.SuccessRatio, p.JobsCompleted, p.JobsPerHourPerAgent, p.Pass))
		}
		t.Logf("run %d: max %d agents (first failing %d) %s\n  %s", run+1, res.MaxAgents, res.FirstFailingAgents, res.Note, strings.Join(pts, "\n  "))
	}
	t.Logf("answers %v", answers)
	lo, hi := answers[0], answers[0]
	for _, a := range answers {
		lo, hi = min(lo, a), max(hi, a)
	}
	if hi-lo > 1 {
		t.Errorf("answers %v differ by %d agents, want within 1", answers, hi-lo)
	}
	if lo < 4 || hi > 16 {
		t.Errorf("answers %v, want mid-range (4 to 16): the bound no longer falls between two counts", answers)
	}
}

// TestAgentsDocsExample: docs/bench.md's agents example parses, with the
// settings it shows.
func TestAgentsDocsExample(t *testing.T) {
	b, err := os.ReadFile("../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Agents under an SLO\n")
	if !ok {
		t.Fatal("docs/bench.md has no section Agents under an SLO")
	}
	_, block, _ := strings.Cut(sec, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	c, err := Parse([]byte(block), filepath.Join(t.TempDir(), "b.yml"))
	if err != nil {
		t.Fatalf("the example does not parse: %v\n%s", err, block)
	}
	a := c.Bench.Agents
	if a == nil || len(a.Tools) != 1 || a.SLO.TPOT != 50*time.Millisecond || a.MaxAgents != 64 || a.Duration != time.Minute || a.Agent.MaxTurns != 8 {
		t.Errorf("the example parsed as %+v", a)
	}
}

// TestAgentsSearchThroughCommand: a bench with an agents block runs the
// search after the matrix, through the bench command as an operator runs
// it: the console says each point and the result, report.json holds the
// search, report.md its table, and the run exits 0.
func TestAgentsSearchThroughCommand(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.ToolTurns = 1
	cfg.TimeScale = 0.1
	url, _ := simulatortest.StartTest(t, cfg)
	dir := t.TempDir()
	yml := fmt.Sprintf(`targets: [{name: sim, url: %q, model: sim-model, flavor: openai-chat, timeout: 10s}]
bench:
  seed: 1
  repeats: 1
  warmup: 0s
  duration: 500ms
  stability: {enabled: false}
  matrix: {rates: [2], shapes: [{input_tokens: 32, output_tokens: 4}]}
  agents:
    tools: [{name: search, description: Searches., parameters: {type: object, properties: {q: {type: string}}}}]
    user_tokens: 40
    output_tokens: 8
    agent: {tool_latency: {dist: fixed, mean: 10ms}, tool_result_tokens: {dist: fixed, mean: 8}}
    slo: {ttft: 10s, tpot: 1s}
    max_agents: 2
    warmup: 100ms
    duration: 700ms
`, url)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+writeTestFile(t, dir, "b.yml", yml), "--output.dir="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	rep := readReport(t, out)
	if len(rep.Agents) != 1 {
		t.Fatalf("report.json holds %d agent searches, want 1", len(rep.Agents))
	}
	res := rep.Agents[0]
	// The tier is loose: the server passes both counts. A busy machine
	// (the race detector beside the tools' build) can make the client the
	// limit at 1 or 2 agents, which the search then says instead of
	// judging the server, and stops there: either way the command
	// carries what it found to every output.
	if res.Target != "sim" || len(res.Points) == 0 || len(res.Points) > 2 || res.Points[0].Agents != 1 {
		t.Fatalf("search %+v, want sim tried at 1 agent, then at 2", res)
	}
	last := res.Points[len(res.Points)-1]
	switch {
	case last.Degraded:
		t.Logf("the client was the limit at %d agents on this machine: %s", last.Agents, res.Note)
		if res.ClientLimitedAgents != last.Agents || res.MaxAgents != last.Agents-1 || !strings.Contains(res.Note, "the client's limit") {
			t.Errorf("search %+v, want %d agents passed and the client's limit at %d noted", res, last.Agents-1, last.Agents)
		}
	case res.MaxAgents != 2 || len(res.Points) != 2 || res.ClientLimitedAgents != 0 || !strings.Contains(res.Note, "max_agents"):
		t.Errorf("search %+v, want sim passing 1 and 2 agents, max_agents noted", res)
	}
	console := stdout + stderr
	for i, p := range res.Points {
		verdict := "passed"
		if i < len(res.Points)-1 && !p.Pass {
			t.Errorf("point %+v: want a passing point before the search's last", p)
		}
		switch {
		case p.Degraded:
			verdict = "not judged (the client's limit)"
		case !p.Pass || p.JobsCompleted == 0 || p.JobsPerHourPerAgent <= 0:
			// Every job is two turns of a 10 ms tool wait: jobs end in
			// the window, at a rate the agents' count bounds.
			t.Errorf("point %+v: want a passing (or client-limited) point with completed jobs", p)
		}
		if p.Turns == 0 || p.SuccessRatio != 1 {
			t.Errorf("point %+v: want turns, every one a success", p)
		}
		if want := fmt.Sprintf("agents sim/sim-model: %d agents %s", p.Agents, verdict); !strings.Contains(console, want) {
			t.Errorf("console lacks %q:\n%s", want, console)
		}
	}
	if want := fmt.Sprintf("agents sim/sim-model: max %d agents", res.MaxAgents); !strings.Contains(console, want) {
		t.Errorf("console lacks %q:\n%s", want, console)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "## Agents under an SLO\n") || !strings.Contains(string(md), "| sim | ") {
		t.Errorf("report.md (%v) lacks the agents table with the target's row:\n%s", err, md)
	}
}
