package report

import (
	"time"
)

// History is `bench compare`'s result: the cells of several runs matched
// by target, load and shape, and every figure of each across the runs,
// judged against the first run. Its JSON is --output's file.
type History struct {
	Runs []HistoryRun `json:"runs"`
	// Threshold and Confidence are the gate's: a change is worse (or
	// better) when its interval, at Confidence held together over the
	// figures judged between two runs, lies wholly beyond Threshold.
	Threshold  float64 `json:"threshold"`
	Confidence float64 `json:"confidence"`
	// Warnings say what makes the runs less comparable: prompt sets or
	// configurations that differ, degraded measurements.
	Warnings []string `json:"warnings,omitempty"`
	// Unmatched name the cells not in every run, and where they lack.
	Unmatched []string      `json:"unmatched,omitempty"`
	Cells     []HistoryCell `json:"cells"`
}

// HistoryRun is one compared report.
type HistoryRun struct {
	File     string    `json:"file"`
	RunID    string    `json:"run_id"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
}

// HistoryCell is one cell (target, load, shape) across the runs.
type HistoryCell struct {
	Target  string          `json:"target"`
	Load    Load            `json:"load"`
	Shape   string          `json:"shape"`
	Figures []HistoryFigure `json:"figures"`
}

// HistoryFigure is one figure of a cell across the runs: each slice has
// one entry a run, in the runs' order. A run without the cell or the
// figure has a null value, interval and change, and an empty verdict.
type HistoryFigure struct {
	Name           string `json:"name"`
	HigherIsBetter bool   `json:"higher_is_better,omitempty"`
	Values         []Num  `json:"values"`
	// Intervals are the runs' own intervals of the figure (null where a
	// run has none).
	Intervals []*Interval `json:"intervals"`
	// Changes are value/first - 1; ChangeIntervals their intervals.
	Changes         []Num       `json:"changes"`
	ChangeIntervals []*Interval `json:"change_intervals"`
	// Verdicts are each run's against the first: better, worse, same or
	// inconclusive (HistoryBetter, ...); the first run's is empty.
	Verdicts []string `json:"verdicts"`
}

// The verdicts of HistoryFigure.Verdicts, from the gate's rule
// (GateVerdict) applied both ways: worse when the change is a regression
// beyond the threshold and noise, better when its opposite is one, same
// when neither direction can reach the threshold, else inconclusive.
const (
	HistoryBetter       = "better"
	HistoryWorse        = "worse"
	HistorySame         = "same"
	HistoryInconclusive = "inconclusive"
)

// HistoryVerdict names a change whose interval is lo..hi: the gate's
// verdict (GateVerdict) of the change as it stands and of its opposite.
func HistoryVerdict(lo, hi, threshold float64, higherIsBetter bool) string {
	worse := GateVerdict(lo, hi, threshold, higherIsBetter)
	better := GateVerdict(lo, hi, threshold, !higherIsBetter)
	switch {
	case worse == VerdictRegressed:
		return HistoryWorse
	case better == VerdictRegressed:
		return HistoryBetter
	case worse == VerdictOK && better == VerdictOK:
		return HistorySame
	}
	return HistoryInconclusive
}

// RunID names a run in `bench compare` and in the exported series (label
// run_id): the instant it started, UTC, to the second (RFC 3339). Two runs
// of one matrix never start in the same second on one machine, and the
// name sorts as the runs do.
func RunID(r *Report) string {
	return r.Environment.Started.UTC().Format(time.RFC3339)
}
