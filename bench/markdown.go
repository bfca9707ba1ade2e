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

// mdDist is a distribution's quantile in ms, "–" without values.
func mdDist(d Dist, q func(Dist) float64) string {
	if d.Count == 0 {
		return "–"
	}
	return mdMillis(q(d))
}

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
	b.WriteString("| cell | requests | successes | req/s | output tokens/s | goodput | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | E2E p50 | E2E p99 | flags |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range r.Cells {
		s := &c.Summary
		var flags []string
		if !c.Stable {
			flags = append(flags, "unstable")
		}
		if c.Degraded {
			flags = append(flags, "client degraded")
		}
		if s.Overloaded {
			flags = append(flags, "overloaded")
		}
		if s.Draining {
			flags = append(flags, "draining")
		}
		p50 := func(d Dist) float64 { return d.P50 }
		p99 := func(d Dist) float64 { return d.P99 }
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			mdCell(c.Key), s.Requests, s.Successes, mdRate(s.RequestsPerSecond), mdRate(s.OutputTokensPerSecond), mdRatio(s.GoodputRatio),
			mdDist(s.TTFT, p50), mdDist(s.TTFT, p99), mdDist(s.TPOT, p50), mdDist(s.TPOT, p99), mdDist(s.E2E, p50), mdDist(s.E2E, p99),
			strings.Join(flags, ", "))
	}
	b.WriteString("\n")

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
