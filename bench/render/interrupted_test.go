package render

import (
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// TestInterruptedHolds: what an interrupted report says it holds, by its
// finished and partial cells, in the console, report.md and report.html.
func TestInterruptedHolds(t *testing.T) {
	for _, tc := range []struct {
		name              string
		finished, partial int
		want              string
	}{
		{"nothing", 0, 0, "no cell: the interrupt came before the first cell measured anything"},
		{"finished", 2, 0, "the 2 cells that finished"},
		{"one finished", 1, 0, "the 1 cell that finished"},
		{"first cell cut short", 0, 1, "1 cell cut short by the interrupt, marked PARTIAL: no cell had finished"},
		{"both", 1, 1, "the 1 cell that finished, and 1 cell cut short by the interrupt, marked PARTIAL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &report.Report{Interrupted: true}
			for range tc.finished {
				r.Cells = append(r.Cells, report.CellResult{Key: "done"})
			}
			for range tc.partial {
				r.Cells = append(r.Cells, report.CellResult{Key: "cut", Partial: true,
					Repeats: []report.RepeatResult{{Partial: true, Stats: report.Stats{WindowSeconds: 1.5}}}})
			}
			if got := InterruptedHolds(r); !strings.HasPrefix(got, tc.want) {
				t.Errorf("InterruptedHolds = %q, want %q", got, tc.want)
			}
			var b strings.Builder
			WriteResultBlocks(&b, r)
			if !strings.Contains(b.String(), "INTERRUPTED: the run was stopped; the report holds "+tc.want) {
				t.Errorf("console:\n%s", b.String())
			}
			if got := strings.Contains(b.String(), "interrupted after 1.5 s measured; not ranked"); got != (tc.partial > 0) {
				t.Errorf("a partial cell's block says so: %v, want %v:\n%s", got, tc.partial > 0, b.String())
			}
		})
	}
}
