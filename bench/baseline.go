package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// Compare compares cur with base and judges every gated figure of every
// cell present in both (report.GateVerdict); the run's verdict is the
// worst. threshold and gated come from cur's configuration unless
// overridden by the caller.
func Compare(base, cur *report.Report, baseFile string, threshold float64, gated []string, confidence float64) *report.Comparison {
	c := &report.Comparison{
		BaselineFile: baseFile, BaselineStarted: base.Environment.Started,
		Threshold: threshold, Confidence: confidence, Gated: gated, Regressions: []string{}, Inconclusive: []string{},
	}
	if base.Environment.PromptSetSHA256 != cur.Environment.PromptSetSHA256 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("the prompt sets differ (baseline %.12s…, now %.12s…): the runs did not send the same prompts",
			base.Environment.PromptSetSHA256, cur.Environment.PromptSetSHA256))
	}
	if base.Environment.ConfigSHA256 != cur.Environment.ConfigSHA256 {
		c.Warnings = append(c.Warnings, "the configuration files differ")
	}
	z := math.Sqrt2 * math.Erfinv(confidence)
	old := map[string]*report.CellResult{}
	for i := range base.Cells {
		old[base.Cells[i].Key] = &base.Cells[i]
	}
	c.Simultaneous = judgedFigures(old, cur, gated, z)
	zGated := simultaneousZ(confidence, c.Simultaneous)
	seen := map[string]bool{}
	figs := []string{"e2e_p50", "e2e_p99", "output_tokens_per_second"}
	for _, g := range gated {
		if !slices.Contains(figs, g) {
			figs = append(figs, g)
		}
	}
	for i := range cur.Cells {
		nc := &cur.Cells[i]
		oc, ok := old[nc.Key]
		if !ok {
			c.Unmatched = append(c.Unmatched, nc.Key+" (not in the baseline)")
			continue
		}
		seen[nc.Key] = true
		if oc.Degraded || nc.Degraded {
			w := fmt.Sprintf("cell %s: the measurement was degraded (client late or CPU-saturated) in %s: its latencies include the client's own delay",
				nc.Key, map[[2]bool]string{{true, false}: "the baseline", {false, true}: "this run", {true, true}: "both runs"}[[2]bool{oc.Degraded, nc.Degraded}])
			// How late and what to change: this run's, else the
			// baseline's (absent from reports written before it).
			note := nc.DegradedNote
			if !nc.Degraded {
				note = oc.DegradedNote
			}
			if note != "" {
				w += " (" + note + ")"
			}
			c.Warnings = append(c.Warnings, w)
		}
		for _, f := range figs {
			isGated := slices.Contains(gated, f)
			zf := z
			if isGated {
				zf = zGated
			}
			cc, ok := judgeFigure(oc, nc, f, z, z, zf, threshold)
			if !ok {
				continue
			}
			cc.Gated = isGated
			if !cc.Gated {
				// The gate judges its gated figures alone; the others
				// are shown with their change and interval.
				cc.Verdict = ""
			}
			if cc.Gated {
				c.Verdict = c.Verdict.Worse(cc.Verdict)
				switch cc.Verdict {
				case report.VerdictRegressed:
					cc.Regressed = true
					c.Regressions = append(c.Regressions, nc.Key+": "+f)
				case report.VerdictInconclusive:
					c.Inconclusive = append(c.Inconclusive, nc.Key+": "+f)
				default:
					c.OK++
				}
			}
			c.Cells = append(c.Cells, cc)
		}
	}
	for _, oc := range base.Cells {
		if !seen[oc.Key] {
			c.Unmatched = append(c.Unmatched, oc.Key+" (only in the baseline)")
		}
	}
	if c.Verdict == "" {
		// Nothing was judged (no cell in common, no gated figure in
		// either): the gate saw nothing, which is not a pass.
		c.Verdict = report.VerdictInconclusive
		c.Warnings = append(c.Warnings, "no gated figure was compared: no cell of this run is in the baseline with a gated figure in both")
	}
	return c
}

// judgeFigure is the gate's judgement of figure f of the cell nc against
// the cell oc, the one rule of both the regression gate (Compare) and
// `bench compare` (compareReports): the change new/old - 1, its interval
// at the normal quantile z, the smallest change it could tell from noise,
// and report.GateVerdict's verdict at threshold. zOld and zNew are the
// quantiles of the levels of oc's and nc's own intervals (their reports'
// confidence). ok is false when a value is missing or the old one is not
// positive: there is no relative change to judge.
func judgeFigure(oc, nc *report.CellResult, f string, zOld, zNew, z, threshold float64) (report.CellComparison, bool) {
	o, n := oc.Summary.Figure(f), nc.Summary.Figure(f)
	if math.IsNaN(o) || math.IsNaN(n) || o <= 0 {
		return report.CellComparison{}, false
	}
	cc := report.CellComparison{Cell: nc.Key, Figure: f, Old: o, New: n, Change: n/o - 1,
		ChangeLo: report.NaN(), ChangeHi: report.NaN(),
		HigherIsBetter: report.HigherIsBetter(f), Detectable: report.NaN()}
	if se, ok := changeSE(oc, nc, f, zOld, zNew); ok {
		cc.ChangeLo = report.Num(n/o*math.Exp(-z*se) - 1)
		cc.ChangeHi = report.Num(n/o*math.Exp(z*se) - 1)
		cc.Detectable = report.Num(math.Expm1(z * se))
	}
	cc.Verdict = report.GateVerdict(float64(cc.ChangeLo), float64(cc.ChangeHi), threshold, cc.HigherIsBetter)
	return cc, true
}

// changeSE is the standard error of log(new/old) of figure f between two
// cells, from their intervals (oc's at the normal quantile zOld, nc's at
// zNew); ok is false when either has none.
func changeSE(oc, nc *report.CellResult, f string, zOld, zNew float64) (float64, bool) {
	seO, okO := logSE(oc.CI[f], zOld)
	seN, okN := logSE(nc.CI[f], zNew)
	return math.Hypot(seO, seN), okO && okN
}

// judgedFigures counts the gated figures Compare will judge with an
// interval: those of the cells in both reports with a value and an
// interval in both.
func judgedFigures(old map[string]*report.CellResult, cur *report.Report, gated []string, z float64) int {
	k := 0
	for i := range cur.Cells {
		nc := &cur.Cells[i]
		oc, ok := old[nc.Key]
		if !ok {
			continue
		}
		for _, f := range gated {
			o, n := oc.Summary.Figure(f), nc.Summary.Figure(f)
			if _, ok := changeSE(oc, nc, f, z, z); ok && o > 0 && !math.IsNaN(n) {
				k++
			}
		}
	}
	return k
}

// simultaneousZ is the normal quantile of intervals that hold together, at
// the level confidence, over k figures (Bonferroni: each at 1 -
// (1-confidence)/k). The gate judges every gated figure of every cell,
// and a run is regressed when any one is: with each figure's interval at
// 95%, seven figures of one unchanged cell put one past the threshold in
// 9% of reruns when the requests are correlated in time (their intervals
// as wide as they should be: TestGateRatesOnCorrelatedRuns), and a matrix
// of 20 cells would fail most reruns. Held together, the intervals keep
// the run's false alarms at the confidence asked for.
func simultaneousZ(confidence float64, k int) float64 {
	return math.Sqrt2 * math.Erfinv(1-(1-confidence)/float64(max(1, k)))
}

// logSE is the standard error on the log scale implied by an interval.
func logSE(ci report.Interval, z float64) (float64, bool) {
	if !(ci.Lo > 0) || !(ci.Hi >= ci.Lo) || z <= 0 {
		return 0, false
	}
	return (math.Log(ci.Hi) - math.Log(ci.Lo)) / (2 * z), true
}

func changeCI(cc report.CellComparison) string {
	if !cc.ChangeLo.Valid() {
		return ", no interval: the requests cannot bound it (too few, or its slowest came in bursts)"
	}
	return fmt.Sprintf(", interval %+.1f%%..%+.1f%%, could detect ±%.1f%%", float64(cc.ChangeLo)*100, float64(cc.ChangeHi)*100, float64(cc.Detectable)*100)
}

// formatFigure shows a figure's value in its unit.
func formatFigure(figure string, v float64) string {
	switch {
	case figure == "output_tokens_per_second":
		return report.FormatNumber(v) + " tokens/s"
	case strings.HasSuffix(figure, "_ratio"):
		return report.FormatRatio(v)
	}
	return report.FormatSeconds(v)
}

// writeComparisonText prints the comparison for a terminal or a CI log:
// warnings, every gated figure on a line that starts with its verdict
// (regressed, inconclusive, ok), one REGRESSION line per regressed figure,
// then the run's verdict.
func writeComparisonText(w io.Writer, c *report.Comparison) {
	fmt.Fprintf(w, "baseline %s: threshold %.1f%%, confidence %g (the intervals hold together over the %d gated figures judged), gated %s\n",
		c.BaselineFile, c.Threshold*100, c.Confidence, c.Simultaneous, strings.Join(c.Gated, ","))
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "WARNING %s\n", warn)
	}
	for _, u := range c.Unmatched {
		fmt.Fprintf(w, "unmatched %s\n", u)
	}
	for _, cc := range c.Cells {
		if !cc.Gated {
			continue
		}
		fmt.Fprintf(w, "%-12s %s %s: %s -> %s (%+.1f%%%s)\n", cc.Verdict, cc.Cell, cc.Figure,
			formatFigure(cc.Figure, cc.Old), formatFigure(cc.Figure, cc.New), cc.Change*100, changeCI(cc))
	}
	for _, r := range c.Regressions {
		fmt.Fprintf(w, "REGRESSION %s\n", r)
	}
	fmt.Fprintf(w, "gate: %s (%d regressed, %d inconclusive, %d ok)", c.Verdict, len(c.Regressions), len(c.Inconclusive), c.OK)
	if len(c.Inconclusive) > 0 {
		fmt.Fprintf(w, "; the inconclusive ones cannot tell a change of %.1f%% from noise: longer cells (bench.duration) or more repeats narrow their intervals", c.Threshold*100)
	}
	fmt.Fprintln(w)
}
