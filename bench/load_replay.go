package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/replay"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// replayLoad is a trace's replay: its rows, each at its trace instant with
// its own request, the same rows to every target. Its warm-up is the
// configured one on the trace's clock, it is never extended, and its
// stability is judged afterwards on the windows the trace filled.
type replayLoad struct {
	sched workload.Schedule
	rows  workload.Requests
	lim   workload.Limits
	// looping says the trace starts over at its end: such a replay never
	// ends on its own and is cut at warm-up + duration.
	looping bool
	// rec hears the rows replayed; res is the replay's part of the
	// repeat's result.
	rec *replayRecorder
	res *report.ReplayResult
}

// newReplayLoad builds the replay as the exporter builds a replay
// workload's (replay.OptionsOf), with words of the repeat's own; a shard
// sends its rows of the shared trace.
func newReplayLoad(spec *Spec, shard Shard, traces map[string]*replay.Trace, p repeatPlan) (*replayLoad, error) {
	r := p.group.replay
	l := &replayLoad{looping: r.Loop,
		rec: newReplayRecorder(spec.MaxSamplesPerRepeat, uint64(spec.Seed)^hashString(p.cell)+uint64(p.index))}
	src, err := replaySource(traces[r.Name], r, p.target, replaySalt(r, p.index), l.rec)
	if err != nil {
		return nil, err
	}
	l.res = &report.ReplayResult{Rows: int(float64(src.Records())*r.Sample + 0.5), WindowSeconds: src.Window().Seconds(),
		Words: replayWords(r, src)}
	if r.Sample >= 1 {
		l.res.Rows = src.Records()
	}
	l.sched, l.rows = src.Schedule(), src.Prompts()
	l.lim = workload.Limits{MaxInFlight: spec.MaxInFlight, MaxRate: src.MaxRate(), Burst: src.Burst()}
	if shard.On() {
		l.sched = &shardSchedule{inner: l.sched, shard: shard}
	}
	return l, nil
}

// replaySource prepares a fresh replay of a trace against a target, as the
// exporter's replay workloads do (the trace is read once per run).
func replaySource(tr *replay.Trace, r *ReplaySpec, t *config.Target, salt uint64, rec replay.Recorder) (*replay.Source, error) {
	_, opts, err := replay.OptionsOf(&r.Replay, t)
	if err != nil {
		return nil, err
	}
	opts.WordSalt, opts.Recorder = salt, rec
	return replay.NewSource(tr, opts)
}

func (l *replayLoad) limits() workload.Limits { return l.lim }

// length is the trace's window at its speed, or, looping, the warm-up and
// the duration; its clock starts ReplayLead late.
func (l *replayLoad) length(p repeatPlan) time.Duration {
	if !l.looping {
		return workload.ReplayLead + time.Duration(l.res.WindowSeconds*float64(time.Second))
	}
	return workload.ReplayLead + p.warmup + p.duration
}

// windows are never extended: a replay sends its whole window, the same
// rows to every target, and its stability is judged afterwards on the
// windows the trace filled; only a looping one is cut, at warm-up +
// duration.
func (l *replayLoad) windows(w repeatWindows) repeatWindows {
	w.check, w.most = false, w.base
	return w
}

// recorder counts from the trace's clock, which the runner starts
// ReplayLead late, to prepare the first rows; its warm-up is the
// configured one, so that every target measures the same rows.
func (l *replayLoad) recorder(spec *Spec, p repeatPlan, t0 time.Time, window time.Duration) (*recorder, time.Time) {
	seed := uint64(spec.Seed) ^ hashString(p.cell) + uint64(p.index)
	clock := t0.Add(workload.ReplayLead)
	return newRecorderAt(clock.Add(p.warmup), window, spec.SLO, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, seed), clock
}

// source sends the rows in lockstep with their instants. A replay that
// does not loop has no limit: the trace's end ends the repeat.
func (l *replayLoad) source(stop *stopSchedule) (workload.Source, workload.Observer) {
	stop.inner = l.sched
	if !l.looping {
		stop.resolve, stop.limit = nil, time.Duration(math.MaxInt64)
	}
	return workload.Lockstep{Schedule: stop, Requests: l.rows}, nil
}

// finish adds the replay's result to the repeat's, and, when the repeat is
// judged, its stability, afterwards, on the windows the trace filled: a
// replay is never extended, its rows are the trace's. Its warm-up is the
// configured one, on the trace's clock.
func (l *replayLoad) finish(res *report.RepeatResult, e *repeatEnd) (warmup time.Duration, cut bool) {
	res.WarmupSeconds, res.WarmupEndedBy = e.p.warmup.Seconds(), report.WarmupTrace
	l.rec.result(l.res)
	l.res.Clamped = e.stop.Clamped()
	// Every row dropped, the warm-up's too: a row not sent is lost to the
	// replay wherever it fell.
	l.res.Dropped = e.rec.droppedRows()
	if l.looping {
		l.res.Cut = replayCut(time.Duration(res.WarmupSeconds*float64(time.Second)).Round(time.Millisecond), time.Duration(e.k)*e.window)
	}
	res.Replay = l.res
	if e.judge {
		l.judge(res, e)
	}
	return e.p.warmup, false
}

// judge judges the replay over its complete windows only: the trace's
// last, partial window holds its stragglers, not the server's steady
// state.
func (l *replayLoad) judge(res *report.RepeatResult, e *repeatEnd) {
	complete := e.k
	if e.stop.ended {
		span := time.Duration(res.Stats.WindowSeconds * float64(time.Second))
		complete = int(span / e.window)
	}
	if complete < 1 {
		res.Stability.Note = fmt.Sprintf("not judged: the trace filled no complete window of %s", e.window)
		return
	}
	res.Stability.Checked, res.Stability.Windows = true, complete
	setVerdict(&res.Stability, e.rec.judge(complete, time.Duration(complete)*e.window, e.ext.rule))
}

// replayRecorder hears one replay repeat (replay.Recorder): every row's
// drift from its trace instant, in a uniform sample of at most max values,
// and the rows replayed. Its methods run on the request goroutines.
type replayRecorder struct {
	mu    sync.Mutex
	rng   *rand.Rand
	max   int
	drift []float64
	seen  int
	rows  int
}

var _ replay.Recorder = (*replayRecorder)(nil)

func newReplayRecorder(maxSamples int, seed uint64) *replayRecorder {
	return &replayRecorder{rng: rand.New(rand.NewPCG(seed, 0xd1f7)), max: max(1, maxSamples)}
}

// Replayed implements replay.Recorder.
func (r *replayRecorder) Replayed(float64) {
	r.mu.Lock()
	r.rows++
	r.mu.Unlock()
}

// Drift implements replay.Recorder.
func (r *replayRecorder) Drift(_ time.Time, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	switch {
	case len(r.drift) < r.max:
		r.drift = append(r.drift, d.Seconds())
	default:
		if j := r.rng.IntN(r.seen); j < r.max {
			r.drift[j] = d.Seconds()
		}
	}
}

// result fills what the recorder heard into res.
func (r *replayRecorder) result(res *report.ReplayResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Replayed = r.rows
	res.Drift = summarize(append([]float64(nil), r.drift...))
	res.Degraded = res.Drift.Count > 0 && res.Drift.P99 > degradedLag.Seconds()
}

// replaySalt is the word salt a repeat gives its replay: its index under
// per_repeat (0, the first repeat's, is also the words of the exporter's
// replay of the same trace and seed), 0 under reuse.
func replaySalt(r *ReplaySpec, index int) uint64 {
	if r.Words == WordsReuse {
		return 0
	}
	return uint64(index)
}

// replayWords names what a repeat's prompts held.
func replayWords(r *ReplaySpec, src *replay.Source) string {
	if src.Bodies() {
		return "recorded"
	}
	if r.Words == WordsReuse {
		return WordsReuse
	}
	return WordsPerRepeat
}

// replayCut says where a looping replay was cut.
func replayCut(warmup, duration time.Duration) string {
	return fmt.Sprintf("a looping replay never ends: cut at the warm-up plus the duration (%s + %s)", warmup, duration)
}
