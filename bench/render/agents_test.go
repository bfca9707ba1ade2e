package render

import (
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// agentsReport is the golden report with two targets' agents searches:
// one bisected to a failing count, one ended by its client.
func agentsReport(t *testing.T) *report.Report {
	t.Helper()
	r := readGolden(t, "report.json")
	r.Agents = []report.AgentSearch{
		{Target: "vllm", Tier: "success >= 0.99, TPOT p90 <= 50ms", Quantile: 0.9, MaxAgents: 12, JobsPerHourPerAgent: 640, FirstFailingAgents: 13,
			Points: []report.AgentPoint{
				{Agents: 12, Turns: 412, SuccessRatio: 1, TTFTSeconds: 0.21, TPOTSeconds: 0.031, JobsCompleted: 96, JobsPerHourPerAgent: 640, MeanJobSeconds: 4.9, Pass: true},
				{Agents: 13, Turns: 430, SuccessRatio: 0.9975, TTFTSeconds: report.NaN(), TPOTSeconds: 0.058, JobsCompleted: 90, JobsPerHourPerAgent: 560,
					MeanJobSeconds: report.NaN(), Note: "failed TPOT p90 0.058s > 50ms"},
			}},
		{Target: "tgi", Tier: "success >= 0.99", Quantile: 0.95, MaxAgents: 4, JobsPerHourPerAgent: 700, ClientLimitedAgents: 8,
			Note: "the search stopped at 8 agents, the client's limit, not the server's",
			Points: []report.AgentPoint{
				{Agents: 4, Turns: 100, SuccessRatio: 1, TTFTSeconds: 0.1, TPOTSeconds: 0.02, JobsCompleted: 20, JobsPerHourPerAgent: 700, MeanJobSeconds: 3, Pass: true},
				{Agents: 8, Turns: 180, SuccessRatio: 1, TTFTSeconds: 0.4, TPOTSeconds: 0.02, JobsCompleted: 35, JobsPerHourPerAgent: 650, MeanJobSeconds: 3.2,
					Degraded: true, Note: "client degraded: late; the point measured the client, not the server"},
			}},
	}
	return r
}

// TestHTMLAgents: report.html has a table per target of its agents search
// (the result, and every point with its figures at the tier's quantile
// and its verdict), and no section without a search.
func TestHTMLAgents(t *testing.T) {
	var b strings.Builder
	if err := WriteHTML(&b, agentsReport(t)); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`<section id="agents">`,
		`<h3 id="agents-vllm">vllm</h3>`,
		`<td class="name">success &gt;= 0.99, TPOT p90 &lt;= 50ms</td><td data-q="max_agents" data-value="12">12</td><td data-q="jobs_per_hour_per_agent" data-value="640">`,
		`<td data-q="first_failing_agents" data-value="13">13</td><td>—</td>`,
		`<th>TTFT p90</th><th>TPOT p90</th>`,
		`<th>TTFT p95</th><th>TPOT p95</th>`,
		`data-agents="12" data-pass="true" data-degraded="false"><td data-q="agents" data-value="12">12</td><td data-q="turns" data-value="412">412</td>`,
		`<td data-q="success_ratio" data-value="0.9975">0.9975</td><td data-q="ttft_seconds" data-value="null">—</td><td data-q="tpot_seconds" data-value="0.058">58.00 ms</td>`,
		`<span class="bad">failed</span></td><td class="name">failed TPOT p90 0.058s &gt; 50ms</td>`,
		`<td data-q="client_limited_agents" data-value="8">8</td><td class="name">the search stopped at 8 agents, the client&#39;s limit, not the server&#39;s</td>`,
		`data-agents="8" data-pass="false" data-degraded="true">`,
		`<span class="bad">not judged (the client's limit)</span>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if n := strings.Count(html, `<tr class="agent-point`); n != 4 {
		t.Errorf("%d point rows, want 4", n)
	}
	b.Reset()
	if err := WriteHTML(&b, readGolden(t, "report.json")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `id="agents"`) {
		t.Error("report.html has an agents section without a search")
	}
}

// TestAgentLines: an agents point and a search's result as the progress
// and the console's summary say them, a degraded point not judged and a
// search its client ended so marked.
func TestAgentLines(t *testing.T) {
	r := agentsReport(t)
	for _, tc := range []struct {
		pt   report.AgentPoint
		want string
	}{
		{r.Agents[0].Points[0], "agents vllm/m: 12 agents passed (412 turns, success 1.000, TTFT p90 0.21s, TPOT p90 0.031s, 96 jobs, 640.0 jobs/h per agent, job 4.9s)"},
		{r.Agents[1].Points[1], "agents vllm/m: 8 agents not judged (the client's limit) (180 turns, success 1.000, TTFT p90 0.4s, TPOT p90 0.02s, 35 jobs, 650.0 jobs/h per agent, job 3.2s): client degraded: late; the point measured the client, not the server"},
	} {
		if got := AgentPointLine("vllm", "m", 0.9, tc.pt); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
	want := "agents tgi/m: max 4 agents (success >= 0.99), 700.0 jobs/h per agent there, stopped at 8 agents by the client: the search stopped at 8 agents, the client's limit, not the server's"
	if got := AgentResultLine("m", &r.Agents[1]); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	var b strings.Builder
	WriteAgents(&b, r)
	if !strings.Contains(b.String(), "Client's limit (agents):") || strings.Count(b.String(), "Client's limit (agents):") != 1 {
		t.Errorf("the console's summary says the client's limit once, for tgi only:\n%s", b.String())
	}
}
