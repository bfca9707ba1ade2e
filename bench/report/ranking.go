package report

import (
	"encoding/json"
	"time"
)

// DefaultLatencyMetric is the ranking's latency figure when the
// configuration names none (RankingResult.LatencyFigure).
const DefaultLatencyMetric = "e2e_p50"

// RankingResult is the leaderboard.
//
// Each target's composite score is the weighted mean of its component
// scores, over the components available (weights renormalised to sum 1):
//
//   - latency: per cell group (a load and a shape), ref / latency, where
//     latency is the ranking's figure (default e2e_p50) and ref is
//     references.latency or else the lowest latency of any target in the
//     group; averaged over groups. 1 is the best target.
//   - throughput: per group, output tokens/s / ref, ref being
//     references.throughput or the highest of the group; averaged.
//   - memory: ref / peak GPU memory used while the target was measured, ref
//     being references.memory_bytes or the lowest peak; only when every
//     target has a peak (NVML present).
//   - accuracy: the mean of the sub-scores that exist: the fraction of
//     known-answer checks passed, lowest perplexity / this perplexity, and
//     the share of answers valid where they were checked (structured
//     output and tool calls, Stats.StructuredChecks and ToolCallChecks,
//     pooled over the target's cells); only when one of them exists.
//   - efficiency: per group, the lowest joules per output token of any
//     target / this target's; averaged; only when every target has the
//     figure in every group (NVML present). Its weight defaults to 0.
//
// A target with a cell whose success ratio (SuccessRatio) is below
// MinSuccess (CellResult.BelowMinSuccess) ranks below every target without
// one, whatever its score: latency and throughput are measured on
// successes alone, so a server that fails fast would otherwise rank first.
// Among themselves, the targets on each side of the floor are ordered by
// score.
//
// The intervals come from the bootstrap: each resample draws every
// repeat's requests with replacement (and each target's known-answer
// checks), recomputes every cell's figures, the scores and the ranks (the
// floor's sides kept: which cells are below it is not resampled). The
// score and rank intervals are the central intervals of those resamples.
// Sorted by the floor, then by score, a target whose rank interval
// overlaps the previous target's is tied with it and shown with the same
// rank.
type RankingResult struct {
	LatencyFigure string   `json:"latency_figure"`
	Weights       Weights  `json:"weights"`
	References    RefsJSON `json:"references"`
	Confidence    float64  `json:"confidence"`
	Resamples     int      `json:"resamples"`
	// MinSuccess is bench.min_success, the success ratio every cell is
	// held to.
	MinSuccess float64 `json:"min_success"`
	// Components are the components that were scored.
	Components []string    `json:"components"`
	Entries    []RankEntry `json:"entries"`
	Note       string      `json:"note,omitempty"`
}

// RefsJSON is References in base units.
type RefsJSON struct {
	LatencySeconds float64 `json:"latency_seconds"`
	Throughput     float64 `json:"output_tokens_per_second"`
	MemoryBytes    float64 `json:"memory_bytes"`
}

// RankEntry is one target on the leaderboard.
type RankEntry struct {
	Target string `json:"target"`
	// Rank is the displayed rank: tied targets share the best rank of their
	// group. Position is the place by the floor, then the point score
	// (1-based).
	Rank     int      `json:"rank"`
	Position int      `json:"position"`
	Tied     bool     `json:"tied"`
	Score    float64  `json:"score"`
	ScoreCI  Interval `json:"score_ci"`
	RankLo   int      `json:"rank_lo"`
	RankHi   int      `json:"rank_hi"`
	// Component scores; null when the component was not scored.
	Latency    Num `json:"latency_score"`
	Throughput Num `json:"throughput_score"`
	Memory     Num `json:"memory_score"`
	Accuracy   Num `json:"accuracy_score"`
	Efficiency Num `json:"efficiency_score"`
	// PeakMemoryBytes is the peak GPU memory used; null without NVML.
	PeakMemoryBytes Num `json:"peak_memory_bytes"`
	// SuccessRatio is the target's successful measured requests over
	// those sent (as SuccessRatio's of a cell), GoodputRatio those that
	// also met the SLO over its measured requests, dropped ones included
	// (as a cell's goodput_ratio), each pooled over all its cells and
	// repeats; null when there were none, and in reports written before
	// them.
	SuccessRatio Num `json:"success_ratio"`
	GoodputRatio Num `json:"goodput_ratio"`
	// BelowMinSuccess: a cell of the target is below MinSuccess, so it
	// ranks below every target without one.
	BelowMinSuccess bool `json:"below_min_success,omitempty"`
}

// UnmarshalJSON reads an entry, its ratios null when the report has none
// (one written before them): not 0, which would say that nothing
// succeeded.
func (e *RankEntry) UnmarshalJSON(b []byte) error {
	type plain RankEntry
	p := plain{SuccessRatio: NaN(), GoodputRatio: NaN()}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = RankEntry(p)
	return nil
}

// Comparison is a report compared with a baseline report, cell by cell.
//
// For every cell present in both, it compares e2e_p50, e2e_p99 and
// output_tokens_per_second, and the gated figures (regression.metrics,
// default DefaultGated in the bench). Each gated figure gets a Verdict by
// GateVerdict's rule on the interval of its change: regressed when the
// whole interval is worse than the threshold, ok when the whole interval
// is better than a worsening of the threshold, inconclusive otherwise.
// The interval combines both reports' bootstrap intervals on the log
// scale, as independent normal errors: se = sqrt(se_old² + se_new²) with
// se = (ln hi - ln lo) / (2 z), z the normal quantile of the confidence;
// the change's interval is (new/old)·exp(±z·se) - 1, and the smallest
// change the two runs could tell from noise is exp(z·se) - 1
// (Detectable). A figure without an interval in either report is
// inconclusive.
type Comparison struct {
	BaselineFile    string    `json:"baseline_file"`
	BaselineStarted time.Time `json:"baseline_started"`
	Threshold       float64   `json:"threshold"`
	Confidence      float64   `json:"confidence"`
	// Simultaneous is the number of gated figures (of every cell) judged
	// with an interval: their intervals hold together at Confidence
	// (Bonferroni, each at 1 - (1-Confidence)/Simultaneous), so that an
	// unchanged run is regressed in at most 1 - Confidence of reruns
	// however many cells and figures it has. The ungated figures'
	// intervals are each at Confidence.
	Simultaneous int              `json:"simultaneous"`
	Gated        []string         `json:"gated"`
	Warnings     []string         `json:"warnings,omitempty"`
	Cells        []CellComparison `json:"cells"`
	// Regressions name the regressed cells and figures, "cell: figure".
	Regressions []string `json:"regressions"`
	// Unmatched are cells present in only one of the reports.
	Unmatched []string `json:"unmatched,omitempty"`
	// Verdict is the run's: the worst of its gated figures' (regressed,
	// then inconclusive, then ok); inconclusive when no gated figure was
	// compared. Inconclusive names the inconclusive ones as Regressions
	// does; OK counts the ok ones.
	Verdict      Verdict  `json:"verdict"`
	Inconclusive []string `json:"inconclusive"`
	OK           int      `json:"ok"`
}

// CellComparison is one figure of one cell.
type CellComparison struct {
	Cell   string  `json:"cell"`
	Figure string  `json:"figure"`
	Old    float64 `json:"old"`
	New    float64 `json:"new"`
	// Change is new/old - 1; ChangeLo and ChangeHi its interval.
	Change    float64 `json:"change"`
	ChangeLo  Num     `json:"change_lo"`
	ChangeHi  Num     `json:"change_hi"`
	Gated     bool    `json:"gated"`
	Regressed bool    `json:"regressed"`
	// HigherIsBetter says the figure is better higher (throughput,
	// ratios): its worsening is a fall.
	HigherIsBetter bool `json:"higher_is_better,omitempty"`
	// Detectable is the smallest change the two runs could tell from
	// noise, exp(z·se) - 1 (the half-width of the change's interval, on
	// the log scale, as a relative change); null without an interval. An
	// unchanged figure is ok only when its Detectable is below the
	// threshold.
	Detectable Num `json:"detectable_change"`
	// Verdict is the gate's on a gated figure (GateVerdict); "" on one
	// only shown.
	Verdict Verdict `json:"verdict,omitempty"`
}
