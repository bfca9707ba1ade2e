package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// TestEnergySourceCountsGPUs: one GPU is "1 GPU".
func TestEnergySourceCountsGPUs(t *testing.T) {
	for n, want := range map[int]string{1: "no GPU read (1 GPU)", 2: "no GPU read (2 GPUs)"} {
		c := &report.CellResult{Key: "a"}
		c.Summary.Efficiency = &report.Efficiency{GPUs: n}
		var b bytes.Buffer
		writeBlockEfficiency(&b, c)
		if !strings.Contains(b.String(), want) {
			t.Errorf("%d GPUs: %q lacks %q", n, b.String(), want)
		}
	}
}

// TestHTMLLeaderboardOfNoTarget: a run that ranked no target (every cell
// failed, or it was interrupted) says so and why, not an empty table.
func TestHTMLLeaderboardOfNoTarget(t *testing.T) {
	r := &report.Report{Schema: report.Schema}
	r.Ranking.Note = "not ranked, no request succeeded: target"
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, `<table class="leaderboard">`) || !strings.Contains(page, "No target was ranked. not ranked, no request succeeded: target.") {
		i := strings.Index(page, `id="leaderboard"`)
		t.Errorf("the leaderboard of no target: %q", page[i:min(len(page), i+400)])
	}
}
