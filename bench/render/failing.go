package render

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// The success floor in the outputs: beside each leaderboard score the
// target's success and goodput ratios, and the cells below the ranking's
// min_success named with what their requests met (report.FailingCells),
// on the console, in report.md and in report.html alike.

// ConsoleRatio writes a success or goodput ratio at four decimals, so
// that a ratio just below a floor of 0.999 does not read as it: "–" when
// there is none.
func ConsoleRatio(v report.Num) string {
	if math.IsNaN(float64(v)) {
		return "–"
	}
	return strconv.FormatFloat(float64(v), 'f', 4, 64)
}

// FailingCellLine says one cell below the floor on one line: its requests
// that succeeded, its outcomes and HTTP statuses, its first error and
// whether it stopped early.
func FailingCellLine(f *report.FailingCell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d measured requests sent succeeded (%s); outcomes: %s", f.Key, f.Successes, f.Sent,
		ConsoleRatio(report.Num(f.Ratio)), orNone(mdCounts(f.Outcomes, "")))
	if len(f.HTTPErrors) > 0 {
		fmt.Fprintf(&b, "; HTTP statuses: %s", mdCounts(f.HTTPErrors, ""))
	}
	if f.FirstError != "" {
		fmt.Fprintf(&b, "; first error: %s", f.FirstError)
	}
	if f.StoppedEarly != "" {
		fmt.Fprintf(&b, "; %s", f.StoppedEarly)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ratiosNote says what the leaderboard's success and goodput ratios are.
const ratiosNote = "Success: the share of the target's measured requests sent that succeeded; goodput: of its measured requests (dropped arrivals included), those that succeeded and met the SLO; both over all its cells"

// floorRule is the sentence that says what the floor does.
func floorRule(min float64) string {
	if min <= 0 {
		// Set so, or a report written before the floor.
		return "no success floor (bench.min_success 0)"
	}
	return fmt.Sprintf("a target with a cell whose success ratio (successful measured requests over those sent, over every repeat) is below bench.min_success %s ranks below every target without one, and the bench exits 5 (4 when a cell had no success at all)",
		strconv.FormatFloat(min, 'g', -1, 64))
}

// mdBelowFloor is report.md's section of the cells below the floor; none
// when every cell met it.
func mdBelowFloor(b *strings.Builder, r *report.Report) {
	cells := report.FailingCells(r)
	if len(cells) == 0 {
		return
	}
	fmt.Fprintf(b, "## Below min_success\n\nThe cells below the floor: %s.\n\n", floorRule(r.Ranking.MinSuccess))
	b.WriteString("| cell | success ratio | succeeded | of those sent | outcomes | HTTP statuses | first error | stopped early |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i := range cells {
		f := &cells[i]
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %s | %s | %s |\n", report.MarkdownCell(f.Key), ConsoleRatio(report.Num(f.Ratio)), f.Successes, f.Sent,
			orNone(mdCounts(f.Outcomes, "")), mdCounts(f.HTTPErrors, ""), report.MarkdownCell(f.FirstError), report.MarkdownCell(f.StoppedEarly))
	}
	b.WriteString("\n")
}

// htmlBelowFloor is report.html's section of the cells below the floor.
func htmlBelowFloor(r *report.Report) template.HTML {
	cells := report.FailingCells(r)
	if len(cells) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n<section id=\"below-min-success\">\n<h2>Below min_success</h2>\n<p class=\"bad\">%d cell(s) below the floor: %s.</p>\n",
		len(cells), Escape(floorRule(r.Ranking.MinSuccess)))
	b.WriteString("<table class=\"below-min-success\">\n<tr><th class=\"name\">cell</th><th>success ratio</th><th>succeeded</th><th>of those sent</th><th class=\"name\">outcomes</th><th class=\"name\">HTTP statuses</th><th class=\"name\">first error</th><th class=\"name\">stopped early</th></tr>\n")
	for i := range cells {
		f := &cells[i]
		raw := "null"
		if !math.IsNaN(f.Ratio) {
			raw = report.FormatFloat(f.Ratio)
		}
		fmt.Fprintf(&b, "<tr data-cell=\"%s\"><td class=\"name\"><a href=\"#cell-%s\">%s</a></td><td data-q=\"success_ratio\" data-value=\"%s\">%s</td><td>%d</td><td>%d</td><td class=\"name\">%s</td><td class=\"name\">%s</td><td class=\"name\">%s</td><td class=\"name\">%s</td></tr>\n",
			Escape(f.Key), Escape(f.Key), Escape(f.Key), raw, ConsoleRatio(report.Num(f.Ratio)), f.Successes, f.Sent,
			Escape(orNone(mdCounts(f.Outcomes, ""))), Escape(mdCounts(f.HTTPErrors, "")), Escape(f.FirstError), Escape(f.StoppedEarly))
	}
	b.WriteString("</table>\n</section>")
	return template.HTML(b.String())
}
