package render

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// MarkdownFile is the report rendered as GitHub-flavoured Markdown, for a
// CI job to post on a change: the leaderboard, one row per cell and the
// regression verdict, beside the audit chain.
const MarkdownFile = "report.md"

// WriteMarkdown writes the report as Markdown.
func WriteMarkdown(w io.Writer, r *report.Report) error {
	var b strings.Builder
	env := &r.Environment
	fmt.Fprintf(&b, "# infer_exporter bench report\n\n")
	// A quick start (or a merge) has no file of its own: its configuration
	// is kept in report.json (environment.config).
	config := "`" + report.MarkdownCell(env.ConfigFile) + "`"
	if env.ConfigFile == "" {
		config = "without a file (report.json's environment.config holds it)"
	}
	fmt.Fprintf(&b, "Run %s to %s (UTC), infer_exporter %s (revision %s), %s/%s, %d CPUs. Configuration %s, SHA-256 `%s`.\n\n",
		env.Started.UTC().Format(time.RFC3339), env.Finished.UTC().Format(time.RFC3339), env.ExporterVersion, env.ExporterRevision,
		env.OS, env.Arch, env.CPUs, config, env.ConfigSHA256)
	if r.Interrupted {
		fmt.Fprintf(&b, "**INTERRUPTED**: the run was stopped before its end; this report holds %s.\n\n", InterruptedHolds(r))
	}
	if rr := r.RequestRecords; rr != nil && rr.Error != "" {
		fmt.Fprintf(&b, "**REQUEST RECORDS INCOMPLETE**: writing `%s` failed (%s): %d written, %d dropped; the bench command exits 1 on it. The figures below do not depend on it.\n\n",
			report.MarkdownCell(rr.Path), report.MarkdownCell(rr.Error), rr.Written, rr.Dropped)
	}

	if r.Baseline != nil {
		mdBaseline(&b, r.Baseline)
	}
	mdLeaderboard(&b, &r.Ranking)
	mdBelowFloor(&b, r)

	b.WriteString("## Cells\n\nMedian over repeats. Latencies in ms from the scheduled instant; rates per second over the measured windows.\n\n")
	b.WriteString("| cell |")
	for _, c := range report.MDColumns {
		b.WriteString(" " + c.MD + " |")
	}
	b.WriteString(" flags |\n|" + strings.Repeat(" --- |", len(report.MDColumns)+2) + "\n")
	for i := range r.Cells {
		c := &r.Cells[i]
		b.WriteString("| " + report.MarkdownCell(c.Key) + " |")
		for _, col := range report.MDColumns {
			b.WriteString(" " + col.Markdown(c) + " |")
		}
		b.WriteString(" " + strings.Join(report.MDFlags(c), ", ") + " |\n")
	}
	b.WriteString("\n")
	if thin := mdThin(r); len(thin) > 0 {
		fmt.Fprintf(&b, "Some p99 above come from fewer than the 100 samples a p99 needs (drawn towards the largest value): %s.\n\n", strings.Join(thin, "; "))
	}

	mdEfficiency(&b, r)
	mdValidity(&b, r)
	mdServerTimings(&b, r)

	if len(r.Sweeps) > 0 {
		b.WriteString("## Rate sweep\n\n| target | shape | rule | max rate | success ratio there | first failing rate | note |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, sw := range r.Sweeps {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", report.MarkdownCell(sw.Target), report.MarkdownCell(sw.Shape), sw.Rule,
				report.MarkdownRate(sw.MaxRate), report.MarkdownRatio(sw.SuccessRatio), report.MarkdownRate(sw.FirstFailingRate), report.MarkdownCell(sw.Note))
		}
		b.WriteString("\n")
	}

	if len(r.Agents) > 0 {
		b.WriteString("## Agents under an SLO\n\n| target | tier | max agents | jobs/h per agent there | first failing agents | note |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, a := range r.Agents {
			fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %d | %s |\n", report.MarkdownCell(a.Target), report.MarkdownCell(a.Tier), a.MaxAgents,
				a.JobsPerHourPerAgent, a.FirstFailingAgents, report.MarkdownCell(a.Note))
		}
		b.WriteString("\n")
	}

	writeMarkdownSections(&b, r)

	if len(env.Inputs) > 0 {
		b.WriteString("## Inputs\n\nThe audit chain: `infer_exporter bench verify report.json` hashes the files again. " +
			"A `prompt_set` row identifies the prompts one target was sent for one shape (the SHA-256 of their texts, in order); " +
			"report.json's `environment.prompt_set_sha256` hashes every set together, and each set's `sha256_first64` its first 64 prompts, " +
			"the hash the exporter's `infer_probe_prompt_info` shows for a workload of the same seed and lengths.\n\n" +
			"| kind | name | SHA-256 |\n| --- | --- | --- |\n")
		for _, in := range env.Inputs {
			name := in.Name
			if name == "" {
				name = in.Path
			}
			fmt.Fprintf(&b, "| %s | %s | `%s` |\n", in.Kind, report.MarkdownCell(name), report.MarkdownCell(in.SHA256))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdNum writes a figure that may be null (NaN) as "–".
func mdNum(v report.Num, digits int) string {
	if math.IsNaN(float64(v)) {
		return "–"
	}
	return strconv.FormatFloat(float64(v), 'f', digits, 64)
}

// writeMarkdownSections writes the sections beside the cells: failures by
// reason, the replays, the known answers (with why an accuracy is what it
// is), the perplexity and the cold start, each only when the run has it.
func writeMarkdownSections(b *strings.Builder, r *report.Report) {
	mdFailures(b, r)
	mdDegraded(b, r)
	writeMarkdownPrecision(b, r)
	mdReplays(b, r)
	mdPrefixCache(b, r)
	mdKnownAnswers(b, r)
	mdPerplexity(b, r)
	mdRequestRecords(b, r.RequestRecords)
	mdColdStart(b, r.ColdStart)
}

// mdFailures writes the cells whose measured requests did not all succeed,
// by outcome and by HTTP status. Failures are summed over the repeats:
// exact counts, where a median of each outcome would not add up.
func mdFailures(b *strings.Builder, r *report.Report) {
	type failures struct {
		key                string
		requests, failed   int
		outcomes, statuses map[string]int
	}
	var failed []failures
	for i := range r.Cells {
		c := &r.Cells[i]
		f := failures{key: c.Key, outcomes: map[string]int{}, statuses: map[string]int{}}
		for _, rep := range c.Repeats {
			f.requests += rep.Stats.Requests
			f.failed += rep.Stats.Requests - rep.Stats.Successes
			for k, n := range rep.Stats.Outcomes {
				f.outcomes[k] += n
			}
			for k, n := range rep.Stats.HTTPErrors {
				f.statuses[k] += n
			}
		}
		if f.failed > 0 {
			failed = append(failed, f)
		}
	}
	if len(failed) == 0 {
		return
	}
	b.WriteString("## Failures\n\nMeasured requests that did not succeed, by outcome and by HTTP status, over every repeat.\n\n| cell | requests | not successful | by outcome | by HTTP status |\n| --- | --- | --- | --- | --- |\n")
	for _, f := range failed {
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s |\n", report.MarkdownCell(f.key), f.requests, f.failed,
			mdCounts(f.outcomes, report.OutcomeSuccess), mdCounts(f.statuses, ""))
	}
	b.WriteString("\n")
}

// mdDegraded writes the cells whose client was degraded, with their notes.
func mdDegraded(b *strings.Builder, r *report.Report) {
	var degraded []string
	for i := range r.Cells {
		if c := &r.Cells[i]; c.DegradedNote != "" {
			degraded = append(degraded, fmt.Sprintf("| %s | %s |", report.MarkdownCell(c.Key), report.MarkdownCell(c.DegradedNote)))
		}
	}
	if len(degraded) == 0 {
		return
	}
	b.WriteString("## Client degraded\n\nCells whose client fell behind its schedule or waited for a CPU: their latencies include its own delay. How late, how often, and what to change.\n\n| cell | note |\n| --- | --- |\n")
	b.WriteString(strings.Join(degraded, "\n") + "\n\n")
}

// mdReplays writes each replay cell's repeats: the trace's rows, what was
// replayed, dropped and clamped, and the sends' drift.
func mdReplays(b *strings.Builder, r *report.Report) {
	var replays []*report.CellResult
	for i := range r.Cells {
		if r.Cells[i].Load.Kind == report.LoadReplay {
			replays = append(replays, &r.Cells[i])
		}
	}
	if len(replays) == 0 {
		return
	}
	b.WriteString("## Replays\n\nPer repeat: the window's rows, those replayed (sent or dropped) and dropped, those the rate ceiling clamped, the drift of the sends from the trace's instants (ms), and the stability over the windows the trace filled.\n\n| cell | repeat | rows | replayed | dropped | clamped | drift p50 | drift p99 | drift max | degraded | stability |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range replays {
		for _, rep := range c.Repeats {
			rr := rep.Replay
			if rr == nil {
				continue
			}
			fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d | %s | %s | %s | %t | %s |\n", report.MarkdownCell(c.Key), rep.Index+1, rr.Rows, rr.Replayed, rr.Dropped, rr.Clamped,
				report.MarkdownMillis(rr.Drift.P50), report.MarkdownMillis(rr.Drift.P99), report.MarkdownMillis(rr.Drift.Max), rr.Degraded, report.MarkdownCell(mdStability(rep.Stability)))
		}
	}
	b.WriteString("\n")
}

// mdKnownAnswers writes each target's known-answer checks passed, and why
// each failing one failed.
func mdKnownAnswers(b *strings.Builder, r *report.Report) {
	if len(r.Accuracy) == 0 {
		return
	}
	b.WriteString("## Known answers\n\nEach target's known-answer checks: the ranking's accuracy is the fraction passed (with the perplexity's score where both are set).\n\n| target | passed | of | failing checks |\n| --- | --- | --- | --- |\n")
	for _, a := range r.Accuracy {
		var why []string
		for _, c := range a.Checks {
			if !c.Passed {
				reason := c.Error
				if reason == "" {
					reason = fmt.Sprintf("answered %q, expected %q", c.Answer, c.Expect)
				}
				why = append(why, fmt.Sprintf("%q: %s", c.Prompt, reason))
			}
		}
		fmt.Fprintf(b, "| %s | %d | %d | %s |\n", report.MarkdownCell(a.Target), a.Passed, a.Total, report.MarkdownCell(strings.Join(why, "; ")))
	}
	b.WriteString("\n")
}

// mdPerplexity writes each target's perplexity over the reference text.
func mdPerplexity(b *strings.Builder, r *report.Report) {
	if len(r.Perplexity) == 0 {
		return
	}
	b.WriteString("## Perplexity\n\nThe median over the repeats of each target's perplexity over the reference text (compare only equal text hashes).\n\n| target | perplexity | min | max | tokens | scored | failures |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range r.Perplexity {
		fail := mdCounts(p.Failures, "")
		if p.Error != "" {
			fail = strings.TrimSpace(fail + " (" + p.Error + ")")
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %d of %d | %s |\n", report.MarkdownCell(p.Target), mdNum(p.Perplexity, 3), mdNum(p.Min, 3), mdNum(p.Max, 3),
			p.Tokens, p.Scores, p.Repeats, report.MarkdownCell(fail))
	}
	b.WriteString("\n")
}

// mdRequestRecords writes what became of the per-request records, when the
// run wrote them (rr is nil otherwise).
func mdRequestRecords(b *strings.Builder, rr *report.RequestRecords) {
	if rr == nil {
		return
	}
	b.WriteString("## Request records\n\nThe per-request records of `--output.requests`: written (the lines the file holds), dropped by a write error, and left out beyond `--output.requests.max`.\n\n| file | written | dropped | left out | error |\n| --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(b, "| `%s` | %d | %d | %d | %s |\n\n", report.MarkdownCell(rr.Path), rr.Written, rr.Dropped, rr.LeftOut, report.MarkdownCell(rr.Error))
}

// mdColdStart writes the cold start's figures, when the run measured one
// (cs is nil otherwise).
func mdColdStart(b *strings.Builder, cs *report.ColdStartReport) {
	if cs == nil {
		return
	}
	b.WriteString("## Cold start\n\nSeconds from the server's start to its readiness, to the first token of the first successful request, and that request's own TTFT (median over the starts).\n\n")
	fmt.Fprintf(b, "| target | ready | first token | first request TTFT | starts | failed |\n| --- | --- | --- | --- | --- | --- |\n| %s | %s | %s | %s | %d | %d |\n\n",
		report.MarkdownCell(cs.Target), mdNum(cs.ReadySeconds, 3), mdNum(cs.FirstTokenSeconds, 3), mdNum(cs.FirstRequestTTFTSeconds, 3), len(cs.Repeats), cs.Failed)
}

// mdCounts writes counts as "key n, key n" in key order, leaving skip out.
func mdCounts(m map[string]int, skip string) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		if k != skip && m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// mdStability says how a repeat's stability was judged: its state, and
// the drift with its interval or why it was not judged.
func mdStability(st report.StabilityResult) string {
	switch {
	case !st.Checked && st.Note != "":
		return st.Note
	case !st.Checked:
		return "not checked"
	case st.State == report.StateStable:
		return fmt.Sprintf("stable over %d windows, %d requests (drift %s%%, %s%% to %s%%)", st.Windows, st.Requests,
			mdNum(report.Num(float64(st.Growth)*100), 1), mdNum(report.Num(float64(st.GrowthLow)*100), 1), mdNum(report.Num(float64(st.GrowthHigh)*100), 1))
	}
	return st.Note
}

// mdThin names the cells whose p99 in the Markdown table come from fewer
// samples than a p99 needs, with their counts.
func mdThin(r *report.Report) []string {
	var out []string
	for i := range r.Cells {
		c := &r.Cells[i]
		var parts []string
		for _, d := range []struct {
			name string
			n    int
		}{{"TTFT", c.Summary.TTFT.Count}, {"TPOT", c.Summary.TPOT.Count}, {"E2E", c.Summary.E2E.Count}} {
			if report.ThinQuantile("p99", d.n) != "" {
				parts = append(parts, fmt.Sprintf("%s %d", d.name, d.n))
			}
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s (%s)", report.MarkdownCell(c.Key), strings.Join(parts, ", ")))
		}
	}
	return out
}

// mdBaseline is the comparison with the baseline: the run's verdict, then
// every gated figure with its own (regressed, inconclusive, ok), its
// change's interval and the smallest change the runs could detect, and the
// comparison's warnings.
func mdBaseline(b *strings.Builder, bl *report.Comparison) {
	b.WriteString("## Against the baseline\n\n")
	pct := func(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" }
	signed := func(v float64) string {
		if v >= 0 {
			return "+" + pct(v)
		}
		return pct(v)
	}
	gated := len(bl.Regressions) + len(bl.Inconclusive) + bl.OK
	fmt.Fprintf(b, "**%s**: %d regressed, %d inconclusive, %d ok of %d gated figure(s) (%s) against `%s`, threshold %s at %s confidence.\n\n",
		strings.ToUpper(string(bl.Verdict)), len(bl.Regressions), len(bl.Inconclusive), bl.OK, gated, strings.Join(bl.Gated, ", "),
		report.MarkdownCell(bl.BaselineFile), strconv.FormatFloat(bl.Threshold*100, 'f', -1, 64)+"%", strconv.FormatFloat(bl.Confidence*100, 'f', -1, 64)+"%")
	b.WriteString("A figure regressed when its whole interval is worse than the threshold, is ok when its whole interval is better than a worsening of the threshold, and is inconclusive otherwise (the run could not tell a change of the threshold from noise).\n")
	if gated > 0 {
		b.WriteString("\n| verdict | cell | figure | old | new | change | interval | could detect |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, c := range bl.Cells {
			if !c.Gated {
				continue
			}
			interval, detect := "–", "–"
			if c.ChangeLo.Valid() {
				interval = signed(float64(c.ChangeLo)) + ".." + signed(float64(c.ChangeHi))
				detect = "±" + pct(float64(c.Detectable))
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Verdict, report.MarkdownCell(c.Cell), c.Figure,
				strconv.FormatFloat(c.Old, 'g', 4, 64), strconv.FormatFloat(c.New, 'g', 4, 64), signed(c.Change), interval, detect)
		}
	}
	for _, wn := range bl.Warnings {
		fmt.Fprintf(b, "\n> %s\n", report.MarkdownCell(wn))
	}
	b.WriteString("\n")
}

// mdLeaderboard is the ranking's table: each target's rank (tied ones
// marked), score and interval, its success and goodput ratios, and
// whether a cell of it is below min_success.
func mdLeaderboard(b *strings.Builder, rk *report.RankingResult) {
	b.WriteString("## Leaderboard\n\n")
	if len(rk.Entries) == 0 {
		b.WriteString("No target was ranked.")
		if rk.Note != "" {
			b.WriteString(" " + report.MarkdownCell(rk.Note) + ".")
		}
		b.WriteString("\n\n")
	} else {
		fmt.Fprintf(b, "Score: weighted mean of %s (`=` marks a rank tied with its neighbour at %s confidence); %s. %s.\n\n",
			strings.Join(rk.Components, ", "), strconv.FormatFloat(rk.Confidence, 'g', -1, 64), floorRule(rk.MinSuccess), ratiosNote)
		b.WriteString("| rank | target | score | interval | success | goodput | flags |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, e := range rk.Entries {
			tie := ""
			if e.Tied {
				tie = "="
			}
			flag := ""
			if e.BelowMinSuccess {
				flag = "below min_success"
			}
			fmt.Fprintf(b, "| %s%d | %s | %s | %s – %s | %s | %s | %s |\n", tie, e.Rank, report.MarkdownCell(e.Target), report.MarkdownRatio(e.Score), report.MarkdownRatio(e.ScoreCI.Lo), report.MarkdownRatio(e.ScoreCI.Hi),
				ConsoleRatio(e.SuccessRatio), ConsoleRatio(e.GoodputRatio), flag)
		}
		b.WriteString("\n")
	}
}

// writeMarkdownPrecision writes the Precision section: each judged
// repeat's effective requests and its percentiles' margins.
func writeMarkdownPrecision(b *strings.Builder, r *report.Report) {
	var precision []string
	for _, c := range r.Cells {
		for _, rep := range c.Repeats {
			if n := PrecisionNote(rep.Precision); n != "" {
				precision = append(precision, fmt.Sprintf("| %s | %d | %s |", report.MarkdownCell(c.Key), rep.Index+1, report.MarkdownCell(n)))
			}
		}
	}
	if len(precision) > 0 {
		b.WriteString("## Precision\n\nPer repeat: the successful requests' worth in independent ones (their serial correlation taken out), each percentile's margin of error at 95%, and the percentiles too few requests lie beyond to be more than indicative.\n\n| cell | repeat | precision |\n| --- | --- | --- |\n")
		b.WriteString(strings.Join(precision, "\n") + "\n\n")
	}
}
