package render

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// Where the time went: the cells' figures of the engine's own per-request
// timings (report.ServerTimings), in the Markdown and HTML reports, only
// when some cell has them.

// HasServerTimings says whether any cell has the engine's timings.
func HasServerTimings(r *report.Report) bool {
	for i := range r.Cells {
		if r.Cells[i].Summary.ServerTimings != nil {
			return true
		}
	}
	return false
}

// timingsNote says what the figures are, for both reports.
const timingsNote = "By the engine's own per-request timings, read from each answer (docs/metrics.md), over the measured successful requests; median over repeats. " +
	"Queue: the time the request waited in the engine before it was scheduled; engine TTFT: the engine's own time to the first token; " +
	"client overhead: the client's TTFT less the engine's queue and TTFT (the network, a gateway, the server's HTTP front end and tokenizer, this client); " +
	"generation: the engine's time from the first token to the last. Decomposed: the successes whose TTFT the engine's timings split."

// timingParts are the parts of a cell's figures, in the order the tables
// list them.
var timingParts = []struct {
	key, name string
	get       func(*report.ServerTimings) report.TimingPart
}{
	{"queue", "queue", func(t *report.ServerTimings) report.TimingPart { return t.Queue }},
	{"engine_ttft", "engine TTFT", func(t *report.ServerTimings) report.TimingPart { return t.EngineTTFT }},
	{"client_overhead", "client overhead", func(t *report.ServerTimings) report.TimingPart { return t.ClientOverhead }},
	{"generation", "generation", func(t *report.ServerTimings) report.TimingPart { return t.Generation }},
}

// decomposedText is the share of successes decomposed, with its counts.
func decomposedText(t *report.ServerTimings) string {
	return fmt.Sprintf("%s (%d of %d)", report.FormatRatio(t.DecomposedRatio), t.Decomposed, t.Successes)
}

// mdServerTimings writes the section "Where the time went".
func mdServerTimings(b *strings.Builder, r *report.Report) {
	if !HasServerTimings(r) {
		return
	}
	b.WriteString("## Where the time went\n\n" + timingsNote + " In ms.\n\n| cell | decomposed |")
	for _, p := range timingParts {
		fmt.Fprintf(b, " %s p50 | %s p99 |", p.name, p.name)
	}
	b.WriteString("\n|" + strings.Repeat(" --- |", 2+2*len(timingParts)) + "\n")
	ms := func(v report.Num) string { return mdNum(v*1000, 2) }
	for i := range r.Cells {
		c := &r.Cells[i]
		t := c.Summary.ServerTimings
		if t == nil {
			continue
		}
		fmt.Fprintf(b, "| %s | %s |", report.MarkdownCell(c.Key), decomposedText(t))
		for _, p := range timingParts {
			part := p.get(t)
			fmt.Fprintf(b, " %s | %s |", ms(part.P50), ms(part.P99))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// serverTimingsHTML is the HTML report's section "Where the time went":
// each cell's figures, and its TTFT's p50 split into the queue, the
// engine's TTFT and the client overhead, stacked; empty when no cell has
// the engine's timings.
func serverTimingsHTML(r *report.Report) template.HTML {
	if !HasServerTimings(r) {
		return ""
	}
	var b strings.Builder
	b.WriteString(`<section id="server-timings">` + "\n<h2>Where the time went: the engine's own timings</h2>\n")
	b.WriteString(`<table class="server-timings">` + "\n" + `<tr><th class="name">cell</th><th>decomposed</th>`)
	for _, p := range timingParts {
		fmt.Fprintf(&b, "<th>%s p50</th><th>%s p99</th>", Escape(p.name), Escape(p.name))
	}
	b.WriteString("</tr>\n")
	td := func(q string, v report.Num) string {
		raw, text := "null", "—"
		if v.Valid() {
			raw, text = report.FormatFloat(float64(v)), report.FormatSeconds(float64(v))
		}
		return fmt.Sprintf(`<td data-q="%s" data-value="%s">%s</td>`, Escape(q), Escape(raw), Escape(text))
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		t := c.Summary.ServerTimings
		if t == nil {
			continue
		}
		fmt.Fprintf(&b, `<tr data-cell="%s"><td class="name">%s</td><td data-q="decomposed_ratio" data-value="%s">%s</td>`,
			Escape(c.Key), Escape(c.Key), Escape(report.FormatFloat(t.DecomposedRatio)), Escape(decomposedText(t)))
		for _, p := range timingParts {
			part := p.get(t)
			b.WriteString(td(p.key+"_p50", part.P50) + td(p.key+"_p99", part.P99))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n<div class=\"charts\">")
	b.WriteString(string(ttftBars(r)))
	b.WriteString("</div>\n<p class=\"note\">" + Escape(timingsNote) +
		" The bars stack each cell's p50 of the queue, the engine's TTFT and the client overhead (p50s, which need not add up to the TTFT's p50: the black tick); a negative overhead (the clocks' resolution) is drawn as none.</p>\n</section>")
	return template.HTML(b.String())
}

// The stacked bars' colours: queue, engine TTFT, client overhead.
var ttftPartColors = [3]string{palette[3], palette[0], palette[2]}

// ttftBars draws, per cell with the engine's timings, a horizontal bar of
// its TTFT's p50 split into the queue, the engine's TTFT and the client
// overhead (their p50s), with the client's TTFT p50 as a tick.
func ttftBars(r *report.Report) template.HTML {
	type bar struct {
		key   string
		parts [3]float64
		ttft  float64
	}
	var bars []bar
	label, hi := 0, 0.0
	for i := range r.Cells {
		c := &r.Cells[i]
		t := c.Summary.ServerTimings
		if t == nil {
			continue
		}
		br := bar{key: c.Key, ttft: math.NaN()}
		for j, v := range []report.Num{t.Queue.P50, t.EngineTTFT.P50, t.ClientOverhead.P50} {
			if v.Valid() && v > 0 {
				br.parts[j] = float64(v)
			}
		}
		if c.Summary.TTFT.Count > 0 {
			br.ttft = c.Summary.TTFT.P50
		}
		hi = max(hi, br.parts[0]+br.parts[1]+br.parts[2], finiteOr(br.ttft, 0))
		label = max(label, len(c.Key))
		bars = append(bars, br)
	}
	const rowH, top, bottom, right = 22, 44, 40, 24
	left := min(8+7*label, 320)
	w, h := 720, top+rowH*len(bars)+bottom
	ticks := niceTicks(0, max(hi, 1e-6), 5, false)
	labels := axisSeconds.tickLabels(ticks)
	x1 := ticks[len(ticks)-1]
	pw := float64(w - left - right)
	px := func(x float64) float64 { return float64(left) + x/x1*pw }
	var b strings.Builder
	title := "Where the first token's time went (p50)"
	fmt.Fprintf(&b, `<svg class="chart ttft-parts" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		w, h, w, h, Escape(title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/><text x="%d" y="16" class="title">%s</text>`, w, h, left, Escape(title))
	lx := left + 4
	for j, name := range []string{"queue", "engine TTFT", "client overhead", "client TTFT"} {
		if j < 3 {
			fmt.Fprintf(&b, `<rect x="%d" y="24" width="14" height="8" fill="%s"/>`, lx, ttftPartColors[j])
		} else {
			fmt.Fprintf(&b, `<line x1="%d" y1="22" x2="%d" y2="34" stroke="#000" stroke-width="2"/>`, lx+7, lx+7)
		}
		fmt.Fprintf(&b, `<text x="%d" y="32" class="legend">%s</text>`, lx+18, name)
		lx += 24 + 7*len(name)
	}
	ph := float64(rowH * len(bars))
	for i, v := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" class="grid"/>`, px(v), top, px(v), float64(top)+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`, px(v), float64(top)+ph+16, Escape(labels[i]))
	}
	for i, br := range bars {
		y := top + rowH*i
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick" text-anchor="end">%s</text>`, left-6, y+rowH/2+4, Escape(br.key))
		x := 0.0
		for j, v := range br.parts {
			if v <= 0 {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" data-cell="%s" data-part="%s" data-value="%s"><title>%s %s: %s</title></rect>`,
				px(x), y+4, px(x+v)-px(x), rowH-8, ttftPartColors[j], Escape(br.key), timingParts[j].key, report.FormatFloat(v),
				Escape(br.key), timingParts[j].name, Escape(report.FormatSeconds(v)))
			x += v
		}
		if finite(br.ttft) {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-width="2" data-cell="%s" data-part="ttft" data-value="%s"><title>%s TTFT p50: %s</title></line>`,
				px(br.ttft), y+2, px(br.ttft), y+rowH-2, Escape(br.key), report.FormatFloat(br.ttft), Escape(br.key), Escape(report.FormatSeconds(br.ttft)))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" class="frame"/>`, left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="axis" text-anchor="middle">time to first token</text></svg>`, float64(left)+pw/2, h-6)
	return template.HTML(b.String())
}

// finiteOr is v, or or when v is not finite.
func finiteOr(v, or float64) float64 {
	if finite(v) {
		return v
	}
	return or
}
