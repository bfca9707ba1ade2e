package render

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tickTexts are the tick labels of an SVG chart, the y axis's first.
func tickTexts(svg string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`class="tick" text-anchor="(?:end|middle)">([^<]*)<`).FindAllStringSubmatch(svg, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestHTMLChartAxes: whole ticks for whole values (2 req/s reads "2", not
// "2.00"), one unit per axis picked from its largest tick (not "500.00 ms"
// beside "2.500 s"), a lone point drawn as a point on an axis centred on
// it (not 3.60 to 4.40), and no NaN anywhere.
func TestHTMLChartAxes(t *testing.T) {
	t.Run("integer rates", func(t *testing.T) {
		svg := string(chart{Title: "t", Series: []chartSeries{{Name: "a", Points: []xy{{1, 0.2}, {2, 0.5}, {4, 2.5}}}}, YKind: axisSeconds, YFromZero: true}.SVG())
		ticks := tickTexts(svg)
		for _, want := range []string{"0.0 s", "0.5 s", "1.0 s", "2.5 s", "1", "2", "3", "4"} {
			if !slices.Contains(ticks, want) {
				t.Errorf("no tick %q in %q", want, ticks)
			}
		}
		for _, tk := range ticks {
			if strings.Contains(tk, "ms") || strings.HasSuffix(tk, ".00") || strings.Contains(tk, ".5") && !strings.HasSuffix(tk, " s") {
				t.Errorf("tick %q: mixed units or fractional ticks of whole values: %q", tk, ticks)
			}
		}
	})
	t.Run("milliseconds", func(t *testing.T) {
		ticks := tickTexts(string(chart{Title: "t", Series: []chartSeries{{Name: "a", Points: []xy{{1, 0.012}, {2, 0.3}}}}, YKind: axisSeconds, YFromZero: true}.SVG()))
		for _, want := range []string{"0 ms", "100 ms", "300 ms"} {
			if !slices.Contains(ticks, want) {
				t.Errorf("no tick %q in %q", want, ticks)
			}
		}
	})
	t.Run("one concurrency", func(t *testing.T) {
		svg := string(chart{Title: "t", Series: []chartSeries{{Name: "a", Points: []xy{{4, 0.25}}}}, YKind: axisSeconds, YFromZero: true}.SVG())
		if strings.Count(svg, "<circle") != 1 {
			t.Errorf("a lone point is not drawn as one point: %s", svg)
		}
		ticks := tickTexts(svg)
		if slices.Contains(ticks, "3.60") || slices.Contains(ticks, "4.40") || !slices.Contains(ticks, "4") || !slices.Contains(ticks, "0") || !slices.Contains(ticks, "8") {
			t.Errorf("one concurrency of 4: x ticks %q, want 0 … 4 … 8", ticks)
		}
		// The point sits in the middle of the plot.
		m := regexp.MustCompile(`<circle cx="([0-9.]+)"`).FindStringSubmatch(svg)
		if m == nil || m[1] != "304.0" { // padLeft + (560-padLeft-padRight)/2
			t.Errorf("the lone point at x %v, want the plot's centre 304.0", m)
		}
	})
	t.Run("lone point in a dense series", func(t *testing.T) {
		pts := make([]xy, 100)
		for i := range pts {
			pts[i] = xy{float64(i), math.NaN()}
		}
		pts[50].Y = 3
		svg := string(chart{Title: "t", Series: []chartSeries{{Name: "a", Points: pts}}}.SVG())
		if strings.Count(svg, "<circle") != 1 {
			t.Errorf("the one finite point of a long series is not drawn")
		}
	})
	t.Run("ratio", func(t *testing.T) {
		ticks := tickTexts(string(chart{Title: "t", Series: []chartSeries{{Name: "a", Points: []xy{{0.01, 0}, {0.2, 1}}}}, XKind: axisSeconds, YKind: axisRatio}.SVG()))
		for _, want := range []string{"0%", "20%", "100%", "0 ms", "200 ms"} {
			if !slices.Contains(ticks, want) {
				t.Errorf("no tick %q in %q", want, ticks)
			}
		}
	})
}
