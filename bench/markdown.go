package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// MarkdownFile is the report rendered as GitHub-flavoured Markdown, for a
// CI job to post on a change: the leaderboard, one row per cell and the
// regression verdict, beside the audit chain.
const MarkdownFile = "report.md"

// The Markdown report's number formats; its test reads the numbers back
// through the same ones.
func mdMillis(sec float64) string {
	if math.IsNaN(sec) {
		return "–"
	}
	return strconv.FormatFloat(sec*1000, 'f', 1, 64)
}

func mdRate(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func mdRatio(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// mdCell escapes what would break a table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// WriteMarkdown writes the report as Markdown.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	env := &r.Environment
	fmt.Fprintf(&b, "# infer_exporter bench report\n\n")
	fmt.Fprintf(&b, "Run %s to %s (UTC), infer_exporter %s (revision %s), %s/%s, %d CPUs. Configuration `%s`, SHA-256 `%s`.\n\n",
		env.Started.UTC().Format(time.RFC3339), env.Finished.UTC().Format(time.RFC3339), env.ExporterVersion, env.ExporterRevision,
		env.OS, env.Arch, env.CPUs, mdCell(env.ConfigFile), env.ConfigSHA256)
	if r.Interrupted {
		fmt.Fprintf(&b, "**INTERRUPTED**: the run was stopped before its end; this report holds the %d cells that finished, every repeat of them.\n\n", len(r.Cells))
	}

	if bl := r.Baseline; bl != nil {
		b.WriteString("## Against the baseline\n\n")
		if len(bl.Regressions) > 0 {
			fmt.Fprintf(&b, "**REGRESSED**: %d gated figure(s) grew beyond %s and the noise, against `%s`:\n\n",
				len(bl.Regressions), strconv.FormatFloat(bl.Threshold*100, 'f', -1, 64)+"%", mdCell(bl.BaselineFile))
			b.WriteString("| cell | figure | old | new | change |\n| --- | --- | --- | --- | --- |\n")
			for _, c := range bl.Cells {
				if c.Regressed {
					fmt.Fprintf(&b, "| %s | %s | %s | %s | %s%% |\n", mdCell(c.Cell), c.Figure,
						strconv.FormatFloat(c.Old, 'g', 4, 64), strconv.FormatFloat(c.New, 'g', 4, 64), strconv.FormatFloat(c.Change*100, 'f', 1, 64))
				}
			}
		} else {
			fmt.Fprintf(&b, "No regression against `%s`: no gated figure (%s) grew beyond %s and the noise.\n",
				mdCell(bl.BaselineFile), strings.Join(bl.Gated, ", "), strconv.FormatFloat(bl.Threshold*100, 'f', -1, 64)+"%")
		}
		for _, wn := range bl.Warnings {
			fmt.Fprintf(&b, "\n> %s\n", mdCell(wn))
		}
		b.WriteString("\n")
	}

	b.WriteString("## Leaderboard\n\n")
	if len(r.Ranking.Entries) == 0 {
		b.WriteString("No target was ranked.\n\n")
	} else {
		fmt.Fprintf(&b, "Score: weighted mean of %s (`=` marks a rank tied with its neighbour at %s confidence).\n\n",
			strings.Join(r.Ranking.Components, ", "), strconv.FormatFloat(r.Ranking.Confidence, 'g', -1, 64))
		b.WriteString("| rank | target | score | interval |\n| --- | --- | --- | --- |\n")
		for _, e := range r.Ranking.Entries {
			tie := ""
			if e.Tied {
				tie = "="
			}
			fmt.Fprintf(&b, "| %s%d | %s | %s | %s – %s |\n", tie, e.Rank, mdCell(e.Target), mdRatio(e.Score), mdRatio(e.ScoreCI.Lo), mdRatio(e.ScoreCI.Hi))
		}
		b.WriteString("\n")
	}

	b.WriteString("## Cells\n\nMedian over repeats. Latencies in ms from the scheduled instant; rates per second over the measured windows.\n\n")
	b.WriteString("| cell |")
	for _, c := range mdColumns {
		b.WriteString(" " + c.md + " |")
	}
	b.WriteString(" flags |\n|" + strings.Repeat(" --- |", len(mdColumns)+2) + "\n")
	for i := range r.Cells {
		c := &r.Cells[i]
		b.WriteString("| " + mdCell(c.Key) + " |")
		for _, col := range mdColumns {
			b.WriteString(" " + col.markdown(c) + " |")
		}
		b.WriteString(" " + strings.Join(mdFlags(c), ", ") + " |\n")
	}
	b.WriteString("\n")
	if thin := mdThin(r); len(thin) > 0 {
		fmt.Fprintf(&b, "Some p99 above come from fewer than the 100 samples a p99 needs (drawn towards the largest value): %s.\n\n", strings.Join(thin, "; "))
	}

	if len(r.Sweeps) > 0 {
		b.WriteString("## Rate sweep\n\n| target | shape | rule | max rate | success ratio there | first failing rate |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, sw := range r.Sweeps {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdCell(sw.Target), mdCell(sw.Shape), sw.Rule,
				mdRate(sw.MaxRate), mdRatio(sw.SuccessRatio), mdRate(sw.FirstFailingRate))
		}
		b.WriteString("\n")
	}

	if len(env.Inputs) > 0 {
		b.WriteString("## Inputs\n\nThe audit chain: `infer_exporter bench verify report.json` hashes the files again.\n\n| kind | name | SHA-256 |\n| --- | --- | --- |\n")
		for _, in := range env.Inputs {
			name := in.Name
			if name == "" {
				name = in.Path
			}
			fmt.Fprintf(&b, "| %s | %s | `%s` |\n", in.Kind, mdCell(name), mdCell(in.SHA256))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdThin names the cells whose p99 in the Markdown table come from fewer
// samples than a p99 needs, with their counts.
func mdThin(r *Report) []string {
	var out []string
	for i := range r.Cells {
		c := &r.Cells[i]
		var parts []string
		for _, d := range []struct {
			name string
			n    int
		}{{"TTFT", c.Summary.TTFT.Count}, {"TPOT", c.Summary.TPOT.Count}, {"E2E", c.Summary.E2E.Count}} {
			if thinQuantile("p99", d.n) != "" {
				parts = append(parts, fmt.Sprintf("%s %d", d.name, d.n))
			}
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s (%s)", mdCell(c.Key), strings.Join(parts, ", ")))
		}
	}
	return out
}
