package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
)

// compareFlags are `bench compare`'s.
type compareFlags struct {
	files      []string
	threshold  float64
	confidence float64
	format     string
	output     string
}

// addCompareCommand registers `bench compare` under cmd; the returned
// function runs it once app.Parse has chosen it.
func addCompareCommand(cmd *kingpin.CmdClause, chosen func(string), stdout, stderr io.Writer) func(context.Context) int {
	var f compareFlags
	c := cmd.Command("compare", "Compare several report.json side by side: every cell found by target, load and shape, each figure in each run with its interval, its change against the first run and a verdict (better, worse, same, inconclusive) by the regression gate's rule.")
	c.Flag("threshold", "Relative change of a figure that counts as worse or better, as bench.regression.threshold.").Default(fmt.Sprint(DefaultThreshold)).Float64Var(&f.threshold)
	c.Flag("confidence", "Level of the changes' intervals, held together over the figures judged between two runs (0: the first report's ranking confidence).").Default("0").Float64Var(&f.confidence)
	c.Flag("format", "What stdout shows: a table (console), markdown or html (with each figure across the runs as a chart).").Default("table").EnumVar(&f.format, "table", "markdown", "html")
	c.Flag("output", "Also write the comparison as JSON to this file: per cell and figure its name, values, intervals and verdicts.").PlaceHolder("FILE.json").StringVar(&f.output)
	c.Arg("reports", "The report.json files, the first the reference the others are judged against.").Required().StringsVar(&f.files)
	c.Action(func(*kingpin.ParseContext) error { chosen("compare"); return nil })
	return func(ctx context.Context) int { return compareCommand(ctx, &f, stdout, stderr) }
}

// compareCommand reads the reports, compares them and writes the
// comparison. Its exit status says whether it could, not what it found:
// a worse figure is the gate's business (--baseline), not this view's.
func compareCommand(ctx context.Context, f *compareFlags, stdout, stderr io.Writer) int {
	if len(f.files) < 2 {
		fmt.Fprintln(stderr, "bench compare needs at least two reports")
		return ExitUsage
	}
	if !(f.threshold > 0) || !(f.confidence == 0 || f.confidence > 0.5 && f.confidence < 1) {
		fmt.Fprintln(stderr, "bench compare: --threshold must be above 0 and --confidence 0 or between 0.5 and 1")
		return ExitUsage
	}
	reps := make([]*report.Report, len(f.files))
	for i, file := range f.files {
		r, err := report.ReadJSONContext(ctx, file)
		if err != nil {
			fmt.Fprintln(stderr, "bench compare:", err)
			return ExitError
		}
		reps[i] = r
	}
	h := compareReports(reps, f.files, f.threshold, f.confidence)
	var err error
	switch f.format {
	case "markdown":
		err = render.WriteHistoryMarkdown(stdout, h)
	case "html":
		err = render.WriteHistoryHTML(stdout, h)
	default:
		err = render.WriteHistoryTable(stdout, h)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench compare: writing the comparison:", err)
		return ExitError
	}
	if f.output != "" {
		if err := writeHistoryJSON(f.output, h); err != nil {
			fmt.Fprintln(stderr, "bench compare: --output:", err)
			return ExitError
		}
	}
	return ExitOK
}

func writeHistoryJSON(path string, h *report.History) error {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// cellID is what matches cells across runs: target, load and shape (a
// cell's key also names its model, which an upgrade may change).
type cellID struct {
	target, load, shape string
}

func idOf(c *report.CellResult) cellID {
	return cellID{c.Target, c.Load.String(), c.Shape}
}

func (id cellID) String() string { return id.target + "/" + id.load + "/" + id.shape }

// compareReports compares reps (read from files) with the first: its
// cells, in its order, each figure of FigureNames judged in every later
// run by judgeFigure, the gate's rule. The intervals of the changes
// between the first run and another hold together, at confidence, over
// the figures judged between those two (as the gate's over its gated
// figures); confidence 0 is the first report's ranking confidence.
func compareReports(reps []*report.Report, files []string, threshold, confidence float64) *report.History {
	first := reps[0]
	confidence = cmp.Or(confidence, first.Ranking.Confidence, DefaultConfidence)
	h := &report.History{Threshold: threshold, Confidence: confidence, Cells: []report.HistoryCell{}}
	cells := make([]map[cellID]*report.CellResult, len(reps))
	for k, r := range reps {
		h.Runs = append(h.Runs, report.HistoryRun{File: files[k], RunID: report.RunID(r),
			Started: r.Environment.Started, Finished: r.Environment.Finished})
		cells[k] = map[cellID]*report.CellResult{}
		for i := range r.Cells {
			cells[k][idOf(&r.Cells[i])] = &r.Cells[i]
		}
		h.Warnings = append(h.Warnings, historyWarnings(first, r, files[0], files[k])...)
	}
	h.Unmatched = unmatchedCells(reps, cells, files)
	zs := make([]float64, len(reps))
	for k := 1; k < len(reps); k++ {
		zs[k] = simultaneousZ(confidence, judgedBetween(first, reps[k], cells[0], cells[k]))
	}
	for i := range first.Cells {
		ref := &first.Cells[i]
		hc := report.HistoryCell{Target: ref.Target, Load: ref.Load, Shape: ref.Shape}
		for _, name := range FigureNames {
			if fig, ok := historyFigure(reps, cells, idOf(ref), name, zs, threshold); ok {
				hc.Figures = append(hc.Figures, fig)
			}
		}
		h.Cells = append(h.Cells, hc)
	}
	return h
}

// historyFigure is figure name of cell id across the runs; ok is false
// when no run has a value of it.
func historyFigure(reps []*report.Report, cells []map[cellID]*report.CellResult, id cellID, name string, zs []float64, threshold float64) (report.HistoryFigure, bool) {
	fig := report.HistoryFigure{Name: name, HigherIsBetter: report.HigherIsBetter(name)}
	ref := cells[0][id]
	found := false
	for k := range reps {
		v, iv, ch, chIv, verdict := report.NaN(), (*report.Interval)(nil), report.NaN(), (*report.Interval)(nil), ""
		if c, ok := cells[k][id]; ok {
			if x := c.Summary.Figure(name); !math.IsNaN(x) {
				v, found = report.Num(x), true
			}
			if ci, ok := c.CI[name]; ok && ci.Lo > 0 && ci.Hi >= ci.Lo {
				iv = &report.Interval{Lo: ci.Lo, Hi: ci.Hi}
			}
			if k > 0 {
				if cc, ok := judgeFigure(ref, c, name, ciZ(reps[0]), ciZ(reps[k]), zs[k], threshold); ok {
					ch = report.Num(cc.Change)
					if cc.ChangeLo.Valid() {
						chIv = &report.Interval{Lo: float64(cc.ChangeLo), Hi: float64(cc.ChangeHi)}
					}
					verdict = report.HistoryVerdict(float64(cc.ChangeLo), float64(cc.ChangeHi), threshold, cc.HigherIsBetter)
				}
			} else if v.Valid() {
				ch = 0
			}
		}
		fig.Values = append(fig.Values, v)
		fig.Intervals = append(fig.Intervals, iv)
		fig.Changes = append(fig.Changes, ch)
		fig.ChangeIntervals = append(fig.ChangeIntervals, chIv)
		fig.Verdicts = append(fig.Verdicts, verdict)
	}
	return fig, found
}

// ciZ is the normal quantile of the level of r's cells' intervals.
func ciZ(r *report.Report) float64 {
	return math.Sqrt2 * math.Erfinv(cmp.Or(r.Ranking.Confidence, DefaultConfidence))
}

// judgedBetween counts the figures judgeFigure judges with an interval
// between the cells of a and b: the number the intervals of their
// changes hold together over.
func judgedBetween(a, b *report.Report, ca, cb map[cellID]*report.CellResult) int {
	n := 0
	for id, oc := range ca {
		nc, ok := cb[id]
		if !ok {
			continue
		}
		for _, f := range FigureNames {
			o, v := oc.Summary.Figure(f), nc.Summary.Figure(f)
			if _, ok := changeSE(oc, nc, f, ciZ(a), ciZ(b)); ok && o > 0 && !math.IsNaN(v) {
				n++
			}
		}
	}
	return n
}

// historyWarnings are what makes run r (file) less comparable with the
// first: other prompts, another configuration (for a later run), degraded
// measurements (for any).
func historyWarnings(first, r *report.Report, firstFile, file string) []string {
	var w []string
	if first != r && first.Environment.PromptSetSHA256 != r.Environment.PromptSetSHA256 {
		w = append(w, fmt.Sprintf("%s: the prompt set differs from %s's (%.12s…, not %.12s…): the runs did not send the same prompts",
			file, firstFile, r.Environment.PromptSetSHA256, first.Environment.PromptSetSHA256))
	}
	if first != r && first.Environment.ConfigSHA256 != r.Environment.ConfigSHA256 {
		w = append(w, fmt.Sprintf("%s: the configuration differs from %s's", file, firstFile))
	}
	for i := range r.Cells {
		if r.Cells[i].Degraded {
			w = append(w, fmt.Sprintf("%s: cell %s: the measurement was degraded (client late or CPU-saturated): its latencies include the client's own delay", file, idOf(&r.Cells[i])))
		}
	}
	return w
}

// unmatchedCells names the cells that are not in every run, and where.
func unmatchedCells(reps []*report.Report, cells []map[cellID]*report.CellResult, files []string) []string {
	var out []string
	for i := range reps[0].Cells {
		id := idOf(&reps[0].Cells[i])
		for k := 1; k < len(reps); k++ {
			if _, ok := cells[k][id]; !ok {
				out = append(out, fmt.Sprintf("%s: not in %s", id, files[k]))
			}
		}
	}
	for k := 1; k < len(reps); k++ {
		for i := range reps[k].Cells {
			if id := idOf(&reps[k].Cells[i]); cells[0][id] == nil {
				out = append(out, fmt.Sprintf("%s: only in %s, not in %s (the first, the reference)", id, files[k], files[0]))
			}
		}
	}
	return out
}
