package report

import (
	"math"
	"testing"
)

// TestFormats: the outputs' number formats at the edges of their scales,
// and "—" for what is not a number.
func TestFormats(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		f    func(float64) string
		v    float64
		want string
	}{
		{"seconds", FormatSeconds, 0, "0"},
		{"seconds", FormatSeconds, 0.00042, "420.0 µs"},
		{"seconds", FormatSeconds, 0.25, "250.00 ms"},
		{"seconds", FormatSeconds, 1, "1.000 s"},
		{"seconds", FormatSeconds, nan, "—"},
		{"number", FormatNumber, 1234.5, "1234"},
		{"number", FormatNumber, 123.45, "123.5"},
		{"number", FormatNumber, 1.2345, "1.23"},
		{"number", FormatNumber, 0.12345, "0.123"},
		{"number", FormatNumber, math.Inf(1), "—"},
		{"ratio", FormatRatio, 0.9876, "98.8%"},
		{"ratio", FormatRatio, nan, "—"},
		{"bytes", FormatBytes, 3 << 30, "3.00 GiB"},
		{"bytes", FormatBytes, 512 << 20, "512.0 MiB"},
		{"bytes", FormatBytes, nan, "—"},
		{"float", FormatFloat, 0.1, "0.1"},
		{"float", FormatFloat, 3.666666666666667, "3.666666666666667"},
		{"md millis", MarkdownMillis, 0.01234, "12.3"},
		{"md millis", MarkdownMillis, nan, "–"},
		{"md rate", MarkdownRate, 3.14159, "3.14"},
		{"md ratio", MarkdownRatio, 0.97101, "0.971"},
	} {
		if got := tc.f(tc.v); got != tc.want {
			t.Errorf("%s(%v) = %q, want %q", tc.name, tc.v, got, tc.want)
		}
	}
	if got := MarkdownCell("a|b\nc"); got != `a\|b c` {
		t.Errorf("MarkdownCell = %q", got)
	}
}

// TestThinQuantile: a quantile says it rests on too few samples below the
// count it needs, and nothing at or above it, or without samples.
func TestThinQuantile(t *testing.T) {
	for _, tc := range []struct {
		q     string
		count int
		want  string
	}{
		{"p99", 40, "from 40 samples: p99 needs at least 100"},
		{"p99", 100, ""},
		{"p99_9", 999, "from 999 samples: p99.9 needs at least 1000"},
		{"p90", 9, "from 9 samples: p90 needs at least 10"},
		{"p95", 20, ""},
		{"p50", 1, ""},
		{"p99", 0, ""},
	} {
		if got := ThinQuantile(tc.q, tc.count); got != tc.want {
			t.Errorf("ThinQuantile(%s, %d) = %q, want %q", tc.q, tc.count, got, tc.want)
		}
	}
}

// TestLoadNames: a load's key, label and cell key as the reports write
// them.
func TestLoadNames(t *testing.T) {
	for _, tc := range []struct {
		l          Load
		str, label string
		key        string
	}{
		{Load{LoadRate, 4}, "rate=4", "4 req/s", "a/rate=4/s"},
		{Load{LoadRate, 2.5}, "rate=2.5", "2.5 req/s", "a/rate=2.5/s"},
		{Load{LoadConcurrency, 8}, "concurrency=8", "8 clients", "a/concurrency=8/s"},
		{Load{LoadReplay, 1.5}, "replay=1.5", "replay ×1.5", "a/replay=1.5/s"},
	} {
		if got := tc.l.String(); got != tc.str {
			t.Errorf("%+v: String %q, want %q", tc.l, got, tc.str)
		}
		if got := tc.l.Label(); got != tc.label {
			t.Errorf("%+v: Label %q, want %q", tc.l, got, tc.label)
		}
		if got := CellKey("a", tc.l, "s"); got != tc.key {
			t.Errorf("%+v: CellKey %q, want %q", tc.l, got, tc.key)
		}
	}
}

// TestCellStability: unstable wins, then not judged, then stable;
// repeats not checked say nothing; the flag follows the state.
func TestCellStability(t *testing.T) {
	rep := func(checked bool, state string) RepeatResult {
		return RepeatResult{Stability: StabilityResult{Checked: checked, State: state}}
	}
	for _, tc := range []struct {
		name    string
		repeats []RepeatResult
		want    string
	}{
		{"none", nil, ""},
		{"not checked", []RepeatResult{rep(false, StateUnstable)}, ""},
		{"stable", []RepeatResult{rep(true, StateStable), rep(true, StateStable)}, StateStable},
		{"one not judged", []RepeatResult{rep(true, StateStable), rep(true, StateNotJudged)}, StateNotJudged},
		{"checked without a state", []RepeatResult{rep(true, "")}, StateNotJudged},
		{"one unstable", []RepeatResult{rep(true, StateNotJudged), rep(true, StateUnstable), rep(true, StateStable)}, StateUnstable},
		{"unchecked beside stable", []RepeatResult{rep(false, ""), rep(true, StateStable)}, StateStable},
	} {
		got := CellStability(tc.repeats)
		if got != tc.want {
			t.Errorf("%s: CellStability %q, want %q", tc.name, got, tc.want)
		}
		c := CellResult{Repeats: tc.repeats}
		if flag := StableOf(got); (flag == nil) != (got == "") || flag != nil && *flag != (got == StateStable) || (flag != nil) != c.StabilityChecked() {
			t.Errorf("%s: StableOf(%q) = %v, StabilityChecked %v", tc.name, got, flag, c.StabilityChecked())
		}
	}
}

// TestFigure: the figures by name, NaN for a distribution without values
// and for a name that is no figure.
func TestFigure(t *testing.T) {
	s := &Stats{OutputTokensPerSecond: 31.5, GoodputRatio: 0.75, SuccessRatio: 0.9,
		TTFT: Dist{Count: 3, P50: 0.1, P90: 0.2, P99: 0.3}, E2E: Dist{Count: 1, P50: 1, P99: 2}}
	for name, want := range map[string]float64{
		"output_tokens_per_second": 31.5, "goodput_ratio": 0.75, "success_ratio": 0.9,
		"ttft_p50": 0.1, "ttft_p90": 0.2, "ttft_p99": 0.3, "e2e_p50": 1, "e2e_p99": 2,
		"tpot_p50": math.NaN(), "ttft_p95": math.NaN(), "bogus_p50": math.NaN(), "e2e": math.NaN(), "": math.NaN(),
	} {
		if got := s.Figure(name); math.IsNaN(got) != math.IsNaN(want) || !math.IsNaN(want) && got != want {
			t.Errorf("Figure(%q) = %v, want %v", name, got, want)
		}
	}
}
