package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

func reportWith(sha string, cells ...report.CellResult) *report.Report {
	return &report.Report{Schema: report.Schema, Environment: report.Environment{PromptSetSHA256: sha, ConfigSHA256: "c"}, Cells: cells}
}

func cellP99(key string, p99, lo, hi float64) report.CellResult {
	c := report.CellResult{Key: key, Summary: report.Stats{E2E: report.Dist{Count: 100, P50: p99 / 2, P99: p99}, OutputTokensPerSecond: 100}, CI: map[string]report.Interval{}}
	if lo > 0 {
		c.CI["e2e_p99"] = report.Interval{Lo: lo, Hi: hi}
	}
	return c
}

func TestCompare(t *testing.T) {
	base := reportWith("s",
		cellP99("t/rate=1/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=2/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=4/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=8/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=16/a", 1.00, 0, 0),
		cellP99("t/gone/a", 1, 0.9, 1.1),
	)
	cur := reportWith("s",
		cellP99("t/rate=1/a", 1.10, 1.08, 1.12), // +10%, tight: regressed
		cellP99("t/rate=2/a", 1.03, 1.01, 1.05), // +3%: under the threshold
		cellP99("t/rate=4/a", 1.08, 0.80, 1.40), // +8% but within noise
		cellP99("t/rate=8/a", 0.90, 0.88, 0.92), // faster
		cellP99("t/rate=16/a", 1.07, 0, 0),      // no interval: the threshold alone
		cellP99("t/new/a", 1, 0.9, 1.1),
	)
	c := Compare(base, cur, "old.json", 0.05, []string{"e2e_p99"}, 0.95)
	want := []string{"t/rate=1/a: e2e_p99", "t/rate=16/a: e2e_p99"}
	if strings.Join(c.Regressions, "|") != strings.Join(want, "|") {
		t.Errorf("regressions %v, want %v", c.Regressions, want)
	}
	if len(c.Unmatched) != 2 || len(c.Warnings) != 0 {
		t.Errorf("unmatched %v warnings %v", c.Unmatched, c.Warnings)
	}
	for _, cc := range c.Cells {
		if cc.Cell == "t/rate=1/a" && cc.Figure == "e2e_p99" {
			// se: ln(1.02/0.98)/(2·1.96) and ln(1.12/1.08)/(2·1.96).
			z := 1.959963984540054
			se := math.Hypot(math.Log(1.02/0.98)/(2*z), math.Log(1.12/1.08)/(2*z))
			if lo := 1.1*math.Exp(-z*se) - 1; math.Abs(float64(cc.ChangeLo)-lo) > 1e-9 || math.Abs(cc.Change-0.1) > 1e-9 {
				t.Errorf("change %v [%v], want 0.1 [%v]", cc.Change, cc.ChangeLo, lo)
			}
		}
		if cc.Figure == "output_tokens_per_second" && cc.Gated {
			t.Error("throughput is not gated by default")
		}
	}
	var out bytes.Buffer
	writeComparisonText(&out, c)
	if !strings.Contains(out.String(), "REGRESSION t/rate=1/a: e2e_p99") || !strings.Contains(out.String(), "REGRESSED  t/rate=1/a e2e_p99") {
		t.Errorf("text:\n%s", out.String())
	}

	other := reportWith("different", cellP99("t/rate=1/a", 1, 0.98, 1.02))
	if c := Compare(base, other, "old.json", 0.05, []string{"e2e_p99"}, 0.95); len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "prompt sets differ") {
		t.Errorf("warnings %v", c.Warnings)
	}
}
