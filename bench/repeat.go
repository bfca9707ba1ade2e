package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/bench/stability"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/replay"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// repeatLoad is what one load kind's builder gives a repeat (rateLoad,
// closedLoad, replayLoad): the source's schedule and its requests, its
// limits, and what the kind adds to the repeat's result.
type repeatLoad struct {
	sched workload.Schedule
	// rows are a replay's requests, which belong to its instants; a load
	// without them draws the run's prompt set through cursor.
	rows   workload.Requests
	cursor *PromptCursor
	// observer, when set, follows the requests for the load itself (the
	// closed loop: the slot each ended request frees).
	observer workload.Observer
	// limits are the in-flight cap, the max rate and the largest group of
	// sends on one instant (a replay's).
	limits workload.Limits
	// replay is a replay's own part of the repeat.
	replay *replayRun
	// none says this shard has none of the load (a closed loop's clients
	// all went to other shards): the repeat sends nothing.
	none bool
}

// source is the load as the runner drives it, its schedule ending where
// stop says.
func (l *repeatLoad) source(stop workload.Schedule) workload.Source {
	if l.rows != nil {
		return workload.Lockstep{Schedule: stop, Requests: l.rows}
	}
	return workload.OpenLoop{Schedule: stop, Prompts: l.cursor}
}

// buildLoad builds the repeat's load by its kind, then gives it the run's
// prompt set and, for a shard, its share of the schedule.
func (b *run) buildLoad(ctx context.Context, p repeatPlan) (repeatLoad, error) {
	var l repeatLoad
	var err error
	switch kind := p.group.load.Kind; kind {
	case report.LoadRate:
		l, err = b.rateLoad(p)
	case report.LoadConcurrency:
		l = b.closedLoad(ctx, p)
	case report.LoadReplay:
		l, err = b.replayLoad(p)
	default:
		err = fmt.Errorf("unknown load kind %q", kind)
	}
	if err != nil {
		return repeatLoad{}, fmt.Errorf("cell %s: %w", p.cell, err)
	}
	if l.none {
		return l, nil
	}
	if l.rows == nil {
		l.cursor = b.prompts.Cursor(p.target.Name, p.group.name)
	}
	if sh := b.opts.Shard; sh.On() && l.observer == nil {
		// This shard's arrivals of the shared schedule, each with the
		// prompt a single process would have given it.
		l.sched = &shardSchedule{inner: l.sched, shard: sh}
		if l.cursor != nil {
			l.cursor.i, l.cursor.stride = sh.Index%len(l.cursor.list), sh.Count
		}
	}
	return l, nil
}

// rateLoad is an open-loop rate: the matrix's arrival process at the
// cell's rate, built as the exporter builds a workload's (plan.Open).
func (b *run) rateLoad(p repeatPlan) (repeatLoad, error) {
	a := b.spec.Matrix.Arrival
	a.Rate = p.group.load.Value
	ol, err := plan.Open(a.WithDefaults(), b.spec.Seed, degradedLag)
	if err != nil {
		return repeatLoad{}, err
	}
	return repeatLoad{sched: ol.Schedule, limits: workload.Limits{MaxInFlight: b.spec.MaxInFlight, MaxRate: ol.MaxRate, Burst: 1}}, nil
}

// closedLoad is a closed loop of the cell's clients (a shard's share of
// them), each sending its next request when its previous one ends.
func (b *run) closedLoad(ctx context.Context, p repeatPlan) repeatLoad {
	clients := int(p.group.load.Value)
	if b.opts.Shard.On() {
		clients = b.opts.Shard.share(clients)
	}
	if clients == 0 {
		return repeatLoad{none: true}
	}
	closed := newClosedLoop(ctx, clients)
	return repeatLoad{sched: closed, observer: closed, limits: workload.Limits{MaxInFlight: clients, Burst: 1}}
}

// replayLoad is a trace's replay, built as the exporter builds a replay
// workload's (replay.OptionsOf), with words of the repeat's own.
func (b *run) replayLoad(p repeatPlan) (repeatLoad, error) {
	r := p.group.replay
	rr := &replayRun{looping: r.Loop,
		rec: newReplayRecorder(b.spec.MaxSamplesPerRepeat, uint64(b.spec.Seed)^hashString(p.cell)+uint64(p.index))}
	src, err := b.replaySource(r, p.target, replaySalt(r, p.index), rr.rec)
	if err != nil {
		return repeatLoad{}, err
	}
	rr.res = &report.ReplayResult{Rows: int(float64(src.Records())*r.Sample + 0.5), WindowSeconds: src.Window().Seconds(),
		Words: replayWords(r, src)}
	if r.Sample >= 1 {
		rr.res.Rows = src.Records()
	}
	return repeatLoad{sched: src.Schedule(), rows: src.Prompts(), replay: rr,
		limits: workload.Limits{MaxInFlight: b.spec.MaxInFlight, MaxRate: src.MaxRate(), Burst: src.Burst()}}, nil
}

// repeatWindows are a repeat's measured windows: their length, how many
// are measured at first and at most, and whether the stability check may
// extend them.
type repeatWindows struct {
	window     time.Duration
	base, most int
	check      bool
}

func (b *run) repeatWindows(p repeatPlan, replayed bool) repeatWindows {
	st := b.spec.Stability
	w := repeatWindows{window: p.duration, base: 1, most: 1, check: p.stability && st.On()}
	switch {
	case w.check:
		// A replay's windows are the stability windows too: it is judged
		// afterwards, over every window its trace filled.
		w.window = st.Window
		w.base = wholeWindows(p.duration, w.window)
		w.most = max(w.base, int(st.MaxDuration/w.window))
		if b.opts.Shard.On() {
			// Every shard of a run measures the same windows: none
			// extends on its own share, and bench merge judges the
			// stability on the pooled windows (docs/bench.md).
			w.most = w.base
		}
	case p.trendWindows > 0:
		w.window, w.base, w.most = p.duration/time.Duration(p.trendWindows), p.trendWindows, p.trendWindows
	}
	if replayed {
		// A replay sends its whole window, the same rows to every target,
		// and its stability is judged afterwards on the windows the trace
		// filled; only a looping one is cut, at warm-up + duration.
		w.check, w.most = false, w.base
	}
	return w
}

// wholeWindows is the duration in whole windows, the last one completed:
// a remainder under a microsecond is the window's own rounding (10 s in 3
// windows of 3.333333333 s), not a window more, which would measure a
// third longer than planned.
func wholeWindows(duration, window time.Duration) int {
	return max(1, int((duration-time.Microsecond+window-1)/window))
}

// extension decides, at the end of the base windows and of each
// extension, whether the repeat goes on: while the stability rule cannot
// judge it yet (stability.Extend), to the span the rule says it needs (a
// window more at least), in whole windows, up to the most
// (stability.max_duration). A cell is measured until it is judged, stable
// or unstable, or until the most: then "not judged", with the span it
// would need.
type extension struct {
	rec  *recorder
	win  repeatWindows
	rule stability.Spec
	res  *report.StabilityResult
	// k is the windows measured so far; lead is the part of the warm-up
	// the recorder's clock does not hold (a replay's recorder starts at
	// the warm-up's end, its schedule at the trace's clock).
	k    int
	lead time.Duration
	// looks counts the judgments that extended the span: the rule tests
	// each later one at a stricter level (stability.Spec.Look).
	looks int
	// tell, when set, hears each new limit with why it is not the plan
	// (the progress bar, the log): settled is false while the warm-up goes
	// on past its configured length, the limit then a floor that grows.
	tell func(limit time.Duration, why string, settled bool)
	// warmWhy and extWhy are the reasons so far: a longer warm-up, an
	// extension.
	warmWhy, extWhy string
}

// say tells the limit and every reason so far, joined.
func (e *extension) say(limit time.Duration, settled bool) {
	if e.tell == nil {
		return
	}
	var why []string
	for _, w := range []string{e.warmWhy, e.extWhy} {
		if w != "" {
			why = append(why, w)
		}
	}
	e.tell(limit, strings.Join(why, "; "), settled)
}

// first is the first limit: the end of the base windows after the warm-up,
// once the warm-up is known. Until then, past the configured warm-up, the
// limit is at least the base windows from now (the warm-up ends at a
// completion still to come), and is told as such.
func (e *extension) first() (time.Duration, bool) {
	now := time.Now()
	w, ok := e.rec.warmup(now)
	base := time.Duration(e.k) * e.win.window
	if !ok {
		if past := now.Sub(e.rec.t0); past > e.rec.minWarmup {
			e.warmWhy = "warm-up: until the pipeline is full"
			e.say(e.lead+past+base, false)
		}
		return 0, false
	}
	e.warmWhy = ""
	// A tenth of a second's slack: what the bar's one decimal shows.
	if w > e.rec.minWarmup+100*time.Millisecond {
		e.warmWhy = fmt.Sprintf("warm-up extended to %.1f s, until the pipeline was full", w.Seconds())
		if _, cut := e.rec.warmupUsed(); cut {
			e.warmWhy = fmt.Sprintf("warm-up cut at its bound, %.1f s: the pipeline had not filled", w.Seconds())
		}
	}
	limit := e.lead + w + base
	e.say(limit, true)
	return limit, true
}

// judge judges the k windows measured so far.
func (e *extension) judge() stability.Verdict {
	rule := e.rule
	rule.Look = e.looks
	v := e.rec.judge(e.k, time.Duration(e.k)*e.win.window, rule)
	setVerdict(e.res, v)
	return v
}

func (e *extension) decide() (time.Duration, bool) {
	if !e.win.check {
		return 0, false
	}
	v := e.judge()
	need, ok := stability.Extend(v, time.Duration(e.k)*e.win.window, e.win.window, time.Duration(e.win.most)*e.win.window)
	if !ok {
		return 0, false
	}
	k := min(int(math.Ceil(float64(need)/float64(e.win.window))), e.win.most)
	if k <= e.k {
		return 0, false
	}
	e.res.Extended += k - e.k
	e.k = k
	e.looks++
	w, _ := e.rec.warmup(time.Now())
	limit := w + time.Duration(e.k)*e.win.window
	e.extWhy = extensionWhy(time.Duration(e.k)*e.win.window, v)
	e.say(limit, true)
	return limit, true
}

// extensionWhy is a stability extension's reason in a few words: the
// measured time it extends to, and why the span so far was not judged.
func extensionWhy(measured time.Duration, v stability.Verdict) string {
	if math.IsNaN(v.Growth) {
		return fmt.Sprintf("extended to %s measured: not judged yet (%d requests)", measured, v.N)
	}
	return fmt.Sprintf("extended to %s measured: not judged yet (drift %+.0f%% ± %.0f%%)", measured, v.Growth*100, 50*(v.GrowthHi-v.GrowthLo))
}

// repeat runs one repeat through the exporter's own runner and client, so
// that bench and exporter measure identically.
func (b *run) repeat(ctx context.Context, p repeatPlan) (report.RepeatResult, *sample, error) {
	l, err := b.buildLoad(ctx, p)
	if err != nil {
		return report.RepeatResult{}, nil, err
	}
	var agreed time.Time
	if b.clock != nil {
		// Taken even by a shard without a share of the cell: every shard
		// plans every repeat, so that they agree on the next one's start.
		agreed = b.clock.plan(b.plannedLength(p, &l))
	}
	if l.none {
		return report.RepeatResult{Index: p.index, Stats: report.Stats{Outcomes: map[string]int{}}, Stability: report.StabilityResult{Growth: report.NaN(), GrowthLow: report.NaN(), GrowthHigh: report.NaN(), NeedSeconds: report.NaN(),
			Step: report.NaN(), StepAtSeconds: report.NaN(), EffectiveRequests: report.NaN(),
			Note: "this shard has none of the cell's clients"}}, &sample{scale: 1}, nil
	}
	// The shape's tools, response format and images, and the judge of its
	// answers (none for a replay: a recorded body carries its own).
	var kinds *plan.Kinds
	if sh := p.group.shape; sh != nil {
		if kinds, err = plan.NewKinds(&sh.RequestKinds); err != nil {
			return report.RepeatResult{}, nil, fmt.Errorf("cell %s: %w", p.cell, err)
		}
	}
	win := b.repeatWindows(p, l.replay != nil)
	cl := client.New(client.Options{MaxConnsPerHost: l.limits.MaxInFlight})
	defer cl.Close()

	res := report.RepeatResult{Index: p.index, Stability: report.StabilityResult{Checked: win.check, WindowSeconds: win.window.Seconds(),
		Growth: report.NaN(), GrowthLow: report.NaN(), GrowthHigh: report.NaN(), NeedSeconds: report.NaN(),
		Step: report.NaN(), StepAtSeconds: report.NaN(), EffectiveRequests: report.NaN()}}
	t0, started, err := b.startRepeat(ctx, p, agreed)
	if err != nil {
		return report.RepeatResult{}, nil, err
	}
	rec, clock := b.repeatRecorder(p, t0, win.window, l.replay != nil)
	rec.inFlightCap = l.limits.MaxInFlight
	lvl := slog.LevelInfo
	if b.progress != nil {
		lvl = slog.LevelDebug // the bar says it
	}
	ext := &extension{rec: rec, win: win, rule: b.spec.Stability.Rule(), res: &res.Stability, k: win.base,
		tell: func(limit time.Duration, why string, settled bool) {
			// The bar's length follows the limit; the log says once why
			// the repeat runs longer than planned.
			b.progress.limit(clock.Add(limit), why)
			if settled && why != "" {
				b.logger.Log(ctx, lvl, "repeat longer than planned", "cell", p.cell, "repeat", p.index+1, "until", limit.Round(time.Millisecond), "why", why)
			}
		}}
	if l.replay != nil {
		ext.lead = p.warmup
	}
	fw := newFailWatch()
	stop := &stopSchedule{inner: l.sched, ctx: ctx, t0: clock, resolve: ext.first, decide: ext.decide, halt: fw.halt}
	if l.replay != nil && !l.replay.looping {
		// No limit: the trace's end ends the repeat.
		stop.resolve, stop.limit = nil, time.Duration(math.MaxInt64)
	}
	ro := b.repeatObservers(p, rec, l.observer)
	ro.observers = append(ro.observers, fw)
	// The wire ceiling is the plan's: the open loop's, or the replay's with
	// room for its largest group; a closed loop (no max rate) has none.
	limits := l.limits
	limits.DegradedLag = degradedLag
	runnerPlan := workload.Plan{
		Name: ro.prefix, Target: p.ct, Source: l.source(stop), Client: cl, Observer: ro.observers, Monitor: ro.monitor, Tracer: ro.tracer,
		Template: plan.Template{Sampling: b.spec.Sampling, Timeout: p.target.Timeout, Kinds: kinds},
		Limits:   limits, Logger: b.logger, Saturation: b.sched,
	}
	if b.clock != nil {
		// The agreed instant, every shard's: their arrivals are due
		// together (the recorder's clock counts from it too).
		runnerPlan.Start = t0
	}
	runner := runnerPlan.Runner()
	// The requests in flight when it stops early end on their own (a
	// refusal is quick), within their timeout at most.
	fw.drain = func() { runner.Drain(p.target.Timeout) }
	// The schedule's origin, the agreed instant with the shards' clock;
	// how late this host woke after it is apart.
	res.Started = t0
	if b.clock != nil {
		res.WakeupLateSeconds = report.Num(started.Sub(agreed).Seconds())
	}
	runner.Run(ctx)
	end := time.Now()
	res.FirstError, res.StoppedEarly = fw.result()
	if err := ctx.Err(); err != nil {
		err = fmt.Errorf("cell %s: interrupted: %w", p.cell, err)
		measured := end.Sub(rec.warmupEndAt())
		if !p.keepPartial || measured <= 0 {
			// Nothing to keep, or nothing measured yet (the interrupt
			// came in the warm-up).
			if ro.requests != nil {
				ro.requests.flushInterrupted() // its requests were sent: their records are written
			}
			return report.RepeatResult{}, nil, err
		}
		// What was measured before the interrupt, over the windows it
		// reached: the requests the interrupt cut short are cancelled.
		res.Partial = true
		ext.k = max(1, int(math.Ceil(float64(measured)/float64(win.window))))
		smp := b.finishRepeat(&res, p, &l, rec, stop, ext, end, ro.requests)
		res.Stability.Checked, res.Stability.State, res.Stability.Stable = false, "", nil
		res.Stability.Note = fmt.Sprintf("not judged: interrupted after %.1f s measured", measured.Seconds())
		b.addSpan(p, t0, end)
		return res, smp, err
	}
	if res.StoppedEarly != "" {
		rec.measureAll()
	}
	smp := b.finishRepeat(&res, p, &l, rec, stop, ext, end, ro.requests)
	if res.StoppedEarly != "" {
		res.Stability.Checked, res.Stability.State, res.Stability.Stable, res.Precision = false, "", nil, nil
		res.Stability.Note = "not judged: " + res.StoppedEarly
		b.logger.Warn("repeat stopped early", "cell", p.cell, "repeat", p.index+1, "why", res.StoppedEarly)
	}
	b.addSpan(p, t0, end)
	b.logger.Log(ctx, lvl, "repeat done", "cell", p.cell, "repeat", p.index+1, "requests", res.Stats.Requests,
		"successes", res.Stats.Successes, "e2e_p50", res.Stats.E2E.P50, "stability", stateWord(res.Stability))
	return res, smp, nil
}

// startRepeat is the instant a repeat's schedule starts from, t0, and the
// instant it started, now; with the shards' clock both are the agreed
// instant, which it waits for (agreed), or now when that has passed.
func (b *run) startRepeat(ctx context.Context, p repeatPlan, agreed time.Time) (t0, started time.Time, err error) {
	t0 = time.Now()
	if b.clock == nil {
		return t0, t0, nil
	}
	b.sayWait(ctx, p, agreed, t0)
	// The schedule starts at the agreed instant, not when this process
	// woke: every shard's schedule then has one origin, and a late
	// wake-up is its first arrivals' lag, caught up.
	if t0, started, err = waitUntil(ctx, agreed); err != nil {
		return t0, started, fmt.Errorf("cell %s: interrupted: %w", p.cell, err)
	}
	b.progress.startsAt(t0, "")
	if msg := lateStartWarning(agreed, t0, started); msg != "" {
		b.logger.Warn(msg, "cell", p.cell, "repeat", p.index+1, "agreed", agreed.UTC().Format(time.RFC3339Nano), "late", started.Sub(agreed).Round(time.Millisecond))
	}
	return t0, started, nil
}

// sayWait says, when the repeat's agreed start is ahead of now, how long
// it waits and until when: the first repeat's wait for --shard.start-at,
// a later one's for what its drain left of --shard.slack. A process idle
// for minutes, or for the slack after every repeat, says why. The log says
// it at info level, and, while a bar is drawn, the bar says it (its
// repeat's length and the time left count the wait) and the log at debug
// level, as for every repeat's own lines.
func (b *run) sayWait(ctx context.Context, p repeatPlan, agreed, now time.Time) {
	wait := agreed.Sub(now)
	if wait <= 0 {
		return
	}
	until := agreed.UTC().Format(time.RFC3339Nano)
	lvl := slog.LevelInfo
	if b.progress.drawsBar() {
		lvl = slog.LevelDebug
	}
	b.progress.startsAt(agreed, "waiting for the shards' agreed start, "+until)
	b.logger.Log(ctx, lvl, "waiting for the shards' agreed start", "cell", p.cell, "repeat", p.index+1,
		"wait", wait.Round(time.Millisecond), "until", until, "shard_slack", b.clock.slack)
}

// lateStartWarning is what the log says of a repeat whose schedule was
// agreed to start at agreed, started from t0 by a process that woke at
// started: nothing when it woke within lateStart. A late wake-up of this
// host (t0 is the agreed instant) leaves the schedule where it was agreed;
// only a shard that reached the agreed instant after it had passed starts
// its schedule late.
func lateStartWarning(agreed, t0, started time.Time) string {
	switch {
	case started.Sub(agreed) <= lateStart:
		return ""
	case t0.Equal(agreed):
		return "late wake-up of this host: it woke after the instant all shards agreed on for the repeat's start (a busy machine's timer); the repeat's schedule still starts at the agreed instant, so the arrivals due before it woke are sent late and their lag is counted (schedule_lag)"
	}
	return "repeat started late: this shard reached the start all shards agreed on after it had passed (an earlier repeat overran its planned length and --shard.slack, or --shard.start-at was too soon); its schedule starts when it reached it, not at the agreed instant"
}

// addSpan puts a repeat that ran from t0 to end on the run's timeline.
func (b *run) addSpan(p repeatPlan, t0, end time.Time) {
	b.timeline = append(b.timeline, report.Span{Target: p.target.Name, Cell: p.cell, Repeat: p.index,
		Start: t0.Sub(b.start).Seconds(), End: end.Sub(b.start).Seconds()})
}

// lateStart is how late after the agreed instant this host may wake to
// start a repeat before the log says so: an idle machine's timer wakes
// well within it, a busy one's may not (23-54 ms seen), which the warning
// words as this host's wake-up, not the schedule's.
const lateStart = 20 * time.Millisecond

// plannedLength is a repeat's length as every shard plans it, from the
// configuration and the trace alone: the warm-up and the duration, or a
// replay's window at its speed (its clock starts ReplayLead late); a
// looping replay is cut at warm-up + duration. The requests' drain after
// it is what the clock's slack is for.
func (b *run) plannedLength(p repeatPlan, l *repeatLoad) time.Duration {
	switch {
	case l.replay != nil && !l.replay.looping:
		return workload.ReplayLead + time.Duration(l.replay.res.WindowSeconds*float64(time.Second))
	case l.replay != nil:
		return workload.ReplayLead + p.warmup + p.duration
	}
	return p.warmup + p.duration
}

// repeatRecorder is the repeat's recorder, and the instant its schedule
// starts from. The warm-up lasts until the pipeline is full, at most
// bench.max_warmup (the configured warm-up plus the measured duration); a
// shard's is the configured one.
// A replay's rows are the trace's: its warm-up is the configured one,
// counted from the trace's clock (which the runner starts ReplayLead late,
// to prepare the first rows), so that every target measures the same rows.
func (b *run) repeatRecorder(p repeatPlan, t0 time.Time, window time.Duration, replayed bool) (*recorder, time.Time) {
	spec := b.spec
	seed := uint64(spec.Seed) ^ hashString(p.cell) + uint64(p.index)
	if replayed {
		clock := t0.Add(workload.ReplayLead)
		return newRecorderAt(clock.Add(p.warmup), window, spec.SLO, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, seed), clock
	}
	if b.opts.Shard.On() {
		return newRecorderFixed(t0, p.warmup, window, spec.SLO, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, seed), t0
	}
	return newRecorder(t0, p.warmup, spec.warmupBound(p.warmup, p.duration), window, spec.SLO, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, seed), t0
}

// repeatObs are who follow a repeat's requests besides the load itself.
type repeatObs struct {
	prefix    string
	observers workload.Observers
	requests  *requestRecorder
	tracer    workload.Tracer
	monitor   workload.Monitor
}

// repeatObservers are the repeat's records, the load's own observer, and
// what the options add: the progress bar, the request log, the OTLP push,
// the live series. No Prometheus registry is needed to run a workload.
func (b *run) repeatObservers(p repeatPlan, rec *recorder, own workload.Observer) repeatObs {
	ro := repeatObs{observers: workload.Observers{rec}}
	if own != nil {
		ro.observers = append(ro.observers, own)
	}
	if p.watch != nil {
		ro.observers = append(ro.observers, p.watch)
	}
	// The runner names each request prefix-n (its X-Request-Id): the cell,
	// the repeat and the shard make it unique in the run, and in the
	// merged run of every shard.
	ro.prefix = fmt.Sprintf("%s#%d", p.cell, p.index)
	if sh := b.opts.Shard; sh.On() {
		ro.prefix += fmt.Sprintf("@%d", sh.Index)
	}
	if b.requests != nil {
		ro.requests = b.requests.observer(p.cell, p.index, ro.prefix)
		ro.observers = append(ro.observers, ro.requests)
	}
	if b.opts.OTLP != nil {
		var o workload.Observer
		o, ro.tracer = b.opts.OTLP(p.target, p.cell, p.index, b.spec.SLO, b.spec.Sampling)
		ro.observers = append(ro.observers, o)
	}
	if b.opts.Live != nil {
		var live workload.Observer
		live, ro.monitor = b.opts.Live(p.target, p.cell)
		ro.observers = append(ro.observers, live)
	}
	return ro
}

// finishRepeat fills the repeat's result from what its recorder and its
// load recorded, once its runner has ended at end.
func (b *run) finishRepeat(res *report.RepeatResult, p repeatPlan, l *repeatLoad, rec *recorder, stop *stopSchedule,
	ext *extension, end time.Time, requests *requestRecorder) *sample {
	window := ext.win.window
	var span time.Duration
	if stop.ended || res.Partial || res.StoppedEarly != "" {
		// The trace ran out, the interrupt came or the repeat stopped
		// early: the measured time ends with the run (its last request's
		// end), over every window it reached.
		span = max(end.Sub(rec.warmupEndAt()), time.Millisecond)
		ext.k = max(1, int(math.Ceil(float64(span)/float64(window))))
	}
	k := ext.k
	stats, smp := rec.finish(k, span)
	res.Stats = stats
	b.noteSpan(p.cell, p.index, rec.warmupEndAt(), stats.WindowSeconds)
	res.Distribution, res.Windows = smp.distribution(), rec.windows(k)
	if requests != nil {
		requests.flush(rec.warmupEndAt())
	}
	if b.opts.Shard.On() {
		st := rec.export(k, span)
		res.State = &st
	}
	used, cut := rec.warmupUsed()
	res.WarmupEndedBy = rec.warmupEndedBy()
	if l.replay != nil {
		// A replay's warm-up is the configured one, on the trace's clock.
		used, cut = p.warmup, false
		res.WarmupEndedBy = report.WarmupTrace
	}
	res.WarmupSeconds = used.Seconds()
	if res.StoppedEarly == "" {
		// A repeat stopped early measured what it sent: its note says it.
		res.WarmupNote = warmupNote(used, p.warmup, cut, float64(stats.E2E.P50), time.Duration(k)*window)
	}
	res.SchedulingLatencyP99 = b.sched.P99()
	res.Client = rec.judgeClient(res.Stats.ScheduleLag, res.SchedulingLatencyP99)
	if l.cursor != nil {
		res.PromptsDrawn = l.cursor.Drawn
	}
	res.Stability.Windows = k
	med, _ := rec.windowMedians(k)
	for _, m := range med {
		res.Stability.Medians = append(res.Stability.Medians, report.Num(m))
	}
	switch {
	case l.replay != nil:
		l.replay.finish(res, rec, stop, k, window, p.stability && b.spec.Stability.On(), ext.rule)
	case ext.win.check || p.trendWindows > 0:
		// The verdict on every window measured (a sweep's point too: its
		// pass rule asks whether the latency grew). The last decision
		// judged the same windows; the requests that ended since count.
		res.Stability.Checked = true
		v := ext.judge()
		res.Precision = precisionOf(smp, res.Stats.Successes, v.Inflation)
	}
	if res.Stats.Overloaded && res.Stability.Checked && res.Stability.State == report.StateStable {
		// The rule weighs the same queue evidence; a cell is never both.
		res.Stability.State, res.Stability.Note = report.StateUnstable, res.Stats.OverloadNote
		res.Stability.Stable = report.StableOf(res.Stability.State)
	}
	return smp
}

// stateWord is a repeat's stability as the logs say it: its state, or
// "not_checked".
func stateWord(st report.StabilityResult) string {
	if !st.Checked || st.State == "" {
		return "not_checked"
	}
	return st.State
}

// warmupNote says how the warm-up went when it was not as configured, and
// whether the measured windows were too short for the cell.
func warmupNote(used, configured time.Duration, cut bool, e2eP50 float64, measured time.Duration) string {
	var note string
	switch {
	case cut:
		note = fmt.Sprintf("the pipeline had not filled within the warm-up bound of %s (the first requests' p90 E2E not yet known): the measured windows may start before the requests in flight reached their level; raise bench.max_warmup", used)
	case used > configured:
		note = fmt.Sprintf("warm-up extended from %s to %s, until the pipeline was full (1.5 x the p90 E2E of the requests sent first, with as many in flight as of late)", configured, used.Round(time.Millisecond))
	}
	if !math.IsNaN(e2eP50) && e2eP50 > measured.Seconds() {
		note = strings.TrimSpace(note + fmt.Sprintf(" measured windows (%s) shorter than the E2E p50 (%.3gs): too short for this cell", measured, e2eP50))
	}
	return note
}

// replayRun is a replay's own part of a repeat: what it recorded, and what
// it adds to the repeat's result.
type replayRun struct {
	rec     *replayRecorder
	res     *report.ReplayResult
	looping bool
}

// finish adds the replay's result to the repeat's, and, when the repeat is
// judged (judge), its stability, afterwards, on the windows the trace
// filled: a replay is never extended, its rows are the trace's.
func (r *replayRun) finish(res *report.RepeatResult, rec *recorder, stop *stopSchedule, k int, window time.Duration, judge bool, rule stability.Spec) {
	r.rec.result(r.res)
	r.res.Clamped = stop.Clamped()
	// Every row dropped, the warm-up's too: a row not sent is lost to the
	// replay wherever it fell.
	r.res.Dropped = rec.droppedRows()
	if r.looping {
		r.res.Cut = replayCut(time.Duration(res.WarmupSeconds*float64(time.Second)).Round(time.Millisecond), time.Duration(k)*window)
	}
	res.Replay = r.res
	if !judge {
		return
	}
	// Over the complete windows only: the trace's last, partial window
	// holds its stragglers, not the server's steady state.
	complete := k
	if stop.ended {
		span := time.Duration(res.Stats.WindowSeconds * float64(time.Second))
		complete = int(span / window)
	}
	if complete < 1 {
		res.Stability.Note = fmt.Sprintf("not judged: the trace filled no complete window of %s", window)
		return
	}
	res.Stability.Checked, res.Stability.Windows = true, complete
	setVerdict(&res.Stability, rec.judge(complete, time.Duration(complete)*window, rule))
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
