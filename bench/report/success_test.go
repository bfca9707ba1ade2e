package report

import (
	"maps"
	"math"
	"path/filepath"
	"testing"
)

// repeatsOf are repeats of the given requests, successes and drops each.
func repeatsOf(counts ...[3]int) []RepeatResult {
	var out []RepeatResult
	for i, c := range counts {
		out = append(out, RepeatResult{Index: i, Stats: Stats{Requests: c[0], Successes: c[1], Outcomes: map[string]int{OutcomeDropped: c[2]}}})
	}
	return out
}

// TestSuccessRatio: a cell's successes over its requests sent, pooled over
// its repeats (not the mean of their ratios); the client's drops are not
// the server's failures; nothing sent is NaN, which fails any floor above
// 0; a cell without repeats is not judged.
func TestSuccessRatio(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name    string
		repeats []RepeatResult
		sent    []int
		ratio   float64
		below   map[float64]bool // floor: below it
	}{
		{"all succeeded", repeatsOf([3]int{10, 10, 0}), []int{10}, 1, map[float64]bool{0.999: false, 1: false}},
		{"pooled, not averaged", repeatsOf([3]int{10, 10, 0}, [3]int{30, 15, 0}), []int{10, 30}, 25.0 / 40, map[float64]bool{0.6: false, 0.7: true}},
		{"drops are the client's", repeatsOf([3]int{20, 15, 5}), []int{15}, 1, map[float64]bool{0.999: false}},
		{"drops and failures", repeatsOf([3]int{20, 12, 4}, [3]int{20, 14, 2}), []int{16, 18}, 26.0 / 34, map[float64]bool{0.75: false, 0.8: true}},
		{"nothing sent", repeatsOf([3]int{8, 0, 8}), []int{0}, nan, map[float64]bool{0: false, 0.5: true}},
		{"no success", repeatsOf([3]int{8, 0, 0}), []int{8}, 0, map[float64]bool{0: false, 0.01: true}},
		{"no repeat", nil, nil, nan, map[float64]bool{0: false, 1: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &CellResult{Key: tc.name, Repeats: tc.repeats}
			for i := range c.Repeats {
				if got := SentRequests(&c.Repeats[i].Stats); got != tc.sent[i] {
					t.Errorf("repeat %d: SentRequests %d, want %d", i, got, tc.sent[i])
				}
			}
			got := SuccessRatio(c)
			if math.IsNaN(got) != math.IsNaN(tc.ratio) || !math.IsNaN(got) && math.Abs(got-tc.ratio) > 1e-12 {
				t.Errorf("SuccessRatio %v, want %v", got, tc.ratio)
			}
			for floor, want := range tc.below {
				if got := BelowMinSuccess(c, floor); got != want {
					t.Errorf("BelowMinSuccess(%v) = %v, want %v", floor, got, want)
				}
			}
		})
	}
}

// TestFailingCells: only the cells flagged below the floor, in the
// report's order, their counts summed over the repeats, and the first
// error and early stop of the first repeat that has one.
func TestFailingCells(t *testing.T) {
	r := &Report{Cells: []CellResult{
		{Key: "ok", Repeats: repeatsOf([3]int{10, 10, 0})},
		{Key: "b", BelowMinSuccess: true, Repeats: []RepeatResult{
			{Stats: Stats{Requests: 10, Successes: 8, Outcomes: map[string]int{"success": 8, "http_5xx": 2}, HTTPErrors: map[string]int{"503": 2}}},
			{Index: 1, FirstError: "HTTP 503: overloaded", StoppedEarly: "stopped early: 5 failures in a row",
				Stats: Stats{Requests: 10, Successes: 5, Outcomes: map[string]int{"success": 5, "http_5xx": 3, "dropped": 2}, HTTPErrors: map[string]int{"503": 2, "500": 1}}},
			{Index: 2, FirstError: "later error", Stats: Stats{Requests: 1, Outcomes: map[string]int{"timeout": 1}}},
		}},
		{Key: "a", BelowMinSuccess: true, Repeats: repeatsOf([3]int{4, 0, 4})},
	}}
	got := FailingCells(r)
	if len(got) != 2 || got[0].Key != "b" || got[1].Key != "a" {
		t.Fatalf("failing cells %+v, want b then a", got)
	}
	b := got[0]
	if b.Requests != 21 || b.Sent != 19 || b.Successes != 13 || math.Abs(b.Ratio-13.0/19) > 1e-12 {
		t.Errorf("b: %d requests, %d sent, %d successes, ratio %v; want 21, 19, 13, 13/19", b.Requests, b.Sent, b.Successes, b.Ratio)
	}
	if want := map[string]int{"success": 13, "http_5xx": 5, "dropped": 2, "timeout": 1}; !maps.Equal(b.Outcomes, want) {
		t.Errorf("b: outcomes %v, want %v", b.Outcomes, want)
	}
	if want := map[string]int{"503": 4, "500": 1}; !maps.Equal(b.HTTPErrors, want) {
		t.Errorf("b: HTTP errors %v, want %v", b.HTTPErrors, want)
	}
	if b.FirstError != "HTTP 503: overloaded" || b.StoppedEarly != "stopped early: 5 failures in a row" {
		t.Errorf("b: first error %q, stopped early %q: want the first repeat's that has one", b.FirstError, b.StoppedEarly)
	}
	if a := got[1]; !math.IsNaN(a.Ratio) || a.Sent != 0 || len(a.HTTPErrors) != 0 {
		t.Errorf("a: ratio %v, sent %d, HTTP errors %v: want NaN, 0, none", a.Ratio, a.Sent, a.HTTPErrors)
	}
	if got := FailingCells(&Report{Cells: r.Cells[:1]}); got != nil {
		t.Errorf("no cell below the floor: %+v", got)
	}
}

// TestGoldenSuccessFigures reads the golden report (bench/testdata/golden)
// and checks the floor's figures against its known counts: fast at 4
// req/s had 2 HTTP 503s of 24, fast at 8 req/s dropped 3 of 48 and failed
// none, slow at 8 req/s had a 429 and a 503 of 48.
func TestGoldenSuccessFigures(t *testing.T) {
	r, err := ReadJSON(filepath.Join("..", "testdata", "golden", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		key         string
		sent, ok    int
		ratio       float64
		below       bool
		finished    bool
		stable      string
		clientJudge bool // ClientNotJudged
	}{
		{"fast/rate=4/s", 24, 22, 22.0 / 24, true, true, "", true},
		{"fast/rate=8/s", 45, 45, 1, false, true, "", false},
		{"slow/rate=4/s", 24, 24, 1, false, true, "", true},
		{"slow/rate=8/s", 48, 46, 46.0 / 48, true, true, StateUnstable, false},
	}
	if len(r.Cells) != len(want) {
		t.Fatalf("%d cells, want %d", len(r.Cells), len(want))
	}
	for i, w := range want {
		c := &r.Cells[i]
		sent, ok := 0, 0
		for j := range c.Repeats {
			sent += SentRequests(&c.Repeats[j].Stats)
			ok += c.Repeats[j].Stats.Successes
		}
		switch {
		case c.Key != w.key:
			t.Errorf("cell %d: %s, want %s", i, c.Key, w.key)
		case sent != w.sent || ok != w.ok:
			t.Errorf("%s: %d of %d sent succeeded, want %d of %d", c.Key, ok, sent, w.ok, w.sent)
		case math.Abs(SuccessRatio(c)-w.ratio) > 1e-12:
			t.Errorf("%s: success ratio %v, want %v", c.Key, SuccessRatio(c), w.ratio)
		case BelowMinSuccess(c, r.Ranking.MinSuccess) != w.below || c.BelowMinSuccess != w.below:
			t.Errorf("%s: below %v (flag %v), want %v", c.Key, BelowMinSuccess(c, r.Ranking.MinSuccess), c.BelowMinSuccess, w.below)
		case CellStability(c.Repeats) != w.stable:
			t.Errorf("%s: stability %q, want %q", c.Key, CellStability(c.Repeats), w.stable)
		case c.ClientNotJudged() != w.clientJudge:
			t.Errorf("%s: client not judged %v, want %v", c.Key, c.ClientNotJudged(), w.clientJudge)
		}
	}
	if finished, partial := r.CellCounts(); finished != 4 || partial != 0 {
		t.Errorf("CellCounts %d, %d; want 4, 0", finished, partial)
	}
	failing := FailingCells(r)
	if len(failing) != 2 || failing[0].Key != "fast/rate=4/s" || failing[1].Key != "slow/rate=8/s" {
		t.Fatalf("failing cells %+v", failing)
	}
	if got := failing[1].HTTPErrors; !maps.Equal(got, map[string]int{"429": 1, "503": 1}) {
		t.Errorf("slow/rate=8/s: HTTP errors %v, want 429 1, 503 1", got)
	}
	// The leaderboard's pooled success ratios are the cells' counts pooled.
	for _, e := range r.Ranking.Entries {
		want := map[string]float64{"fast": 67.0 / 69, "slow": 70.0 / 72}[e.Target]
		if math.Abs(float64(e.SuccessRatio)-want) > 1e-12 {
			t.Errorf("%s: leaderboard success ratio %v, want %v", e.Target, e.SuccessRatio, want)
		}
	}
}
