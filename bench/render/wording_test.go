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
