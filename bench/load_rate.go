package bench

import (
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// promptLoad is what an open-loop rate and a closed loop share once built:
// they draw the run's prompt set through a cursor, and their warm-up
// lasts until the pipeline is full (a shard's is the configured one).
type promptLoad struct {
	sched  workload.Schedule
	lim    workload.Limits
	cursor *PromptCursor
	// fixedWarmup says the warm-up is the configured one: a shard cannot
	// see the other shards' requests, so cannot tell when the run's
	// pipeline filled (newRecorderFixed).
	fixedWarmup bool
}

func (l *promptLoad) limits() workload.Limits { return l.lim }

// length is the warm-up and the duration.
func (l *promptLoad) length(p repeatPlan) time.Duration { return p.warmup + p.duration }

// windows are the planned ones: the stability check may extend them.
func (l *promptLoad) windows(w repeatWindows) repeatWindows { return w }

// recorder starts at t0; its warm-up lasts until the pipeline is full, at
// most bench.max_warmup (the configured warm-up plus the measured
// duration).
func (l *promptLoad) recorder(spec *Spec, p repeatPlan, t0 time.Time, window time.Duration) (*recorder, time.Time) {
	seed := uint64(spec.Seed) ^ hashString(p.cell) + uint64(p.index)
	if l.fixedWarmup {
		return newRecorderFixed(t0, p.warmup, window, spec.SLO, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, seed), t0
	}
	return newRecorder(t0, p.warmup, spec.warmupBound(p.warmup, p.duration), window, spec.SLO, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, seed), t0
}

// source is the open loop: the schedule's arrivals, each with the next
// prompt of the cursor.
func (l *promptLoad) source(stop *stopSchedule) (workload.Source, workload.Observer) {
	stop.inner = l.sched
	return workload.OpenLoop{Schedule: stop, Prompts: l.cursor}, nil
}

// finish adds the warm-up the recorder decided, the prompts drawn, and
// the verdict on every window measured (a sweep's point too: its pass
// rule asks whether the latency grew). The last decision judged the same
// windows; the requests that ended since count.
func (l *promptLoad) finish(res *report.RepeatResult, e *repeatEnd) (warmup time.Duration, cut bool) {
	warmup, cut = e.rec.warmupUsed()
	res.WarmupSeconds, res.WarmupEndedBy = warmup.Seconds(), e.rec.warmupEndedBy()
	res.PromptsDrawn = l.cursor.Drawn
	if e.ext.win.check || e.p.trendWindows > 0 {
		res.Stability.Checked = true
		v := e.ext.judge()
		res.Precision = precisionOf(e.smp, res.Stats.Successes, v.Inflation)
	}
	return warmup, cut
}

// rateLoad is an open-loop rate: the matrix's arrival process at the
// cell's rate.
type rateLoad struct{ promptLoad }

// newRateLoad builds the rate as the exporter builds a workload's
// (plan.Open); a shard sends its arrivals of the shared schedule, each with
// the prompt a single process would have given it.
func newRateLoad(spec *Spec, shard Shard, prompts *PromptSet, p repeatPlan) (*rateLoad, error) {
	a := spec.Matrix.Arrival
	a.Rate = p.group.load.Value
	ol, err := plan.Open(a.WithDefaults(), spec.Seed, degradedLag)
	if err != nil {
		return nil, err
	}
	l := &rateLoad{promptLoad{sched: ol.Schedule, cursor: prompts.Cursor(p.target.Name, p.group.name, p.index),
		lim: workload.Limits{MaxInFlight: spec.MaxInFlight, MaxRate: ol.MaxRate, Burst: 1}}}
	if shard.On() {
		l.sched = &shardSchedule{inner: l.sched, shard: shard}
		l.cursor.i, l.cursor.stride = shard.Index%len(l.cursor.list), shard.Count
		l.fixedWarmup = true
	}
	return l, nil
}
