package render

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

//go:embed report.html.tmpl
var reportTemplate string

// WriteHTML writes the self-contained HTML report: inline CSS and inline
// SVG charts drawn here, no script and nothing fetched from anywhere, so it
// opens offline and can be attached to a decision as one file. Every figure
// it shows carries its exact JSON value in a data-value attribute.
func WriteHTML(w io.Writer, r *report.Report) error {
	t, err := template.New("report").Funcs(templateFuncs).Parse(reportTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, buildView(r))
}

var templateFuncs = template.FuncMap{
	"sec": report.FormatSeconds,
	// holds says what an interrupted run's report holds.
	"holds": InterruptedHolds,
	"num":   report.FormatNumber,
	// precision says how precise a repeat's percentiles are.
	"precision": PrecisionNote,
	"ratio":     report.FormatRatio,
	"bytes":     report.FormatBytes,
	"raw":       report.FormatFloat,
	"numv":      func(n report.Num) float64 { return float64(n) },
	"valid":     func(n report.Num) bool { return n.Valid() },
	// td renders a figure as a table cell: the display text, and the exact
	// JSON value in data-value. kind picks the display: sec, num, ratio,
	// bytes, int.
	"td": func(q string, v float64, kind string) template.HTML {
		var text string
		switch kind {
		case "sec":
			text = report.FormatSeconds(v)
		case "ratio":
			text = report.FormatRatio(v)
		case "bytes":
			text = report.FormatBytes(v)
		case "int":
			text = fmt.Sprintf("%d", int64(v))
		default:
			text = report.FormatNumber(v)
		}
		raw := "null"
		if finite(v) {
			raw = report.FormatFloat(v)
		} else {
			text = "—"
		}
		return template.HTML(fmt.Sprintf(`<td data-q="%s" data-value="%s">%s</td>`, Escape(q), Escape(raw), Escape(text)))
	},
	// tdq renders a quantile of a distribution of count values as td
	// does, marked with a dagger and a title when count is fewer than
	// the quantile needs (report.ThinQuantile).
	"tdq": func(q string, v float64, count int) template.HTML {
		text, raw := report.FormatSeconds(v), "null"
		if finite(v) {
			raw = report.FormatFloat(v)
		} else {
			text = "—"
		}
		if note := report.ThinQuantile(q, count); note != "" {
			return template.HTML(fmt.Sprintf(`<td data-q="%s" data-value="%s" class="thin" title="%s">%s<sup>†</sup></td>`, Escape(q), Escape(raw), Escape(note), Escape(text)))
		}
		return template.HTML(fmt.Sprintf(`<td data-q="%s" data-value="%s">%s</td>`, Escape(q), Escape(raw), Escape(text)))
	},
	// thin is the footnote of a cell's table whose quantiles come from
	// fewer samples than they need: "" when none does.
	"thin": func(s report.Stats) string {
		var parts []string
		for _, d := range []namedDist{{"ttft", "TTFT", s.TTFT}, {"tpot", "TPOT", s.TPOT}, {"itl", "ITL", s.ITL}, {"e2e", "E2E", s.E2E}, {"lag", "schedule lag", s.ScheduleLag}} {
			var qs []string
			for _, q := range []string{"p90", "p95", "p99", "p99_9"} {
				if report.ThinQuantile(q, d.D.Count) != "" {
					qs = append(qs, report.QuantileLabel(q))
				}
			}
			if len(qs) > 0 {
				parts = append(parts, fmt.Sprintf("%s %s from %d samples", d.Name, strings.Join(qs, ", "), d.D.Count))
			}
		}
		if len(parts) == 0 {
			return ""
		}
		return "† from fewer samples than the quantile needs (p90 needs at least 10, p95 20, p99 100, p99.9 1000; below, it is drawn towards the largest value): " + strings.Join(parts, "; ") + "."
	},
	"dists": func(s report.Stats) []namedDist {
		return []namedDist{{"ttft", "TTFT", s.TTFT}, {"tpot", "TPOT", s.TPOT}, {"itl", "ITL", s.ITL}, {"e2e", "E2E", s.E2E}, {"lag", "schedule lag", s.ScheduleLag}}
	},
	"ci": func(c report.CellResult, name string) string {
		ci, ok := c.CI[name]
		if !ok {
			return ""
		}
		if strings.HasSuffix(name, "_second") || name == "output_tokens_per_second" {
			return fmt.Sprintf("[%s, %s]", report.FormatNumber(ci.Lo), report.FormatNumber(ci.Hi))
		}
		if name == "goodput_ratio" {
			return fmt.Sprintf("[%s, %s]", report.FormatRatio(ci.Lo), report.FormatRatio(ci.Hi))
		}
		return fmt.Sprintf("[%s, %s]", report.FormatSeconds(ci.Lo), report.FormatSeconds(ci.Hi))
	},
	"outcomes": func(m map[string]int) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	},
	"pct":    func(v float64) string { return fmt.Sprintf("%+.1f%%", v*100) },
	"pctNum": func(v report.Num) string { return fmt.Sprintf("%+.1f%%", float64(v)*100) },
	"add":    func(a, b int) int { return a + b },
	"f64":    func(i int) float64 { return float64(i) },
	// quantile is a quantile as a percentile's name (an agents search's
	// tier); asNum a ratio as a figure tdr renders.
	"quantile": QuantileName,
	"asNum":    func(v float64) report.Num { return report.Num(v) },
	// flags are the cell's flags as the Markdown table says them (the
	// columns table's).
	"flags": func(c report.CellResult) []report.CellFlag { return report.CellFlags(&c) },
	// efficient says whether any cell has efficiency figures (a GPU read
	// or a price configured).
	"efficient": HasEfficiency,
	// checked says whether any cell's answers were checked for validity;
	// validity is a cell's figure for one check (validityCell).
	"checked":  HasValidity,
	"validity": func(c report.CellResult, column string) string { return htmlValidity(&c, column) },
	// prefixCached says whether any cell has prefix-cache views.
	"prefixCached": HasPrefixCache,
	// tdr renders a success or goodput ratio as td does, at the four
	// decimals the console shows.
	"tdr": func(q string, v report.Num) template.HTML {
		raw, text := "null", "—"
		if v.Valid() {
			raw, text = report.FormatFloat(float64(v)), ConsoleRatio(v)
		}
		return template.HTML(fmt.Sprintf(`<td data-q="%s" data-value="%s">%s</td>`, Escape(q), Escape(raw), Escape(text)))
	},
	"floorRule":  floorRule,
	"ratiosNote": func() string { return ratiosNote },
	"belowFloor": htmlBelowFloor,
}

type namedDist struct {
	Key, Name string
	D         report.Dist
}

type curveGroup struct {
	Shape, Kind string
	Charts      []template.HTML
}

type view struct {
	R         *report.Report
	Curves    []curveGroup
	Pareto    []template.HTML
	Sweep     []template.HTML
	Heatmap   template.HTML
	GPUCharts []template.HTML
	// CellCharts are each cell's own charts, by its key: the latency
	// CDFs and its windows over time.
	CellCharts map[string][]template.HTML
	// Timings is the section "Where the time went" (timings.go).
	Timings template.HTML
}

func buildView(r *report.Report) *view {
	v := &view{R: r}
	targets := make([]string, 0, len(r.Environment.Targets))
	for _, t := range r.Environment.Targets {
		targets = append(targets, t.Name)
	}
	v.Curves = curveCharts(r, targets)
	v.Pareto = paretoCharts(r, targets)
	v.Sweep = sweepCharts(r, targets)
	if r.GPU.Available {
		v.Heatmap, v.GPUCharts = gpuCharts(r, targets)
	}
	v.Timings = serverTimingsHTML(r)
	v.CellCharts = map[string][]template.HTML{}
	for i := range r.Cells {
		if ch := cellCharts(&r.Cells[i]); len(ch) > 0 {
			v.CellCharts[r.Cells[i].Key] = ch
		}
	}
	return v
}

// curveCharts are, per shape and load kind, the figures against the load.
func curveCharts(r *report.Report, targets []string) []curveGroup {
	var curves []curveGroup
	var shapes []string
	seen := map[string]bool{}
	for _, c := range r.Cells {
		if !seen[c.Shape] {
			seen[c.Shape] = true
			shapes = append(shapes, c.Shape)
		}
	}
	type fig struct {
		title, ylabel string
		get           func(*report.CellResult) float64
		yk            axisKind
	}
	figs := []fig{
		{"E2E latency p50", "latency", func(c *report.CellResult) float64 { return c.Summary.Figure("e2e_p50") }, axisSeconds},
		{"E2E latency p99", "latency", func(c *report.CellResult) float64 { return c.Summary.Figure("e2e_p99") }, axisSeconds},
		{"TTFT p99", "latency", func(c *report.CellResult) float64 { return c.Summary.Figure("ttft_p99") }, axisSeconds},
		{"TPOT p50", "latency", func(c *report.CellResult) float64 { return c.Summary.Figure("tpot_p50") }, axisSeconds},
		{"Output throughput", "tokens/s", func(c *report.CellResult) float64 { return c.Summary.OutputTokensPerSecond }, axisNumber},
	}
	for _, sh := range shapes {
		for _, kind := range []string{report.LoadRate, report.LoadConcurrency} {
			var cells []*report.CellResult
			for i := range r.Cells {
				if c := &r.Cells[i]; c.Shape == sh && c.Load.Kind == kind {
					cells = append(cells, c)
				}
			}
			if len(cells) == 0 {
				continue
			}
			g := curveGroup{Shape: sh, Kind: kind}
			xlabel := "request rate (req/s)"
			if kind == report.LoadConcurrency {
				xlabel = "concurrency (clients)"
			}
			for _, f := range figs {
				ch := chart{Title: f.title + " — " + sh, XLabel: xlabel, YLabel: f.ylabel, YKind: f.yk, YFromZero: true}
				for ti, t := range targets {
					s := chartSeries{Name: t, Color: colorOf(ti)}
					for _, c := range cells {
						if c.Target == t {
							s.Points = append(s.Points, xy{c.Load.Value, f.get(c)})
						}
					}
					sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].X < s.Points[j].X })
					ch.Series = append(ch.Series, s)
				}
				g.Charts = append(g.Charts, ch.SVG())
			}
			curves = append(curves, g)
		}
	}
	return curves
}

// paretoCharts are, per target, throughput against the ranking's latency
// figure, with the Pareto frontier.
func paretoCharts(r *report.Report, targets []string) []template.HTML {
	var out []template.HTML
	latFig := r.Ranking.LatencyFigure
	if latFig == "" {
		latFig = report.DefaultLatencyMetric
	}
	for ti, t := range targets {
		s := chartSeries{Name: t, Color: colorOf(ti)}
		for i := range r.Cells {
			c := &r.Cells[i]
			if c.Target == t {
				s.Points = append(s.Points, xy{c.Summary.OutputTokensPerSecond, c.Summary.Figure(latFig)})
				s.Labels = append(s.Labels, c.Load.Label()+" "+c.Shape)
			}
		}
		ch := chart{Title: "Latency / throughput — " + t, XLabel: "output tokens/s", YLabel: latFig,
			YKind: axisSeconds, Scatter: true, Series: []chartSeries{s}, Frontier: paretoFrontier(s.Points), YFromZero: true}
		out = append(out, ch.SVG())
	}
	return out
}

// sweepCharts are, per shape, each target's goodput ratio against the
// sweep's rates.
func sweepCharts(r *report.Report, targets []string) []template.HTML {
	var out []template.HTML
	bySweepShape := map[string][]report.SweepResult{}
	var sweepShapes []string
	for _, s := range r.Sweeps {
		if _, ok := bySweepShape[s.Shape]; !ok {
			sweepShapes = append(sweepShapes, s.Shape)
		}
		bySweepShape[s.Shape] = append(bySweepShape[s.Shape], s)
	}
	for _, sh := range sweepShapes {
		ch := chart{Title: "Rate sweep: goodput ratio — " + sh, XLabel: "request rate (req/s)", YLabel: "goodput ratio", YKind: axisRatio, YFromZero: true}
		for _, sw := range bySweepShape[sh] {
			s := chartSeries{Name: sw.Target, Color: colorOf(indexOf(targets, sw.Target))}
			for _, p := range sw.Points {
				s.Points = append(s.Points, xy{p.Rate, p.GoodputRatio})
			}
			sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].X < s.Points[j].X })
			ch.Series = append(ch.Series, s)
		}
		out = append(out, ch.SVG())
	}
	return out
}

// The size of a cell's own charts: several side by side.
const cellChartWidth, cellChartHeight = 300, 210

// cellCharts draws a cell's latency CDFs (one line per repeat) and its
// windows over time, from the repeats' distribution and windows; nothing
// for a report written before them.
func cellCharts(c *report.CellResult) []template.HTML {
	var out []template.HTML
	name := func(r *report.RepeatResult, what string) string {
		if len(c.Repeats) == 1 {
			return what
		}
		return strings.TrimSpace(what + " r" + fmt.Sprint(r.Index+1))
	}
	for _, l := range []struct {
		title string
		get   func(*report.Distribution) []float64
	}{
		{"TTFT", func(d *report.Distribution) []float64 { return d.TTFT }},
		{"TPOT", func(d *report.Distribution) []float64 { return d.TPOT }},
		{"E2E", func(d *report.Distribution) []float64 { return d.E2E }},
	} {
		ch := chart{Title: l.title + " distribution (CDF)", XLabel: l.title, YLabel: "share of requests", XKind: axisSeconds, YKind: axisRatio,
			YFromZero: true, Class: "cdf", Width: cellChartWidth, Height: cellChartHeight}
		for ri := range c.Repeats {
			r := &c.Repeats[ri]
			if r.Distribution == nil {
				continue
			}
			q := l.get(r.Distribution)
			if len(q) < 2 {
				continue
			}
			s := chartSeries{Name: name(r, ""), Color: colorOf(ri)}
			if s.Name == "" {
				s.Name = l.title
			}
			for i, v := range q {
				s.Points = append(s.Points, xy{v, float64(i) / float64(len(q)-1)})
			}
			ch.Series = append(ch.Series, s)
		}
		if len(ch.Series) > 0 {
			out = append(out, ch.SVG())
		}
	}
	rates := chart{Title: "Sent and ended, per second", XLabel: "time in the measured windows", YLabel: "requests/s", XKind: axisSeconds,
		YFromZero: true, Class: "timeline", Width: cellChartWidth, Height: cellChartHeight}
	flight := chart{Title: "In flight at each window's end", XLabel: "time in the measured windows", YLabel: "requests", XKind: axisSeconds,
		YFromZero: true, Class: "timeline", Width: cellChartWidth, Height: cellChartHeight}
	lat := chart{Title: "Median latency, by window", XLabel: "time in the measured windows", YLabel: "latency", XKind: axisSeconds, YKind: axisSeconds,
		YFromZero: true, Class: "timeline", Width: cellChartWidth, Height: cellChartHeight}
	for ri := range c.Repeats {
		r := &c.Repeats[ri]
		rw := r.Windows
		if rw == nil || rw.WindowSeconds <= 0 || len(rw.Sent) == 0 {
			continue
		}
		ws := rw.WindowSeconds
		sent := chartSeries{Name: name(r, "sent"), Color: colorOf(2 * ri)}
		ended := chartSeries{Name: name(r, "ended"), Color: colorOf(2*ri + 1), Dashed: true}
		fl := chartSeries{Name: name(r, "in flight"), Color: colorOf(ri)}
		ttft := chartSeries{Name: name(r, "TTFT p50"), Color: colorOf(2 * ri)}
		e2e := chartSeries{Name: name(r, "E2E p50"), Color: colorOf(2*ri + 1), Dashed: true}
		for w := range rw.Sent {
			mid := (float64(w) + 0.5) * ws
			sent.Points = append(sent.Points, xy{mid, float64(rw.Sent[w]) / ws})
			if w < len(rw.Ended) {
				ended.Points = append(ended.Points, xy{mid, float64(rw.Ended[w]) / ws})
			}
			if w < len(rw.InFlight) {
				fl.Points = append(fl.Points, xy{float64(w+1) * ws, float64(rw.InFlight[w])})
			}
			if w < len(rw.TTFTP50) {
				ttft.Points = append(ttft.Points, xy{mid, float64(rw.TTFTP50[w])})
			}
			if w < len(r.Stability.Medians) {
				e2e.Points = append(e2e.Points, xy{mid, float64(r.Stability.Medians[w])})
			}
		}
		// In flight at the start of the first window.
		fl.Points = append([]xy{{0, float64(r.Stats.InFlightAtStart)}}, fl.Points...)
		rates.Series = append(rates.Series, sent, ended)
		flight.Series = append(flight.Series, fl)
		lat.Series = append(lat.Series, ttft, e2e)
	}
	if len(rates.Series) > 0 {
		out = append(out, rates.SVG(), flight.SVG(), lat.SVG())
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return 0
}

// gpuCharts draws the memory heatmap and the temperature and power series.
func gpuCharts(r *report.Report, targets []string) (template.HTML, []template.HTML) {
	total := map[string]float64{}
	for _, d := range r.GPU.Devices {
		if d.MemoryTotalBytes.Valid() {
			total[d.GPU] = float64(d.MemoryTotalBytes)
		}
	}
	var rows []string
	rowIdx := map[string]int{}
	end := 0.0
	for _, s := range r.GPU.Samples {
		if _, ok := rowIdx[s.GPU]; !ok {
			rowIdx[s.GPU] = len(rows)
			rows = append(rows, s.GPU)
		}
		end = math.Max(end, s.T)
	}
	for _, sp := range r.Timeline {
		end = math.Max(end, sp.End)
	}
	const bins = 120
	sum := make([][]float64, len(rows))
	cnt := make([][]int, len(rows))
	for i := range rows {
		sum[i], cnt[i] = make([]float64, bins), make([]int, bins)
	}
	temp := make([]chartSeries, len(rows))
	power := make([]chartSeries, len(rows))
	for i, g := range rows {
		temp[i] = chartSeries{Name: "GPU " + g, Color: colorOf(i)}
		power[i] = chartSeries{Name: "GPU " + g, Color: colorOf(i)}
	}
	for _, s := range r.GPU.Samples {
		i := rowIdx[s.GPU]
		if s.MemoryUsedBytes.Valid() && total[s.GPU] > 0 {
			b := int(s.T / math.Max(end, 1e-9) * bins)
			b = min(max(b, 0), bins-1)
			sum[i][b] += float64(s.MemoryUsedBytes) / total[s.GPU]
			cnt[i][b]++
		}
		if s.TemperatureCelsius.Valid() {
			temp[i].Points = append(temp[i].Points, xy{s.T, float64(s.TemperatureCelsius)})
		}
		if s.PowerWatts.Valid() {
			power[i].Points = append(power[i].Points, xy{s.T, float64(s.PowerWatts)})
		}
	}
	cells := make([][]float64, len(rows))
	for i := range rows {
		cells[i] = make([]float64, bins)
		last := math.NaN()
		for b := range cells[i] {
			if cnt[i][b] > 0 {
				last = sum[i][b] / float64(cnt[i][b])
			}
			// A bin between two samples shows the last reading.
			cells[i][b] = last
		}
	}
	hm := heatmap{Title: "GPU memory used over time (share of total)", Rows: rows, Start: 0, End: end, Cells: cells,
		Spans: r.Timeline, Targets: targets}
	charts := []template.HTML{
		chart{Title: "GPU temperature", XLabel: "time since start", XKind: axisSeconds, YLabel: "°C", Series: temp}.SVG(),
		chart{Title: "GPU power", XLabel: "time since start", XKind: axisSeconds, YLabel: "watts", Series: power}.SVG(),
	}
	return hm.SVG(), charts
}
