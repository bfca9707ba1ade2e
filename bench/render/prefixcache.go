package render

import (
	"fmt"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// HasPrefixCache says whether any cell has prefix-cache views
// (report.PrefixCache): then report.md and report.html have their table.
func HasPrefixCache(r *report.Report) bool {
	for i := range r.Cells {
		if r.Cells[i].PrefixCache != nil {
			return true
		}
	}
	return false
}

// mdPrefixCache writes the cells' prefix-cache views (report.PrefixCache),
// only when a cell has them.
func mdPrefixCache(b *strings.Builder, r *report.Report) {
	var rows []*report.CellResult
	for i := range r.Cells {
		if r.Cells[i].PrefixCache != nil {
			rows = append(rows, &r.Cells[i])
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Prefix cache\n\nMedian over repeats, over the measured windows: the declared cache-hit rate, the client's hit ratio (cached prompt tokens from the usage over prompt tokens), the server's (its prefix-cache hits over lookups), the best the prompts allow (a cache that holds the pool), the gap (best less measured), the eviction flag, and against the paired cell at rate 0 the throughput and TTFT p50 ratios.\n\n| cell | declared | client | server | best | gap | eviction | paired cell | throughput ratio | TTFT p50 ratio |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range rows {
		pc := c.PrefixCache
		paired, tp, ttft := "–", "–", "–"
		if pc.Paired != "" {
			paired, tp, ttft = pc.Paired, mdNum(pc.ThroughputRatio, 3), mdNum(pc.TTFTP50Ratio, 3)
		}
		fmt.Fprintf(b, "| %s | %g | %s | %s | %s | %s | %t | %s | %s | %s |\n", c.Key, pc.DeclaredRate,
			mdNum(pc.ClientRatio, 4), mdNum(pc.ServerRatio, 4), mdNum(pc.BestRatio, 4), mdNum(pc.Gap, 4), pc.Evicted, paired, tp, ttft)
	}
	b.WriteString("\n")
}
