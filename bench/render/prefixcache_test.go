package render

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// TestHTMLPrefixCache: report.html has a Prefix cache table with a row
// per cell that has the views, each figure as report.json holds it (its
// exact value in data-value), the paired columns dashed for a cell
// without a pair; a report whose cells have none has no such section.
func TestHTMLPrefixCache(t *testing.T) {
	r := readGolden(t, "report.json")
	if len(r.Cells) < 3 {
		t.Fatalf("the golden report has %d cells, want at least 3", len(r.Cells))
	}
	var plain bytes.Buffer
	if err := WriteHTML(&plain, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), `id="prefix-cache"`) {
		t.Fatal("a report without prefix-cache views has the section")
	}
	r.Cells[0].PrefixCache = &report.PrefixCache{DeclaredRate: 0.5, ClientRatio: 0.5, ServerRatio: 0.4987, BestRatio: 0.5, Gap: 0.0013,
		Paired: r.Cells[2].Key, ThroughputRatio: 1.25, TTFTP50Ratio: 0.6}
	r.Cells[1].PrefixCache = &report.PrefixCache{DeclaredRate: 0.9, ClientRatio: 0.2, ServerRatio: report.NaN(), BestRatio: 0.8906, Gap: 0.6906, Evicted: true}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(b.String(), `<section id="prefix-cache">`)
	if !ok {
		t.Fatal("no prefix-cache section")
	}
	section, _, _ = strings.Cut(section, "</section>")
	rows := regexp.MustCompile(`<tr data-cell="([^"]+)">(.*)</tr>`).FindAllStringSubmatch(section, -1)
	if len(rows) != 2 || rows[0][1] != Escape(r.Cells[0].Key) || rows[1][1] != Escape(r.Cells[1].Key) {
		t.Fatalf("rows %q, want the two cells with views", rows)
	}
	value := func(row, q string) string {
		m := regexp.MustCompile(`data-q="` + q + `" data-value="([^"]*)"`).FindStringSubmatch(row)
		if m == nil {
			return "absent"
		}
		return m[1]
	}
	for _, tc := range []struct {
		row     int
		q, want string
	}{
		{0, "declared_rate", "0.5"}, {0, "client_hit_ratio", "0.5"}, {0, "server_hit_ratio", "0.4987"}, {0, "best_hit_ratio", "0.5"},
		{0, "gap", "0.0013"}, {0, "throughput_ratio", "1.25"}, {0, "ttft_p50_ratio", "0.6"},
		{1, "declared_rate", "0.9"}, {1, "server_hit_ratio", "null"}, {1, "gap", "0.6906"}, {1, "throughput_ratio", "absent"},
	} {
		if got := value(rows[tc.row][2], tc.q); got != tc.want {
			t.Errorf("row %d %s = %s, want %s", tc.row, tc.q, got, tc.want)
		}
	}
	if !strings.Contains(rows[0][2], Escape(r.Cells[2].Key)) || strings.Contains(rows[0][2], `class="bad"`) {
		t.Errorf("row 0 does not name its paired cell, or flags an eviction: %s", rows[0][2])
	}
	if !strings.Contains(rows[1][2], `<span class="bad">true</span>`) || !strings.Contains(rows[1][2], `<td class="name">–</td>`) {
		t.Errorf("row 1 does not flag its eviction, or has a paired cell: %s", rows[1][2])
	}
}
