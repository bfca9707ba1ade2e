package render

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// The console's result block: one per cell at the end of a run, on stdout,
// in the spirit of `vllm bench serve`'s, for a CI log: plain text, labels
// of a fixed width, no terminal escapes. Every figure is a column of
// columns.go, read by the column's own getter, so that the block says
// report.json's numbers (at its printed precision) and cannot drift from
// the CSV; TestResultBlockIsTheReport reads the blocks back.

// blockLabelWidth is the width of a block's labels: the values start in
// one column.
const BlockLabelWidth = 40

// blockRule is a block's rule line, as wide as a label and a value.
const BlockRule = "=================================================="

// blockFigure is one line of figures: its label, the column it shows, and
// how it is printed.
type blockFigure struct {
	label  string
	column string
	format func(float64) string
}

func blockInt(v float64) string      { return strconv.FormatFloat(v, 'f', 0, 64) }
func blockFixed2(v float64) string   { return strconv.FormatFloat(v, 'f', 2, 64) }
func blockMillis(sec float64) string { return blockFixed2(sec * 1000) }

// blockTotals are the block's first figures, after the requests.
var blockTotals = []blockFigure{
	{"Measured duration (s):", "window_seconds", blockFixed2},
	{"Total input tokens:", "input_tokens", blockInt},
	{"Total generated tokens:", "output_tokens", blockInt},
	{"Request throughput (req/s):", "requests_per_second", blockFixed2},
	{"Output token throughput (tok/s):", "output_tokens_per_second", blockFixed2},
	{"Total token throughput (tok/s):", "total_tokens_per_second", blockFixed2},
}

// blockLatencies are the distributions the block shows, each with its
// mean, median and p99 in milliseconds.
var blockLatencies = []struct{ title, short, prefix string }{
	{"Time to First Token", "TTFT", "ttft"},
	{"Time per Output Token (excl. 1st token)", "TPOT", "tpot"},
	{"Inter-token Latency", "ITL", "itl"},
	{"End-to-end Latency", "E2E", "e2e"},
}

// blockFlags are the flag columns the block states, whatever their value.
var blockFlags = []struct{ label, column string }{
	{"Stable:", "stable"},
	{"Client degraded:", "degraded"},
	{"Overloaded:", "overloaded"},
	{"Draining:", "draining"},
	{"Sampled:", "sampled"},
	{"Below min_success:", "below_min_success"},
	{"Usage not believed (requests):", "usage_not_believed"},
}

// CellName is a cell for people: target/model/shape and its load, e.g.
// "vllm/meta-llama/Llama-3.1-8B/chat rate 4" (the progress lines' and the
// result blocks' heading; report.CellKey is its identity in the reports).
func CellName(target, model string, l report.Load, shape string) string {
	name := target
	if model != "" {
		name += "/" + model
	}
	v := strconv.FormatFloat(l.Value, 'g', -1, 64)
	if l.Kind == report.LoadReplay {
		v = "x" + v
	}
	return name + "/" + shape + " " + l.Kind + " " + v
}

// modelOf is the model a report's environment records for a target.
func modelOf(r *report.Report, target string) string {
	for _, t := range r.Environment.Targets {
		if t.Name == target {
			return t.ConfiguredModel
		}
	}
	return ""
}

// partialMeasured is the measured time of a partial cell's partial repeat.
func partialMeasured(c *report.CellResult) string {
	for i := range c.Repeats {
		if r := &c.Repeats[i]; r.Partial {
			return fmt.Sprintf("%.1f s", r.Stats.WindowSeconds)
		}
	}
	return "-"
}

// WriteResultBlocks writes one result block per cell of r.
func WriteResultBlocks(w io.Writer, r *report.Report) {
	if r.Interrupted {
		fmt.Fprintf(w, "INTERRUPTED: the run was stopped; the report holds %s\n", InterruptedHolds(r))
	}
	for i := range r.Cells {
		writeResultBlock(w, &r.Cells[i], modelOf(r, r.Cells[i].Target))
	}
}

func blockLine(w io.Writer, label, value string) {
	fmt.Fprintf(w, "%-*s %s\n", BlockLabelWidth, label, value)
}

// blockHeading centres a title in a rule line.
func blockHeading(fill, title string) string {
	title = " " + title + " "
	left := max(3, (len(BlockRule)-len(title))/2)
	right := max(3, len(BlockRule)-len(title)-left)
	return strings.Repeat(fill, left) + title + strings.Repeat(fill, right)
}

func writeResultBlock(w io.Writer, c *report.CellResult, model string) {
	fmt.Fprintln(w, blockHeading("=", CellName(c.Target, model, c.Load, c.Shape)))
	// The heading is the cell's name for a person; this line its key, by
	// which report.json, report.csv and --baseline know it.
	blockLine(w, "Cell key (report.json, --baseline):", c.Key)
	if c.Partial {
		blockLine(w, "PARTIAL:", fmt.Sprintf("interrupted after %s measured; not ranked", partialMeasured(c)))
	}
	for i := range c.Repeats {
		if r := &c.Repeats[i]; r.StoppedEarly != "" {
			blockLine(w, "STOPPED EARLY:", fmt.Sprintf("repeat %d%s", r.Index+1, strings.TrimPrefix(r.StoppedEarly, "stopped early")))
		}
	}
	blockLine(w, "Successful requests:", report.ColumnNamed("successes").CSV(c))
	// Failed: every measured request of another outcome, by outcome
	// (summary.outcomes: the median count of each over the repeats).
	failed, byOutcome := 0, []string{}
	for _, o := range slices.Sorted(maps.Keys(c.Summary.Outcomes)) {
		if n := c.Summary.Outcomes[o]; o != report.OutcomeSuccess && n > 0 {
			failed += n
			byOutcome = append(byOutcome, fmt.Sprintf("%s %d", o, n))
		}
	}
	blockLine(w, "Failed requests:", strconv.Itoa(failed))
	if len(byOutcome) > 0 {
		blockLine(w, "Failed by outcome:", strings.Join(byOutcome, ", "))
	}
	for _, f := range blockTotals {
		blockLine(w, f.label, f.format(report.ColumnNamed(f.column).Num(c)))
	}
	for _, d := range blockLatencies {
		fmt.Fprintln(w, blockHeading("-", d.title))
		for _, q := range []struct{ label, suffix string }{{"Mean", "mean"}, {"Median", "p50"}, {"P99", "p99"}} {
			v := report.ColumnNamed(d.prefix + "_" + q.suffix + "_seconds").Num(c)
			value := "-" // no values (no request got that far)
			if !math.IsNaN(v) {
				value = blockMillis(v)
			}
			blockLine(w, q.label+" "+d.short+" (ms):", value)
		}
	}
	writeBlockEfficiency(w, c)
	writeBlockValidity(w, c)
	fmt.Fprintln(w, blockHeading("-", "Flags and notes"))
	for _, f := range blockFlags {
		blockLine(w, f.label, report.ColumnNamed(f.column).CSV(c))
	}
	for _, note := range CellNotes(c) {
		blockLine(w, "Note:", note)
	}
	fmt.Fprintln(w, BlockRule)
}

// cellNotes are the sentences a cell's report carries for people: its
// degraded client (how late, how often, what to change), overload and
// draining notes, and each repeat's warm-up, stability, precision, client
// (not judged) and replay notes.
func CellNotes(c *report.CellResult) []string {
	var notes []string
	for _, n := range []string{c.DegradedNote, c.Summary.OverloadNote, c.Summary.DrainingNote} {
		if n != "" {
			notes = append(notes, n)
		}
	}
	if n := c.Summary.UsageNotBelieved; n > 0 {
		notes = append(notes, fmt.Sprintf("usage not believed: the server's usage count of output tokens could not be true for %d measured requests (above max_tokens, or beyond what the events streamed could carry), so their content events were counted instead", n))
	}
	for i := range c.Repeats {
		r := &c.Repeats[i]
		prefix := ""
		if len(c.Repeats) > 1 {
			prefix = fmt.Sprintf("repeat %d: ", r.Index+1)
		}
		if r.WarmupNote != "" {
			notes = append(notes, prefix+r.WarmupNote)
		}
		if r.Stability.Note != "" {
			notes = append(notes, prefix+"stability: "+r.Stability.Note)
		}
		if n := PrecisionNote(r.Precision); n != "" {
			notes = append(notes, prefix+n)
		}
		if cc := r.Client; cc != nil && cc.State == report.StateNotJudged && !c.Degraded {
			notes = append(notes, prefix+cc.Note)
		}
		if rp := r.Replay; rp != nil {
			notes = append(notes, fmt.Sprintf("%sreplay: %d of %d rows replayed, %d dropped, %d clamped by the rate ceiling", prefix, rp.Replayed, rp.Rows, rp.Dropped, rp.Clamped))
			if rp.Cut != "" {
				notes = append(notes, prefix+"replay: "+rp.Cut)
			}
			if rp.Degraded && c.DegradedNote == "" {
				// A report from before the cell's note.
				notes = append(notes, prefix+"replay: drift p99 above 10 ms (degraded)")
			}
		}
	}
	return notes
}

// PrecisionNote says how precise a repeat's headline percentiles are: the
// effective requests behind them, each p50's and p99's margin, and which
// rest on too few requests to be more than indicative; "" without a
// precision.
func PrecisionNote(p *report.Precision) string {
	if p == nil {
		return ""
	}
	var margins, few []string
	for _, name := range []string{"ttft_p50", "tpot_p50", "e2e_p50", "ttft_p99", "tpot_p99", "e2e_p99"} {
		f, ok := p.Figures[name]
		if !ok {
			continue
		}
		label := strings.ReplaceAll(name, "_", " ")
		if f.TooFew {
			few = append(few, label)
			continue
		}
		if m := float64(f.Margin); !math.IsNaN(m) {
			margins = append(margins, fmt.Sprintf("%s ±%.0f%%", label, 100*m))
		}
	}
	note := fmt.Sprintf("precision: %.0f effective requests", float64(p.EffectiveRequests))
	if len(margins) > 0 {
		note += " (" + strings.Join(margins, ", ") + ", at 95%)"
	}
	if len(few) > 0 {
		note += fmt.Sprintf("; %s: too few requests beyond them (fewer than %d effective), indicative only", strings.Join(few, ", "), report.MinBeyond)
	}
	return note
}

// cells counts cells in words: "1 cell", "0 cells", "3 cells".
// InterruptedHolds says what an interrupted run's report holds: the cells
// that finished, every repeat of them; or, when the interrupt came during
// the first cell, that cell's partial figures; or nothing, when it came
// before the first cell measured anything.
func InterruptedHolds(r *report.Report) string {
	finished, partial := r.CellCounts()
	switch {
	case finished == 0 && partial == 0:
		return "no cell: the interrupt came before the first cell measured anything"
	case partial == 0:
		return fmt.Sprintf("the %s that finished", cells(finished))
	case finished == 0:
		return fmt.Sprintf("%s cut short by the interrupt, marked PARTIAL: no cell had finished, and its figures cover only the time it measured before the interrupt", cells(partial))
	}
	return fmt.Sprintf("the %s that finished, and %s cut short by the interrupt, marked PARTIAL", cells(finished), cells(partial))
}

func cells(n int) string {
	if n == 1 {
		return "1 cell"
	}
	return fmt.Sprintf("%d cells", n)
}
