package bench

import (
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// repeatTimes are where the run's repeats lay in time: each one's span on
// the run's timeline, from its start to its end (the report's and the GPU
// report's), and where its measured windows lay (for its energy:
// fillEfficiency).
type repeatTimes struct {
	start   time.Time // the run's
	spans   []report.Span
	windows map[spanKey]measuredSpan
}

// add puts a repeat that ran from t0 to end on the run's timeline.
func (t *repeatTimes) add(p repeatPlan, t0, end time.Time) {
	t.spans = append(t.spans, report.Span{Target: p.target.Name, Cell: p.cell, Repeat: p.index,
		Start: t0.Sub(t.start).Seconds(), End: end.Sub(t.start).Seconds()})
}

// measured records where a repeat's measured windows lie in time.
func (t *repeatTimes) measured(cell string, repeat int, from time.Time, secs float64) {
	if t.windows == nil {
		t.windows = map[spanKey]measuredSpan{}
	}
	t.windows[spanKey{cell, repeat}] = measuredSpan{from: from, secs: secs}
}
