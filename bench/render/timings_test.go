package render

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// timingsReport has two cells, one whose engine gave its timings (a queue,
// and an overhead below the clocks' resolution in one of its p99s) and
// one whose engine gave none.
func timingsReport() *report.Report {
	part := func(n int, p50, p99 float64) report.TimingPart {
		return report.TimingPart{Count: n, P50: report.Num(p50), P99: report.Num(p99)}
	}
	return &report.Report{Schema: report.Schema, Cells: []report.CellResult{
		{Key: "vllm/rate=4/s", Summary: report.Stats{Requests: 40, Successes: 40, Outcomes: map[string]int{"success": 40},
			TTFT: report.Dist{Count: 40, P50: 0.152, P99: 0.4},
			ServerTimings: &report.ServerTimings{Successes: 40, Decomposed: 39, DecomposedRatio: 0.975,
				Queue: part(39, 0.09, 0.3), EngineTTFT: part(39, 0.055, 0.08), ClientOverhead: part(39, 0.005, 0.012), Generation: part(40, 1.25, 2.5)}}},
		{Key: "other/rate=4/s", Summary: report.Stats{Requests: 40, Successes: 40, Outcomes: map[string]int{"success": 40}, TTFT: report.Dist{Count: 40, P50: 0.2}}},
	}}
}

// roundTrip is r written as report.json and read back, as the renderings
// of a report read from its file see it.
func roundTrip(t *testing.T, r *report.Report) *report.Report {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	back, err := report.Decode(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func rendered(t *testing.T, r *report.Report, write func(io.Writer, *report.Report) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestServerTimingsMarkdown: report.md's "Where the time went" has a row
// per cell with the engine's timings, its figures in ms as report.json
// holds them; a report without any has no such section.
func TestServerTimingsMarkdown(t *testing.T) {
	md := rendered(t, roundTrip(t, timingsReport()), WriteMarkdown)
	rows := mdTable(md, "Where the time went")
	want := [][]string{{"vllm/rate=4/s", "97.5% (39 of 40)", "90.00", "300.00", "55.00", "80.00", "5.00", "12.00", "1250.00", "2500.00"}}
	if len(rows) != 1 || strings.Join(rows[0], "|") != strings.Join(want[0], "|") {
		t.Errorf("rows %q, want %q", rows, want)
	}
	r := timingsReport()
	r.Cells[0].Summary.ServerTimings = nil
	if md := rendered(t, r, WriteMarkdown); strings.Contains(md, "Where the time went") {
		t.Error("a section without any cell's timings")
	}
}

// TestServerTimingsHTML: report.html's section has the table's figures
// and, per cell with timings, a bar whose stacked parts are the queue,
// engine TTFT and overhead p50s, one after the other from zero, and a
// tick at the client's TTFT p50; the chart is well-formed SVG; a report
// without any timings has no section.
func TestServerTimingsHTML(t *testing.T) {
	h := rendered(t, roundTrip(t, timingsReport()), WriteHTML)
	_, sec, ok := strings.Cut(h, `<section id="server-timings">`)
	if !ok {
		t.Fatal("no section server-timings")
	}
	sec, _, _ = strings.Cut(sec, "</section>")
	for _, want := range []string{`data-q="queue_p50" data-value="0.09"`, `data-q="client_overhead_p99" data-value="0.012"`,
		`data-q="generation_p50" data-value="1.25"`, `data-q="decomposed_ratio" data-value="0.975"`, `97.5% (39 of 40)`} {
		if !strings.Contains(sec, want) {
			t.Errorf("section lacks %s", want)
		}
	}
	if strings.Contains(sec, `data-cell="other/rate=4/s"`) {
		t.Error("a row or bar for the cell without timings")
	}
	start, end := strings.Index(sec, "<svg"), strings.Index(sec, "</svg>")
	if start < 0 || end < start {
		t.Fatal("no chart")
	}
	svg := sec[start : end+len("</svg>")]
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("chart is not well-formed: %v", err)
		}
	}
	// The parts, in order, each starting where the one before ended.
	re := regexp.MustCompile(`<rect x="([0-9.]+)" y="[0-9]+" width="([0-9.]+)" height="[0-9]+" fill="[^"]+" data-cell="vllm/rate=4/s" data-part="([a-z_]+)" data-value="([0-9.]+)"`)
	m := re.FindAllStringSubmatch(svg, -1)
	var parts, values []string
	for _, x := range m {
		parts, values = append(parts, x[3]), append(values, x[4])
	}
	if strings.Join(parts, ",") != "queue,engine_ttft,client_overhead" || strings.Join(values, ",") != "0.09,0.055,0.005" {
		t.Fatalf("bar parts %v = %v, want queue, engine_ttft, client_overhead = 0.09, 0.055, 0.005", parts, values)
	}
	for i := 1; i < len(m); i++ {
		if prevEnd, x := atof(t, m[i-1][1])+atof(t, m[i-1][2]), atof(t, m[i][1]); prevEnd-x > 0.11 || x-prevEnd > 0.11 {
			t.Errorf("part %s starts at %v, the one before ends at %v", m[i][3], x, prevEnd)
		}
	}
	if !strings.Contains(svg, `data-part="ttft" data-value="0.152"`) {
		t.Error("no tick at the client's TTFT p50")
	}
	r := timingsReport()
	r.Cells[0].Summary.ServerTimings = nil
	if h := rendered(t, r, WriteHTML); strings.Contains(h, "server-timings") {
		t.Error("a section without any cell's timings")
	}
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
