package render

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// The renderings of `bench compare` (report.History): a table for the
// console, Markdown, and an HTML page that draws each figure across the
// runs.

// historyKind is the axis kind of a figure.
func historyKind(figure string) axisKind {
	switch {
	case strings.HasSuffix(figure, "_ratio"):
		return axisRatio
	case figure == "output_tokens_per_second":
		return axisNumber
	}
	return axisSeconds
}

// historyValue is run k's value of fig with its interval: "21.3 ms
// (20.9 ms–21.8 ms)", or "—" without a value.
func historyValue(fig *report.HistoryFigure, k int) string {
	v := fig.Values[k]
	if !v.Valid() {
		return "—"
	}
	kind := historyKind(fig.Name)
	s := kind.value(float64(v))
	if iv := fig.Intervals[k]; iv != nil {
		s += " (" + kind.value(iv.Lo) + "–" + kind.value(iv.Hi) + ")"
	}
	return s
}

// historyChange is run k's change against the first with its interval
// and verdict: "+49.8% (+45.1%..+54.7%) worse"; empty for the first run.
func historyChange(fig *report.HistoryFigure, k int) string {
	if k == 0 || !fig.Changes[k].Valid() {
		return ""
	}
	s := fmt.Sprintf("%+.1f%%", float64(fig.Changes[k])*100)
	if iv := fig.ChangeIntervals[k]; iv != nil {
		s += fmt.Sprintf(" (%+.1f%%..%+.1f%%)", iv.Lo*100, iv.Hi*100)
	}
	return s + " " + fig.Verdicts[k]
}

// historyRunName is run k's column header: its number and run id.
func historyRunName(h *report.History, k int) string {
	return fmt.Sprintf("#%d %s", k+1, h.Runs[k].RunID)
}

func historyNotes(h *report.History) []string {
	var out []string
	for _, w := range h.Warnings {
		out = append(out, "WARNING "+w)
	}
	for _, u := range h.Unmatched {
		out = append(out, "unmatched "+u)
	}
	return out
}

// WriteHistoryTable writes the comparison for a terminal: the runs, the
// warnings and unmatched cells, then a table a cell with a row a figure
// and a column a run (value and interval; for later runs the change
// against the first, its interval and the verdict).
func WriteHistoryTable(w io.Writer, h *report.History) error {
	fmt.Fprintf(w, "compare %d runs against the first: threshold %.1f%%, confidence %g\n", len(h.Runs), h.Threshold*100, h.Confidence)
	for k, r := range h.Runs {
		fmt.Fprintf(w, "run #%d %s: %s\n", k+1, r.RunID, r.File)
	}
	for _, n := range historyNotes(h) {
		fmt.Fprintln(w, n)
	}
	for _, c := range h.Cells {
		fmt.Fprintf(w, "\n%s / %s / %s\n", c.Target, c.Load.Label(), c.Shape)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := []string{"figure"}
		for k := range h.Runs {
			head = append(head, fmt.Sprintf("#%d", k+1))
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for i := range c.Figures {
			fig := &c.Figures[i]
			row := []string{fig.Name}
			for k := range h.Runs {
				row = append(row, strings.TrimSpace(historyValue(fig, k)+" "+historyChange(fig, k)))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// WriteHistoryMarkdown writes the comparison as Markdown: a table a cell.
func WriteHistoryMarkdown(w io.Writer, h *report.History) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Comparison of %d runs\n\nEach run against the first: threshold %.1f%%, confidence %g.\n\n", len(h.Runs), h.Threshold*100, h.Confidence)
	b.WriteString("| run | id | report |\n|---|---|---|\n")
	for k, r := range h.Runs {
		fmt.Fprintf(&b, "| #%d | %s | %s |\n", k+1, r.RunID, mdCell(r.File))
	}
	if notes := historyNotes(h); len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	for _, c := range h.Cells {
		fmt.Fprintf(&b, "\n## %s / %s / %s\n\n| figure |", mdCell(c.Target), c.Load.Label(), mdCell(c.Shape))
		for k := range h.Runs {
			fmt.Fprintf(&b, " #%d |", k+1)
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(h.Runs)) + "\n")
		for i := range c.Figures {
			fig := &c.Figures[i]
			fmt.Fprintf(&b, "| %s |", fig.Name)
			for k := range h.Runs {
				cell := historyValue(fig, k)
				if ch := historyChange(fig, k); ch != "" {
					cell += "<br>" + ch
				}
				fmt.Fprintf(&b, " %s |", cell)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCell escapes what would end a Markdown table's cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

var historyPage = template.Must(template.New("history").Funcs(template.FuncMap{"inc": func(k int) int { return k + 1 }}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Comparison of {{len .H.Runs}} runs</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
.worse{color:#b00020;font-weight:bold}.better{color:#1a7f37;font-weight:bold}.warn{color:#9a6700}
.charts{display:flex;flex-wrap:wrap;gap:.5em}
svg .grid{stroke:#eee}svg .frame{fill:none;stroke:#999}svg .tick,svg .legend,svg .label{font-size:11px}svg .title{font-size:13px;font-weight:bold}svg .axis{font-size:12px}
</style></head><body>
<h1>Comparison of {{len .H.Runs}} runs</h1>
<p>Each run against the first: threshold {{printf "%.1f" .Threshold}}%, confidence {{.H.Confidence}}; a verdict is worse or better when the change's whole interval is beyond the threshold, same when it stays within it, else inconclusive.</p>
<table><tr><th>run</th><th>id</th><th>report</th></tr>
{{range $k, $r := .H.Runs}}<tr><td>#{{inc $k}}</td><td>{{$r.RunID}}</td><td>{{$r.File}}</td></tr>
{{end}}</table>
{{range .Notes}}<p class="warn">{{.}}</p>
{{end}}{{range .Cells}}<h2>{{.Title}}</h2>
<table><tr><th>figure</th>{{range $k, $r := $.H.Runs}}<th>#{{inc $k}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Name}}</td>{{range .Runs}}<td>{{.Value}}{{if .Change}}<br><span class="{{.Verdict}}">{{.Change}}</span>{{end}}</td>{{end}}</tr>
{{end}}</table>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
{{end}}</body></html>
`))

type historyRunCell struct{ Value, Change, Verdict string }

type historyRow struct {
	Name string
	Runs []historyRunCell
}

type historyCellView struct {
	Title  string
	Rows   []historyRow
	Charts []template.HTML
}

// WriteHistoryHTML writes the comparison as a page: a table a cell, and
// each figure across the runs as a chart (inline SVG, as report.html
// draws its own): the value and its interval's ends, by run number.
func WriteHistoryHTML(w io.Writer, h *report.History) error {
	v := struct {
		H         *report.History
		Threshold float64
		Notes     []string
		Cells     []historyCellView
	}{H: h, Threshold: h.Threshold * 100, Notes: historyNotes(h)}
	for _, c := range h.Cells {
		cv := historyCellView{Title: c.Target + " / " + c.Load.Label() + " / " + c.Shape}
		for i := range c.Figures {
			fig := &c.Figures[i]
			row := historyRow{Name: fig.Name}
			for k := range h.Runs {
				row.Runs = append(row.Runs, historyRunCell{historyValue(fig, k), historyChange(fig, k), fig.Verdicts[k]})
			}
			cv.Rows = append(cv.Rows, row)
			cv.Charts = append(cv.Charts, historyChart(h, fig).SVG())
		}
		v.Cells = append(v.Cells, cv)
	}
	return historyPage.Execute(w, v)
}

// historyChart draws fig across the runs: its value by run number, each
// later point labelled with its verdict, and its interval's ends dashed.
func historyChart(h *report.History, fig *report.HistoryFigure) chart {
	kind := historyKind(fig.Name)
	value := chartSeries{Name: fig.Name, Color: colorOf(0)}
	lo := chartSeries{Name: "interval low", Color: colorOf(9), Dashed: true}
	hi := chartSeries{Name: "interval high", Color: colorOf(9), Dashed: true}
	for k := range h.Runs {
		x := float64(k + 1)
		if fig.Values[k].Valid() {
			value.Points = append(value.Points, xy{x, float64(fig.Values[k])})
			value.Labels = append(value.Labels, fig.Verdicts[k])
		}
		if iv := fig.Intervals[k]; iv != nil {
			lo.Points = append(lo.Points, xy{x, iv.Lo})
			hi.Points = append(hi.Points, xy{x, iv.Hi})
		}
	}
	return chart{Title: fig.Name, XLabel: "run", YLabel: fig.Name, YKind: kind, XKind: axisNumber,
		Series: []chartSeries{value, lo, hi}, YFromZero: true, Width: 420, Height: 260}
}
