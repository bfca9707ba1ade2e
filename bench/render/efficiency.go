package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// HasEfficiency says whether any cell of r has efficiency figures: a GPU
// was read, or bench.cost priced the GPUs.
func HasEfficiency(r *report.Report) bool {
	for i := range r.Cells {
		if r.Cells[i].Summary.Efficiency != nil {
			return true
		}
	}
	return false
}

// blockEfficiency are the efficiency lines of the console's result block:
// the columns of summary.efficiency, at four decimals (joules per token
// and dollars per million tokens are often below one).
var blockEfficiency = []blockFigure{
	{"Energy (J):", "energy_joules", blockFixed2},
	{"Energy per output token (J):", "joules_per_output_token", blockFixed4},
	{"Energy per good output token (J):", "joules_per_good_output_token", blockFixed4},
	{"Cost per 1M output tokens (USD):", "cost_per_million_output_tokens_usd", blockFixed4},
	{"Cost per 1M good output tokens (USD):", "cost_per_million_good_output_tokens_usd", blockFixed4},
}

func blockFixed4(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

// writeBlockEfficiency writes a cell's efficiency in its result block,
// when it has one: the energy's source, then each figure ("-" when null),
// then why a figure is null.
func writeBlockEfficiency(w io.Writer, c *report.CellResult) {
	e := c.Summary.Efficiency
	if e == nil {
		return
	}
	fmt.Fprintln(w, blockHeading("-", "Efficiency"))
	source := e.Source
	if source == "" {
		source = "no GPU read"
	}
	blockLine(w, "Energy source:", fmt.Sprintf("%s (%s)", source, gpuCount(e.GPUs)))
	for _, f := range blockEfficiency {
		v, value := report.ColumnNamed(f.column).Num(c), "-"
		if finite(v) {
			value = f.format(v)
		}
		blockLine(w, f.label, value)
	}
	if e.Note != "" {
		blockLine(w, "Efficiency note:", e.Note)
	}
}

// gpuCount is "1 GPU", "2 GPUs": the GPUs counted (read, or
// bench.cost.gpus).
func gpuCount(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// mdEfficiency is the Markdown efficiency table: one row per cell that has
// figures, at 0.1 J and four decimals for the per-token figures.
func mdEfficiency(b *strings.Builder, r *report.Report) {
	if !HasEfficiency(r) {
		return
	}
	b.WriteString("## Efficiency\n\nMedian over repeats. Energy over the measured windows, summed over the GPUs read (`energy_counter`: NVML's energy counter; `power_samples`: sampled power integrated); per output token delivered within the windows, and per good output token (requests that met the SLO); cost from `bench.cost`.\n\n")
	b.WriteString("| cell | energy source | GPUs | energy (J) | J/output token | J/good output token | USD/1M output tokens | USD/1M good output tokens | note |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i := range r.Cells {
		c := &r.Cells[i]
		e := c.Summary.Efficiency
		if e == nil {
			continue
		}
		source := e.Source
		if source == "" {
			source = "no GPU read"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", report.MarkdownCell(c.Key), source, e.GPUs,
			mdNum(e.EnergyJoules, 1), mdNum(e.JoulesPerOutputToken, 4), mdNum(e.JoulesPerGoodOutputToken, 4),
			mdNum(e.CostPerMillionOutputTokens, 4), mdNum(e.CostPerMillionGoodOutputTokens, 4), report.MarkdownCell(e.Note))
	}
	b.WriteString("\n")
}
