package render

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// Charts are drawn here, in Go, as inline SVG: the report needs no script,
// no library and no network to show them.

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

func colorOf(i int) string { return palette[i%len(palette)] }

type xy struct{ X, Y float64 }

type chartSeries struct {
	Name   string
	Color  string
	Points []xy
	// Labels, when set, annotate each point.
	Labels []string
	// Dashed draws the line dashed (a second figure of the same colour).
	Dashed bool
}

// axisKind says what an axis holds, and so how its ticks are labelled:
// every tick of one axis in one unit, with as many decimals as its step
// needs (a rate axis of 1, 2, 3 req/s reads "1", "2", "3").
type axisKind int

const (
	// axisNumber is a plain figure; an axis whose values are all whole
	// numbers (counts, clients, rates like 2 req/s) gets whole ticks.
	axisNumber axisKind = iota
	// axisSeconds is a duration in seconds, labelled in µs, ms or s, the
	// unit chosen from the axis's largest tick.
	axisSeconds
	// axisRatio is a ratio in [0, 1], labelled as a percentage.
	axisRatio
)

// value formats one figure of the axis's kind, as a point's tooltip shows it.
func (k axisKind) value(v float64) string {
	switch k {
	case axisSeconds:
		return report.FormatSeconds(v)
	case axisRatio:
		return report.FormatRatio(v)
	}
	return report.FormatNumber(v)
}

// tickLabels labels ticks (ascending, evenly stepped) in one unit.
func (k axisKind) tickLabels(ticks []float64) []string {
	step := 1.0
	if len(ticks) > 1 {
		step = ticks[1] - ticks[0]
	}
	top := 0.0
	for _, t := range ticks {
		top = max(top, math.Abs(t))
	}
	scale, unit := 1.0, ""
	switch k {
	case axisSeconds:
		switch {
		case top < 1e-3:
			scale, unit = 1e6, " µs"
		case top < 1:
			scale, unit = 1e3, " ms"
		default:
			unit = " s"
		}
	case axisRatio:
		scale, unit = 100, "%"
	}
	d := decimals(step*scale, ticks, scale)
	out := make([]string, len(ticks))
	for i, t := range ticks {
		v := t * scale
		if math.Abs(v) < step*scale*1e-6 {
			v = 0 // not "-0"
		}
		out[i] = strconv.FormatFloat(v, 'f', d, 64) + unit
	}
	return out
}

// decimals is the fewest decimals (at most 6) that write every tick, scaled,
// exactly enough to tell them apart at step.
func decimals(step float64, ticks []float64, scale float64) int {
	for d := 0; d < 6; d++ {
		p := math.Pow(10, float64(d))
		ok := true
		for _, t := range ticks {
			v := t * scale * p
			if math.Abs(v-math.Round(v)) > 1e-6*max(1, math.Abs(v)) {
				ok = false
				break
			}
		}
		if ok && step*p >= 1-1e-9 {
			return d
		}
	}
	return 6
}

// chart is a line or scatter chart with linear axes.
type chart struct {
	Title, XLabel, YLabel string
	XKind, YKind          axisKind
	Series                []chartSeries
	Scatter               bool // points only, no lines
	// Frontier, when set, is drawn as a dashed line (a Pareto frontier).
	Frontier []xy
	// YFromZero makes the y axis start at 0.
	YFromZero bool
	// CSS class added to the svg element.
	Class  string
	Width  int
	Height int
}

const (
	PadLeft, PadRight, PadTop, PadBottom = 72, 24, 40, 46
)

// niceTicks returns about n round tick values covering [lo, hi]; with
// integer set, whole ones only (a step of at least 1). A range of one value
// v is widened around it, to [0, 2v] (v centred, 0 in view), or [0, 1]
// for 0, rather than to a sliver of ±10% that labels 3.60 to 4.40.
func niceTicks(lo, hi float64, n int, integer bool) []float64 {
	if !(hi > lo) {
		switch {
		case lo > 0:
			lo, hi = 0, 2*lo
		case lo < 0:
			lo, hi = 2*lo, 0
		default:
			lo, hi = 0, 1 // zero everywhere: a count of none
		}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 0.0
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		s := m * mag
		if integer && (s < 1 || s != math.Round(s)) {
			continue
		}
		if s >= raw {
			step = s
			break
		}
	}
	if step == 0 {
		step = 10 * mag
		if integer {
			step = max(1, math.Round(step))
		}
	}
	var t []float64
	start := math.Floor(lo/step+1e-9) * step
	for i := 0; ; i++ {
		v := start + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		t = append(t, v)
	}
	if len(t) > 0 && t[len(t)-1] < hi {
		t = append(t, t[len(t)-1]+step)
	}
	if len(t) == 1 {
		t = append(t, t[0]+step)
	}
	return t
}

func (c chart) bounds() (x0, x1, y0, y1 float64, xInt, yInt, ok bool) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	xInt, yInt = c.XKind == axisNumber, c.YKind == axisNumber
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !finite(p.X) || !finite(p.Y) {
				continue
			}
			x0, x1 = min(x0, p.X), max(x1, p.X)
			y0, y1 = min(y0, p.Y), max(y1, p.Y)
			xInt = xInt && p.X == math.Round(p.X)
			yInt = yInt && p.Y == math.Round(p.Y)
			ok = true
		}
	}
	if c.YFromZero && y0 > 0 {
		y0 = 0
	}
	return
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// SVG renders the chart. A chart without finite points says so in its body.
func (c chart) SVG() template.HTML {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 560
	}
	if h == 0 {
		h = 320
	}
	var b strings.Builder
	class := "chart"
	if c.Class != "" {
		class += " " + c.Class
	}
	fmt.Fprintf(&b, `<svg class="%s" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		Escape(class), w, h, w, h, Escape(c.Title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="16" class="title">%s</text>`, PadLeft, Escape(c.Title))
	// The legend along the top, wrapped onto as many rows as it needs;
	// the plot starts below it.
	type entry struct{ x, y int }
	legend := make([]entry, len(c.Series))
	lx, ly := PadLeft+4, 24
	for i, s := range c.Series {
		wd := 24 + 7*len(s.Name)
		if lx+wd > w-PadRight && lx > PadLeft+4 {
			lx, ly = PadLeft+4, ly+14
		}
		legend[i] = entry{lx, ly}
		lx += wd
	}
	top := PadTop + ly - 24
	x0, x1, y0, y1, xInt, yInt, ok := c.bounds()
	if !ok {
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="empty">no data</text></svg>`, w/2-30, h/2)
		return template.HTML(b.String())
	}
	xt := niceTicks(x0, x1, max(2, min(5, (w-PadLeft-PadRight)/60)), xInt)
	yt := niceTicks(y0, y1, max(2, min(5, (h-top-PadBottom)/30)), yInt)
	xl, yl := c.XKind.tickLabels(xt), c.YKind.tickLabels(yt)
	x0, x1 = xt[0], xt[len(xt)-1]
	y0, y1 = yt[0], yt[len(yt)-1]
	pw, ph := float64(w-PadLeft-PadRight), float64(h-top-PadBottom)
	px := func(x float64) float64 { return float64(PadLeft) + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return float64(top) + ph - (y-y0)/(y1-y0)*ph }
	// Grid and axes.
	for i, v := range yt {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, PadLeft, py(v), w-PadRight, py(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`, PadLeft-6, py(v)+4, Escape(yl[i]))
	}
	for i, v := range xt {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" class="grid"/>`, px(v), top, px(v), float64(top)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`, px(v), float64(top)+ph+16, Escape(xl[i]))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" class="frame"/>`, PadLeft, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="axis" text-anchor="middle">%s</text>`, float64(PadLeft)+pw/2, h-6, Escape(c.XLabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="axis" text-anchor="middle" transform="rotate(-90 14 %.1f)">%s</text>`,
		float64(top)+ph/2, float64(top)+ph/2, Escape(c.YLabel))
	if len(c.Frontier) > 1 {
		var pts []string
		for _, p := range c.Frontier {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.X), py(p.Y)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" class="frontier"/>`, strings.Join(pts, " "))
	}
	// Series.
	for i, s := range c.Series {
		c.writeSeries(&b, i, s, px, py, legend[i].x, legend[i].y)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// writeSeries draws series i of the chart: its line (or points), its
// labels, and its legend entry at (lx, ly).
func (c chart) writeSeries(b *strings.Builder, i int, s chartSeries, px, py func(float64) float64, lx, ly int) {
	xf, yf := c.XKind.value, c.YKind.value
	color := s.Color
	if color == "" {
		color = colorOf(i)
	}
	var pts []string
	for _, p := range s.Points {
		if finite(p.X) && finite(p.Y) {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.X), py(p.Y)))
		}
	}
	fmt.Fprintf(b, `<g class="series" data-series="%s">`, Escape(s.Name))
	if !c.Scatter && len(pts) > 1 {
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`, strings.Join(pts, " "), color, dash)
	}
	for j, p := range s.Points {
		// A dense time series is its line; a lone point is a point.
		if !finite(p.X) || !finite(p.Y) || (len(s.Points) > 60 && !c.Scatter && len(pts) > 1) {
			continue
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s: %s, %s</title></circle>`,
			px(p.X), py(p.Y), color, Escape(s.Name), Escape(xf(p.X)), Escape(yf(p.Y)))
		if j < len(s.Labels) {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="label">%s</text>`, px(p.X)+6, py(p.Y)-6, Escape(s.Labels[j]))
		}
	}
	b.WriteString(`</g>`)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="legend">%s</text>`,
		lx, ly, color, lx+14, ly+9, Escape(s.Name))
}

func Escape(s string) string { return html.EscapeString(s) }

// paretoFrontier returns the points not dominated by another (higher x and
// lower y is better), sorted by x.
func paretoFrontier(pts []xy) []xy {
	var ps []xy
	for _, p := range pts {
		if finite(p.X) && finite(p.Y) {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].X != ps[j].X {
			return ps[i].X > ps[j].X
		}
		return ps[i].Y < ps[j].Y
	})
	var f []xy
	best := math.Inf(1)
	for _, p := range ps {
		if p.Y < best {
			f = append(f, p)
			best = p.Y
		}
	}
	sort.Slice(f, func(i, j int) bool { return f[i].X < f[j].X })
	return f
}

// heatmap draws GPU memory used (ratio of total) over time: one row per GPU,
// one column per time bin, and under it the spans of each target.
type heatmap struct {
	Title   string
	Rows    []string
	Start   float64 // seconds
	End     float64
	Cells   [][]float64 // [row][bin] ratio 0..1, NaN for no sample
	Spans   []report.Span
	Targets []string
	Width   int
}

// heatColor maps 0..1 to white, blue, then red.
func heatColor(v float64) string {
	if math.IsNaN(v) {
		return "#eeeeee"
	}
	v = math.Max(0, math.Min(1, v))
	var r, g, bl float64
	if v < 0.5 {
		t := v / 0.5
		r, g, bl = 255*(1-t)+49*t, 255*(1-t)+130*t, 255*(1-t)+189*t
	} else {
		t := (v - 0.5) / 0.5
		r, g, bl = 49*(1-t)+214*t, 130*(1-t)+39*t, 189*(1-t)+40*t
	}
	return fmt.Sprintf("#%02x%02x%02x", int(r), int(g), int(bl))
}

func (hm heatmap) SVG() template.HTML {
	w := hm.Width
	if w == 0 {
		w = 900
	}
	rowH, spanH := 22, 12
	h := PadTop + rowH*len(hm.Rows) + 10 + spanH*len(hm.Targets) + 26
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart heatmap" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		w, h, w, h, Escape(hm.Title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="16" class="title">%s</text>`, PadLeft, Escape(hm.Title))
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick">targets measured:</text>`, 4, PadTop+rowH*len(hm.Rows)+8)
	pw := float64(w - PadLeft - PadRight)
	span := hm.End - hm.Start
	if span <= 0 {
		span = 1
	}
	px := func(t float64) float64 { return float64(PadLeft) + (t-hm.Start)/span*pw }
	for r, name := range hm.Rows {
		y := PadTop + r*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick" text-anchor="end">GPU %s</text>`, PadLeft-6, y+15, Escape(name))
		n := len(hm.Cells[r])
		cw := pw / float64(max(n, 1))
		for i, v := range hm.Cells[r] {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.2f" height="%d" fill="%s"><title>%s</title></rect>`,
				float64(PadLeft)+float64(i)*cw, y, cw+0.3, rowH-2, heatColor(v), Escape(report.FormatRatio(v)))
		}
	}
	y0 := PadTop + rowH*len(hm.Rows) + 10
	for i, t := range hm.Targets {
		y := y0 + i*spanH
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick" text-anchor="end">%s</text>`, PadLeft-6, y+10, Escape(t))
		for _, s := range hm.Spans {
			if s.Target == t {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`,
					px(s.Start), y, math.Max(px(s.End)-px(s.Start), 1), spanH-3, colorOf(i), Escape(s.Cell))
			}
		}
	}
	ya := y0 + spanH*len(hm.Targets) + 16
	ht := niceTicks(hm.Start, hm.End, 8, false)
	hl := axisSeconds.tickLabels(ht)
	for i, v := range ht {
		if v < hm.Start || v > hm.End {
			continue
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>`, px(v), ya, Escape(hl[i]))
	}
	// Colour scale, top right.
	x0 := w - PadRight - 11*18 - 30
	for i := 0; i <= 10; i++ {
		fmt.Fprintf(&b, `<rect x="%d" y="8" width="18" height="10" fill="%s" stroke="#ccc" stroke-width="0.5"/>`, x0+i*18, heatColor(float64(i)/10))
	}
	fmt.Fprintf(&b, `<text x="%d" y="17" class="tick" text-anchor="end">memory used 0%%</text>`, x0-4)
	fmt.Fprintf(&b, `<text x="%d" y="17" class="tick">100%%</text>`, x0+11*18+4)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
