package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// addExportCommand registers `bench export` under cmd; the returned
// function runs it once app.Parse has chosen it.
func addExportCommand(cmd *kingpin.CmdClause, chosen func(string), stdout, stderr io.Writer) func(context.Context) int {
	var file, format string
	c := cmd.Command("export", "Write a report.json's figures as time series on stdout: every cell's figures as infer_bench_* gauges (labels target, load, shape, run_id), stamped with the run's end, for `promtool tsdb create-blocks-from openmetrics` to backfill into Prometheus.")
	c.Flag("format", "The series' format: openmetrics (the text format, ending in # EOF).").Default("openmetrics").EnumVar(&format, "openmetrics")
	c.Arg("report", "A report.json.").Required().StringVar(&file)
	c.Action(func(*kingpin.ParseContext) error { chosen("export"); return nil })
	return func(ctx context.Context) int {
		r, err := report.ReadJSONContext(ctx, file)
		if err != nil {
			fmt.Fprintln(stderr, "bench export:", err)
			return ExitError
		}
		if err := WriteOpenMetrics(stdout, r); err != nil {
			fmt.Fprintln(stderr, "bench export: writing the series:", err)
			return ExitError
		}
		return ExitOK
	}
}

// exportFamily is one exported metric family: the figures of FigureNames
// it holds, by the value of its quantile label ("" for a figure without
// one).
type exportFamily struct {
	// name is the family's name without its unit suffix; unit is that
	// suffix (seconds, ratio, per_second), which the interval's
	// families keep last: infer_bench_ttft_lower_seconds.
	name, unit, help string
	figures          map[string]string
}

// exportFamilies are the exported families, in the order written. The
// latencies are one family each, by quantile, as a summary's quantiles
// are, so that one query draws any of them.
var exportFamilies = []exportFamily{
	{"infer_bench_ttft", "seconds", "Time to first token of the cell, the median over its repeats of the quantile.",
		map[string]string{"0.5": "ttft_p50", "0.9": "ttft_p90", "0.99": "ttft_p99"}},
	{"infer_bench_tpot", "seconds", "Time per output token after the first of the cell, the median over its repeats of the quantile.",
		map[string]string{"0.5": "tpot_p50", "0.9": "tpot_p90", "0.99": "tpot_p99"}},
	{"infer_bench_e2e", "seconds", "End-to-end request latency of the cell, the median over its repeats of the quantile.",
		map[string]string{"0.5": "e2e_p50", "0.9": "e2e_p90", "0.99": "e2e_p99"}},
	{"infer_bench_output_tokens", "per_second", "Output tokens per second of the cell's successful requests, the median over its repeats.",
		map[string]string{"": "output_tokens_per_second"}},
	{"infer_bench_goodput", "ratio", "Share of the cell's measured requests that succeeded and met every SLO threshold.",
		map[string]string{"": "goodput_ratio"}},
	{"infer_bench_success", "ratio", "Share of the cell's measured requests that succeeded.",
		map[string]string{"": "success_ratio"}},
}

var exportQuantiles = []string{"", "0.5", "0.9", "0.99"}

// WriteOpenMetrics writes r's cells' figures as OpenMetrics gauges, each
// family with the lower and upper ends of the figure's interval beside it
// (infer_bench_ttft_lower_seconds, ..._upper_seconds), every sample
// stamped with the run's end and labelled with report.RunID: a
// backfilled run is one point of each series, and nightly runs draw a
// line. Missing figures (a cell without successes) are left out.
func WriteOpenMetrics(w io.Writer, r *report.Report) error {
	bw := bufio.NewWriter(w)
	ts := strconv.FormatFloat(float64(r.Environment.Finished.UnixMilli())/1000, 'f', 3, 64)
	runID := report.RunID(r)
	for _, fam := range exportFamilies {
		for _, part := range []string{"", "lower", "upper"} {
			name, help := fam.name, fam.help
			if part != "" {
				name += "_" + part
				help = "The " + part + " end of the interval of: " + help
			}
			name += "_" + fam.unit
			fmt.Fprintf(bw, "# TYPE %s gauge\n", name)
			if fam.unit != "per_second" {
				fmt.Fprintf(bw, "# UNIT %s %s\n", name, fam.unit)
			}
			fmt.Fprintf(bw, "# HELP %s %s\n", name, help)
			for i := range r.Cells {
				writeCellSamples(bw, &r.Cells[i], fam, part, name, runID, ts)
			}
		}
	}
	bw.WriteString("# EOF\n")
	return bw.Flush()
}

// writeCellSamples writes cell c's samples of one family: its value
// (part "") or an end of its interval.
func writeCellSamples(w *bufio.Writer, c *report.CellResult, fam exportFamily, part, name, runID, ts string) {
	for _, q := range exportQuantiles {
		fig, ok := fam.figures[q]
		if !ok {
			continue
		}
		v := c.Summary.Figure(fig)
		if ci, ok := c.CI[fig]; part != "" && ok {
			v = map[string]float64{"lower": ci.Lo, "upper": ci.Hi}[part]
		} else if part != "" {
			continue
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		labels := fmt.Sprintf(`target="%s",load="%s",shape="%s",run_id="%s"`,
			escapeLabel(c.Target), escapeLabel(c.Load.String()), escapeLabel(c.Shape), escapeLabel(runID))
		if q != "" {
			labels += `,quantile="` + q + `"`
		}
		fmt.Fprintf(w, "%s{%s} %s %s\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64), ts)
	}
}

// escapeLabel escapes a label value as the text formats do.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
