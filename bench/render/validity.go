package render

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// The answers' validity, for shapes with a response format or tools: the
// share of the measured successful answers judged valid, pooled over a
// cell's repeats, and the counts by result.

// validityChecks are the two checks, their column and their counts.
var validityChecks = []struct {
	label, column string
	counts        func(*report.Stats) map[string]int
}{
	{"Structured answers valid:", "structured_valid_ratio", func(s *report.Stats) map[string]int { return s.StructuredChecks }},
	{"Tool calls valid:", "tool_call_valid_ratio", func(s *report.Stats) map[string]int { return s.ToolCallChecks }},
}

// HasValidity says whether any cell's answers were checked.
func HasValidity(r *report.Report) bool {
	for i := range r.Cells {
		if cellChecked(&r.Cells[i]) {
			return true
		}
	}
	return false
}

func cellChecked(c *report.CellResult) bool {
	for _, v := range validityChecks {
		if !math.IsNaN(report.ValidRatio(c, v.counts)) {
			return true
		}
	}
	return false
}

// validityCell is one check's figure: the ratio and the counts behind it
// ("valid 903 of 1000; invalid_json 61, schema_mismatch 36"), "-" when
// nothing was checked.
func validityCell(c *report.CellResult, counts func(*report.Stats) map[string]int) string {
	ratio := report.ValidRatio(c, counts)
	if math.IsNaN(ratio) {
		return "-"
	}
	sum := map[string]int{}
	all := 0
	for i := range c.Repeats {
		for r, n := range counts(&c.Repeats[i].Stats) {
			sum[r] += n
			all += n
		}
	}
	var rest []string
	for _, r := range []string{"invalid_json", "schema_mismatch", "unknown_tool", "no_call"} {
		if sum[r] > 0 {
			rest = append(rest, fmt.Sprintf("%s %d", r, sum[r]))
		}
	}
	s := fmt.Sprintf("%.4f (valid %d of %d", ratio, sum["valid"], all)
	if len(rest) > 0 {
		s += "; " + strings.Join(rest, ", ")
	}
	return s + ")"
}

// writeBlockValidity writes a cell's validity in its result block, when
// its answers were checked.
func writeBlockValidity(w io.Writer, c *report.CellResult) {
	if !cellChecked(c) {
		return
	}
	fmt.Fprintln(w, blockHeading("-", "Answer validity"))
	for _, v := range validityChecks {
		blockLine(w, v.label, validityCell(c, v.counts))
	}
}

// mdValidity is the Markdown validity table: one row per checked cell.
func mdValidity(b *strings.Builder, r *report.Report) {
	if !HasValidity(r) {
		return
	}
	b.WriteString("## Answer validity\n\nThe measured successful answers of shapes with a response format or tools, pooled over the repeats: a structured answer parses and matches its schema; a tool call names an offered function with arguments that match its parameters.\n\n")
	b.WriteString("| cell | structured answers valid | tool calls valid |\n| --- | --- | --- |\n")
	for i := range r.Cells {
		c := &r.Cells[i]
		if !cellChecked(c) {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", report.MarkdownCell(c.Key),
			report.MarkdownCell(validityCell(c, validityChecks[0].counts)), report.MarkdownCell(validityCell(c, validityChecks[1].counts)))
	}
	b.WriteString("\n")
}

// htmlValidity is validityCell of the check whose column is named.
func htmlValidity(c *report.CellResult, column string) string {
	for _, v := range validityChecks {
		if v.column == column {
			return validityCell(c, v.counts)
		}
	}
	return ""
}
