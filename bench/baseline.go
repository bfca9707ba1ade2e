package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// Compare compares cur with base. threshold and gated come from cur's
// configuration unless overridden by the caller.
func Compare(base, cur *report.Report, baseFile string, threshold float64, gated []string, confidence float64) *report.Comparison {
	c := &report.Comparison{
		BaselineFile: baseFile, BaselineStarted: base.Environment.Started,
		Threshold: threshold, Confidence: confidence, Gated: gated, Regressions: []string{},
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
			o, n := oc.Summary.Figure(f), nc.Summary.Figure(f)
			if math.IsNaN(o) || math.IsNaN(n) || o <= 0 {
				continue
			}
			cc := report.CellComparison{Cell: nc.Key, Figure: f, Old: o, New: n, Change: n/o - 1,
				ChangeLo: report.NaN(), ChangeHi: report.NaN(), Gated: slices.Contains(gated, f)}
			seO, okO := logSE(oc.CI[f], z)
			seN, okN := logSE(nc.CI[f], z)
			if okO && okN {
				se := math.Hypot(seO, seN)
				cc.ChangeLo = report.Num(n/o*math.Exp(-z*se) - 1)
				cc.ChangeHi = report.Num(n/o*math.Exp(z*se) - 1)
			}
			if cc.Gated && cc.Change > threshold && (!cc.ChangeLo.Valid() || cc.ChangeLo > 0) {
				cc.Regressed = true
				c.Regressions = append(c.Regressions, nc.Key+": "+f)
			}
			c.Cells = append(c.Cells, cc)
		}
	}
	for _, oc := range base.Cells {
		if !seen[oc.Key] {
			c.Unmatched = append(c.Unmatched, oc.Key+" (only in the baseline)")
		}
	}
	return c
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
		return ", no interval"
	}
	return fmt.Sprintf(", interval %+.1f%%..%+.1f%%", float64(cc.ChangeLo)*100, float64(cc.ChangeHi)*100)
}

// writeComparisonText prints the comparison for a terminal or a CI log: warnings,
// every gated figure, then one REGRESSION line per regressed cell.
func writeComparisonText(w io.Writer, c *report.Comparison) {
	fmt.Fprintf(w, "baseline %s: threshold %.1f%%, confidence %g, gated %s\n",
		c.BaselineFile, c.Threshold*100, c.Confidence, strings.Join(c.Gated, ","))
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
		status := "ok"
		if cc.Regressed {
			status = "REGRESSED"
		}
		fmt.Fprintf(w, "%-10s %s %s: %s -> %s (%+.1f%%%s)\n", status, cc.Cell, cc.Figure,
			report.FormatSeconds(cc.Old), report.FormatSeconds(cc.New), cc.Change*100, changeCI(cc))
	}
	for _, r := range c.Regressions {
		fmt.Fprintf(w, "REGRESSION %s\n", r)
	}
}
