package render

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// TestCellName: target/model/shape and the load, a replay's speed as ×.
func TestCellName(t *testing.T) {
	for _, tc := range []struct {
		target, model string
		load          report.Load
		shape, want   string
	}{
		{"vllm", "meta-llama/Llama-3.1-8B", report.Load{Kind: report.LoadRate, Value: 4}, "chat", "vllm/meta-llama/Llama-3.1-8B/chat rate 4"},
		{"vllm", "", report.Load{Kind: report.LoadConcurrency, Value: 8}, "chat", "vllm/chat concurrency 8"},
		{"a", "m", report.Load{Kind: report.LoadReplay, Value: 1.5}, "trace", "a/m/trace replay x1.5"},
		{"a", "m", report.Load{Kind: report.LoadRate, Value: 0.25}, "s", "a/m/s rate 0.25"},
	} {
		if got := CellName(tc.target, tc.model, tc.load, tc.shape); got != tc.want {
			t.Errorf("CellName = %q, want %q", got, tc.want)
		}
	}
}

// TestFailingCellLine: a cell below the floor on one line, its ratio at
// four decimals ("–" when nothing was sent), and the parts it has.
func TestFailingCellLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    report.FailingCell
		want string
	}{
		{"failures", report.FailingCell{Key: "a/rate=4/s", Sent: 24, Successes: 22, Ratio: 22.0 / 24,
			Outcomes: map[string]int{"success": 22, "http_5xx": 2}, HTTPErrors: map[string]int{"503": 2}, FirstError: "http_5xx: HTTP 503"},
			"a/rate=4/s: 22 of 24 measured requests sent succeeded (0.9167); outcomes: http_5xx 2, success 22; HTTP statuses: 503 2; first error: http_5xx: HTTP 503"},
		{"nothing sent", report.FailingCell{Key: "b", Ratio: math.NaN(), Outcomes: map[string]int{}},
			"b: 0 of 0 measured requests sent succeeded (–); outcomes: none"},
		{"just below 0.999", report.FailingCell{Key: "c", Sent: 10000, Successes: 9989, Ratio: 0.9989, Outcomes: map[string]int{"success": 9989, "timeout": 11},
			StoppedEarly: "stopped early: 11 timeouts"},
			"c: 9989 of 10000 measured requests sent succeeded (0.9989); outcomes: success 9989, timeout 11; stopped early: 11 timeouts"},
	} {
		if got := FailingCellLine(&tc.f); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
	for v, want := range map[float64]string{1: "1.0000", 0.99989: "0.9999", 0.5: "0.5000", 0: "0.0000"} {
		if got := ConsoleRatio(report.Num(v)); got != want {
			t.Errorf("ConsoleRatio(%v) = %q, want %q", v, got, want)
		}
	}
	if got := ConsoleRatio(report.NaN()); got != "–" {
		t.Errorf("ConsoleRatio(NaN) = %q", got)
	}
}

// TestSweepLines: a sweep's points and its result as the progress and the
// console's summary say them.
func TestSweepLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		pt   report.SweepPoint
		want string
	}{
		{"passed", report.SweepPoint{Rate: 8, Requests: 80, SuccessRatio: 1, GoodputRatio: 0.98, Pass: true},
			"sweep vllm/m/chat: 8 req/s passed (80 requests, success 1.000, goodput 0.980)"},
		{"failed", report.SweepPoint{Rate: 13.75, Requests: 137, SuccessRatio: 0.9, GoodputRatio: 0.5, Note: "goodput 0.500 < 0.95"},
			"sweep vllm/m/chat: 13.75 req/s failed (137 requests, success 0.900, goodput 0.500): goodput 0.500 < 0.95"},
		{"client's limit", report.SweepPoint{Rate: 64, Requests: 10, SuccessRatio: 1, GoodputRatio: 1, Pass: true, Degraded: true},
			"sweep vllm/m/chat: 64 req/s not judged (the client's limit) (10 requests, success 1.000, goodput 1.000)"},
	} {
		if got := SweepPointLine("vllm", "m", "chat", tc.pt); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s    report.SweepResult
		want string
	}{
		{report.SweepResult{Target: "a", Shape: "s", Rule: "goodput >= 0.95", MaxRate: 4, FirstFailingRate: 8},
			"sweep a/m/s: max rate 4 req/s (goodput >= 0.95), first failing 8 req/s"},
		{report.SweepResult{Target: "a", Shape: "s", Rule: "r", MaxRate: 16, FirstFailingRate: 32, ClientLimitedRate: 32, Note: "the client fell behind"},
			"sweep a/m/s: max rate 16 req/s (r), stopped at 32 req/s by the client: the client fell behind"},
		{report.SweepResult{Target: "a", Shape: "s", Rule: "r", MaxRate: 2.5},
			"sweep a/m/s: max rate 2.5 req/s (r)"},
	} {
		if got := SweepResultLine("m", &tc.s); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// TestWriteSweeps: the golden report's sweep, its point and its rates,
// under the model its environment records.
func TestWriteSweeps(t *testing.T) {
	r := readGolden(t, "report.json")
	r.Environment.Targets = []report.TargetInfo{{Name: "fast", ConfiguredModel: "m"}}
	var b strings.Builder
	WriteSweeps(&b, r)
	out := b.String()
	for _, want := range []string{
		"Rate sweep fast/m/s",
		"Point:                                   4 req/s passed (14 requests, success 0.970, goodput 0.960)",
		"Max rate (req/s):                        4\n",
		"First failing rate (req/s):              8\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Client's limit") || strings.Count(out, BlockRule+"\n") != 1 {
		t.Errorf("one sweep without a client's limit:\n%s", out)
	}
	b.Reset()
	WriteSweeps(&b, &report.Report{})
	if b.Len() != 0 {
		t.Errorf("a report without sweeps wrote %q", b.String())
	}
}

// TestPrecisionNote: the effective requests, the margins in the note's
// order, and the percentiles resting on too few requests.
func TestPrecisionNote(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *report.Precision
		want string
	}{
		{"none", nil, ""},
		{"margins", &report.Precision{EffectiveRequests: 812.4, Figures: map[string]report.FigurePrecision{
			"e2e_p99": {Margin: 0.2}, "ttft_p50": {Margin: 0.034}, "tpot_p50": {Margin: report.NaN()}}},
			"precision: 812 effective requests (ttft p50 ±3%, e2e p99 ±20%, at 95%)"},
		{"too few", &report.Precision{EffectiveRequests: 40, Figures: map[string]report.FigurePrecision{
			"ttft_p50": {Margin: 0.1}, "ttft_p99": {TooFew: true}, "e2e_p99": {TooFew: true}}},
			"precision: 40 effective requests (ttft p50 ±10%, at 95%); ttft p99, e2e p99: too few requests beyond them (fewer than 5 effective), indicative only"},
		{"one too few", &report.Precision{EffectiveRequests: 9, Figures: map[string]report.FigurePrecision{"tpot_p99": {TooFew: true}}},
			"precision: 9 effective requests; tpot p99: too few requests beyond them (fewer than 5 effective), indicative only"},
		{"no figure", &report.Precision{EffectiveRequests: 3}, "precision: 3 effective requests"},
	} {
		if got := PrecisionNote(tc.p); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestCellNotes: the cell's own notes first, then each repeat's, prefixed
// with its number when the cell has several; a client's "not judged" only
// when the cell is not degraded.
func TestCellNotes(t *testing.T) {
	c := &report.CellResult{
		DegradedNote: "", Summary: report.Stats{OverloadNote: "overloaded: queue grew", UsageNotBelieved: 2},
		Repeats: []report.RepeatResult{
			{Index: 0, WarmupNote: "warm-up ended by its bound", Client: &report.ClientCheck{State: report.StateNotJudged, Note: "client not judged: 14 arrivals"}},
			{Index: 1, Stability: report.StabilityResult{Note: "unstable: grew"},
				Replay: &report.ReplayResult{Rows: 10, Replayed: 9, Dropped: 1, Clamped: 2, Cut: "cut at 60 s", Degraded: true}},
		},
	}
	want := []string{
		"overloaded: queue grew",
		"usage not believed: the server's usage count of output tokens could not be true for 2 measured requests (above max_tokens, or beyond what the events streamed could carry), so their content events were counted instead",
		"repeat 1: warm-up ended by its bound",
		"repeat 1: client not judged: 14 arrivals",
		"repeat 2: stability: unstable: grew",
		"repeat 2: replay: 9 of 10 rows replayed, 1 dropped, 2 clamped by the rate ceiling",
		"repeat 2: replay: cut at 60 s",
		"repeat 2: replay: drift p99 above 10 ms (degraded)",
	}
	if got := CellNotes(c); !slices.Equal(got, want) {
		t.Errorf("notes:\n%q\nwant\n%q", got, want)
	}
	c.Degraded, c.DegradedNote = true, "client degraded: 30% late"
	got := CellNotes(c)
	if got[0] != "client degraded: 30% late" || slices.Contains(got, "repeat 1: client not judged: 14 arrivals") || slices.Contains(got, "repeat 2: replay: drift p99 above 10 ms (degraded)") {
		t.Errorf("a degraded cell's notes: %q", got)
	}
	if got := CellNotes(&report.CellResult{Repeats: []report.RepeatResult{{WarmupNote: "w"}}}); !slices.Equal(got, []string{"w"}) {
		t.Errorf("one repeat: %q, want no prefix", got)
	}
}
