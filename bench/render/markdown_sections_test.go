package render

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// mdTable returns the rows of the first table under the heading "## title"
// of a Markdown report, each a slice of its cells (the header and the
// separator left out); nil when there is no such section.
func mdTable(md, title string) [][]string {
	_, after, ok := strings.Cut(md, "\n## "+title+"\n")
	if !ok {
		return nil
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	var rows [][]string
	header := true
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		if header || strings.HasPrefix(line, "| ---") {
			header = false
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestMarkdownSections: report.md's failures, replays, known answers,
// perplexity and cold-start sections say what report.json holds: each
// figure read back from its table equals the report's, at the table's
// precision, after a round trip through report.json.
func TestMarkdownSections(t *testing.T) {
	src := &report.Report{Schema: report.Schema,
		Cells: []report.CellResult{
			{Key: "a/rate=4/s/s", Load: report.Load{Kind: report.LoadRate, Value: 4}, Repeats: []report.RepeatResult{
				{Stats: report.Stats{Requests: 20, Successes: 18, Outcomes: map[string]int{"success": 18, "http_5xx": 2}, HTTPErrors: map[string]int{"503": 2}}},
				{Index: 1, Stats: report.Stats{Requests: 20, Successes: 19, Outcomes: map[string]int{"success": 19, "timeout": 1}}}}},
			{Key: "a/replay=1/mc", Load: report.Load{Kind: report.LoadReplay, Value: 1}, Summary: report.Stats{Requests: 10, Successes: 10, Outcomes: map[string]int{"success": 10}},
				Repeats: []report.RepeatResult{{Index: 0, Stability: report.StabilityResult{Checked: true, State: report.StateStable, Stable: report.StableOf(report.StateStable), Windows: 4, Requests: 40, Growth: 0.026, GrowthLow: -0.05, GrowthHigh: 0.1},
					Replay: &report.ReplayResult{Rows: 45, Replayed: 45, Dropped: 2, Clamped: 3, Drift: report.Dist{P50: 0.0004, P99: 0.0021, Max: 0.0032}}}}},
		},
		Accuracy: []report.AccuracyCheck{{Target: "a", Passed: 1, Total: 2, Checks: []report.CheckResult{
			{Prompt: "2+2?", Expect: "4", Answer: "4", Passed: true}, {Prompt: "capital?", Expect: "Paris", Answer: "Lyon"}}}},
		Perplexity: []report.PerplexityResult{{Target: "a", Perplexity: 12.3456, Min: 12.1, Max: 12.9, Tokens: 511, Scores: 2, Repeats: 3,
			Failures: map[string]int{"timeout": 1}}},
		ColdStart: &report.ColdStartReport{Target: "a", ReadySeconds: 41.25, FirstTokenSeconds: 43.5, FirstRequestTTFTSeconds: 0.875, Failed: 0,
			Repeats: []report.ColdStartRepeat{{}, {}}},
	}
	js, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Decode(js)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%q is not a number", s)
		}
		return v
	}
	near := func(what string, got string, want float64, digits int) {
		t.Helper()
		if math.Abs(num(got)-want) > 0.5*math.Pow(10, -float64(digits))+1e-12 {
			t.Errorf("%s: %s in report.md, %v in report.json", what, got, want)
		}
	}

	rows := mdTable(md, "Failures")
	if len(rows) != 1 || rows[0][0] != "a/rate=4/s/s" || rows[0][1] != "40" || rows[0][2] != "3" ||
		rows[0][3] != "http_5xx 2, timeout 1" || rows[0][4] != "503 2" {
		t.Errorf("failures %q", rows)
	}
	rows = mdTable(md, "Replays")
	rr := r.Cells[1].Repeats[0].Replay
	if len(rows) != 1 || rows[0][0] != "a/replay=1/mc" || rows[0][2] != "45" || rows[0][3] != "45" || rows[0][4] != "2" || rows[0][5] != "3" ||
		!strings.HasPrefix(rows[0][10], "stable over 4 windows") {
		t.Fatalf("replays %q", rows)
	}
	near("drift p50 (ms)", rows[0][6], rr.Drift.P50*1000, 1)
	near("drift p99 (ms)", rows[0][7], rr.Drift.P99*1000, 1)
	near("drift max (ms)", rows[0][8], rr.Drift.Max*1000, 1)
	rows = mdTable(md, "Known answers")
	if len(rows) != 1 || rows[0][1] != "1" || rows[0][2] != "2" || !strings.Contains(rows[0][3], `answered "Lyon", expected "Paris"`) {
		t.Errorf("known answers %q: want the failing check and why", rows)
	}
	rows = mdTable(md, "Perplexity")
	p := r.Perplexity[0]
	if len(rows) != 1 || rows[0][4] != "511" || rows[0][5] != "2 of 3" || rows[0][6] != "timeout 1" {
		t.Fatalf("perplexity %q", rows)
	}
	near("perplexity", rows[0][1], float64(p.Perplexity), 3)
	near("min", rows[0][2], float64(p.Min), 3)
	near("max", rows[0][3], float64(p.Max), 3)
	rows = mdTable(md, "Cold start")
	cs := r.ColdStart
	if len(rows) != 1 || rows[0][0] != "a" || rows[0][4] != "2" || rows[0][5] != "0" {
		t.Fatalf("cold start %q", rows)
	}
	near("ready", rows[0][1], float64(cs.ReadySeconds), 3)
	near("first token", rows[0][2], float64(cs.FirstTokenSeconds), 3)
	near("first request TTFT", rows[0][3], float64(cs.FirstRequestTTFTSeconds), 3)

	// Absent from a run without them.
	buf.Reset()
	if err := WriteMarkdown(&buf, &report.Report{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Failures", "Replays", "Known answers", "Perplexity", "Cold start"} {
		if mdTable(buf.String(), s) != nil || strings.Contains(buf.String(), "## "+s) {
			t.Errorf("an empty report has a %s section", s)
		}
	}
}
