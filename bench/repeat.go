package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/bench/stability"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/replay"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// load is a repeat's load as the repeat drives it, whatever its kind: an
// open-loop rate (rateLoad), a closed loop of clients (closedLoad) or a
// trace's replay (replayLoad).
type load interface {
	// limits are the in-flight cap, the max rate and the largest group
	// of sends on one instant.
	limits() workload.Limits
	// length is the repeat's planned length as every shard plans it,
	// from the configuration and the trace alone (the shards' clock).
	length(p repeatPlan) time.Duration
	// windows are the repeat's measured windows, from the planned ones.
	windows(w repeatWindows) repeatWindows
	// recorder is the repeat's recorder, and the instant its schedule
	// starts from, for a repeat started at t0.
	recorder(spec *Spec, p repeatPlan, t0 time.Time, window time.Duration) (*recorder, time.Time)
	// source is the load as the runner drives it, its schedule ending
	// where stop says (the load sets stop's schedule and its bounds),
	// and the observer that follows the requests for the load itself,
	// nil when none does.
	source(stop *stopSchedule) (workload.Source, workload.Observer)
	// finish adds the load's own part to the repeat's result once its
	// measured windows are known (e), and returns the warm-up used and
	// whether its bound cut it.
	finish(res *report.RepeatResult, e *repeatEnd) (warmup time.Duration, cut bool)
}

// newLoad builds the repeat's load by its kind. none says this shard has
// none of it (a closed loop's clients all went to other shards): the
// repeat sends nothing, though its length is still planned.
func newLoad(ctx context.Context, spec *Spec, shard Shard, prompts *PromptSet, traces map[string]*replay.Trace, p repeatPlan) (l load, none bool, err error) {
	switch kind := p.group.load.Kind; kind {
	case report.LoadRate:
		l, err = newRateLoad(spec, shard, prompts, p)
	case report.LoadConcurrency:
		if cl := newClosedLoad(ctx, shard, prompts, p); cl != nil {
			return cl, false, nil
		}
		return &closedLoad{}, true, nil
	case report.LoadReplay:
		l, err = newReplayLoad(spec, shard, traces, p)
	default:
		err = fmt.Errorf("unknown load kind %q", kind)
	}
	if err != nil {
		return nil, false, fmt.Errorf("cell %s: %w", p.cell, err)
	}
	return l, false, nil
}

// starter is how a repeat's schedule starts: when the one before it has
// ended (startNow), or at the instant every shard agreed on (shardClock).
type starter interface {
	// reserve takes the next repeat's agreed start, from its planned
	// length: every shard reserves every repeat, even one it has no
	// share of, so that they agree on the next one's start.
	reserve(length time.Duration) time.Time
	// begin waits for the repeat's start, agreed, and says so in the log
	// and on the bar.
	begin(ctx context.Context, p repeatPlan, agreed time.Time, logger *slog.Logger, bar *progress) (repeatStart, error)
	// agreement is the first repeat's agreed start and the slack after
	// each repeat's planned end, for the plan and the report; zero when
	// nothing is agreed.
	agreement() (startAt time.Time, slack time.Duration)
}

// repeatStart is how a repeat started.
type repeatStart struct {
	// t0 is the instant the repeat's schedule starts from.
	t0 time.Time
	// origin is the runner's start (workload.Plan.Start): zero, the
	// runner's own now, unless agreed.
	origin time.Time
	// wakeupLate is how long after the agreed instant this host woke.
	wakeupLate report.Num
}

// repeatWindows are a repeat's measured windows: their length, how many
// are measured at first and at most, and whether the stability check may
// extend them.
type repeatWindows struct {
	window     time.Duration
	base, most int
	check      bool
}

// plannedWindows are a repeat's measured windows as planned: the stability
// windows when it is checked, a sweep point's trend windows, else one
// window of the duration.
func plannedWindows(st *StabilitySpec, shard Shard, p repeatPlan) repeatWindows {
	w := repeatWindows{window: p.duration, base: 1, most: 1, check: p.stability && st.On()}
	switch {
	case w.check:
		// A replay's windows are the stability windows too: it is judged
		// afterwards, over every window its trace filled.
		w.window = st.Window
		w.base = wholeWindows(p.duration, w.window)
		w.most = max(w.base, int(st.MaxDuration/w.window))
		if shard.On() {
			// Every shard of a run measures the same windows: none
			// extends on its own share, and bench merge judges the
			// stability on the pooled windows (docs/bench.md).
			w.most = w.base
		}
	case p.trendWindows > 0:
		w.window, w.base, w.most = p.duration/time.Duration(p.trendWindows), p.trendWindows, p.trendWindows
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
	l, none, err := newLoad(ctx, b.spec, b.opts.Shard, b.prompts, b.traces, p)
	if err != nil {
		return report.RepeatResult{}, nil, err
	}
	agreed := b.starter.reserve(l.length(p))
	if none {
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
	win := l.windows(plannedWindows(&b.spec.Stability, b.opts.Shard, p))
	// The wire ceiling is the plan's: the open loop's, or the replay's with
	// room for its largest group; a closed loop (no max rate) has none.
	limits := l.limits()
	limits.DegradedLag = degradedLag
	cl := client.New(client.Options{MaxConnsPerHost: limits.MaxInFlight})
	defer cl.Close()

	res := report.RepeatResult{Index: p.index, Stability: report.StabilityResult{Checked: win.check, WindowSeconds: win.window.Seconds(),
		Growth: report.NaN(), GrowthLow: report.NaN(), GrowthHigh: report.NaN(), NeedSeconds: report.NaN(),
		Step: report.NaN(), StepAtSeconds: report.NaN(), EffectiveRequests: report.NaN()}}
	st, err := b.starter.begin(ctx, p, agreed, b.logger, b.progress)
	if err != nil {
		return report.RepeatResult{}, nil, err
	}
	rec, clock := l.recorder(b.spec, p, st.t0, win.window)
	rec.inFlightCap = limits.MaxInFlight
	lvl := slog.LevelInfo
	if b.progress != nil {
		lvl = slog.LevelDebug // the bar says it
	}
	// lead is the part of the warm-up before the recorder's clock: none,
	// or a replay's whole warm-up on the trace's clock.
	ext := &extension{rec: rec, win: win, rule: b.spec.Stability.Rule(), res: &res.Stability, k: win.base, lead: rec.t0.Sub(clock),
		tell: func(limit time.Duration, why string, settled bool) {
			// The bar's length follows the limit; the log says once why
			// the repeat runs longer than planned.
			b.progress.limit(clock.Add(limit), why)
			if settled && why != "" {
				b.logger.Log(ctx, lvl, "repeat longer than planned", "cell", p.cell, "repeat", p.index+1, "until", limit.Round(time.Millisecond), "why", why)
			}
		}}
	fw := newFailWatch()
	stop := &stopSchedule{ctx: ctx, t0: clock, resolve: ext.first, decide: ext.decide, halt: fw.halt}
	source, own := l.source(stop)
	ro := repeatObservers(p, rec, own, &b.opts, b.spec, b.requests)
	ro.observers = append(ro.observers, fw)
	pw := b.newPrefixWatch(ctx, l, p)
	if pw != nil {
		ro.observers = append(ro.observers, pw)
	}
	runner := workload.Plan{
		Name: ro.prefix, Target: p.ct, Source: source, Client: cl, Observer: ro.observers, Monitor: ro.monitor, Tracer: ro.tracer,
		Template: plan.Template{Sampling: b.spec.Sampling, Timeout: p.target.Timeout, Kinds: kinds},
		Limits:   limits, Logger: b.logger, Saturation: b.sched, Start: st.origin,
	}.Runner()
	// The requests in flight when it stops early end on their own (a
	// refusal is quick), within their timeout at most.
	fw.drain = func() { runner.Drain(p.target.Timeout) }
	// The schedule's origin, the agreed instant with the shards' clock;
	// how late this host woke after it is apart.
	res.Started, res.WakeupLateSeconds = st.t0, st.wakeupLate
	runner.Run(ctx)
	end := time.Now()
	res.FirstError, res.StoppedEarly = fw.result()
	e := &repeatEnd{p: p, rec: rec, stop: stop, ext: ext, end: end, requests: ro.requests}
	if err := ctx.Err(); err != nil {
		pw.close(end)
		return b.interrupted(&res, l, e, st.t0, fmt.Errorf("cell %s: interrupted: %w", p.cell, err))
	}
	if res.StoppedEarly != "" {
		rec.measureAll()
	}
	smp := b.finishRepeat(&res, l, e)
	res.PrefixCache = pw.measured(e)
	if res.StoppedEarly != "" {
		res.Stability.Checked, res.Stability.State, res.Stability.Stable, res.Precision = false, "", nil, nil
		res.Stability.Note = "not judged: " + res.StoppedEarly
		b.logger.Warn("repeat stopped early", "cell", p.cell, "repeat", p.index+1, "why", res.StoppedEarly)
	}
	b.times.add(p, st.t0, end)
	b.logger.Log(ctx, lvl, "repeat done", "cell", p.cell, "repeat", p.index+1, "requests", res.Stats.Requests,
		"successes", res.Stats.Successes, "e2e_p50", res.Stats.E2E.P50, "stability", stateWord(res.Stability))
	return res, smp, nil
}

// interrupted ends a repeat an interrupt stopped (err): with what it
// measured before it, over the windows it reached, when it may keep a
// partial result; the requests the interrupt cut short are cancelled.
func (b *run) interrupted(res *report.RepeatResult, l load, e *repeatEnd, t0 time.Time, err error) (report.RepeatResult, *sample, error) {
	measured := e.end.Sub(e.rec.warmupEndAt())
	if !e.p.keepPartial || measured <= 0 {
		// Nothing to keep, or nothing measured yet (the interrupt came
		// in the warm-up).
		if e.requests != nil {
			e.requests.flushInterrupted() // its requests were sent: their records are written
		}
		return report.RepeatResult{}, nil, err
	}
	res.Partial = true
	e.ext.k = max(1, int(math.Ceil(float64(measured)/float64(e.ext.win.window))))
	smp := b.finishRepeat(res, l, e)
	res.Stability.Checked, res.Stability.State, res.Stability.Stable = false, "", nil
	res.Stability.Note = fmt.Sprintf("not judged: interrupted after %.1f s measured", measured.Seconds())
	b.times.add(e.p, t0, e.end)
	return *res, smp, err
}

// repeatEnd is a repeat whose runner has ended, at end: what its result is
// made of.
type repeatEnd struct {
	p        repeatPlan
	rec      *recorder
	stop     *stopSchedule
	ext      *extension
	end      time.Time
	requests *requestRecorder
	// What finishRepeat found: the sample, the windows measured (k, of
	// window each), and whether the stability is judged (the rule is
	// ext's).
	smp    *sample
	k      int
	window time.Duration
	judge  bool
}

// finishRepeat fills the repeat's result from what its recorder and its
// load recorded, once its runner has ended (e).
func (b *run) finishRepeat(res *report.RepeatResult, l load, e *repeatEnd) *sample {
	rec := e.rec
	e.window = e.ext.win.window
	var span time.Duration
	if e.stop.ended || res.Partial || res.StoppedEarly != "" {
		// The trace ran out, the interrupt came or the repeat stopped
		// early: the measured time ends with the run (its last request's
		// end), over every window it reached.
		span = max(e.end.Sub(rec.warmupEndAt()), time.Millisecond)
		e.ext.k = max(1, int(math.Ceil(float64(span)/float64(e.window))))
	}
	k := e.ext.k
	stats, smp := rec.finish(k, span)
	res.Stats = stats
	b.times.measured(e.p.cell, e.p.index, rec.warmupEndAt(), stats.WindowSeconds)
	res.Distribution, res.Windows = smp.distribution(), rec.windows(k)
	if e.requests != nil {
		e.requests.flush(rec.warmupEndAt())
	}
	if b.opts.Shard.On() {
		st := rec.export(k, span)
		res.State = &st
	}
	res.SchedulingLatencyP99 = b.sched.P99()
	res.Client = rec.judgeClient(res.Stats.ScheduleLag, res.SchedulingLatencyP99)
	res.Stability.Windows = k
	med, _ := rec.windowMedians(k)
	for _, m := range med {
		res.Stability.Medians = append(res.Stability.Medians, report.Num(m))
	}
	e.smp, e.k, e.judge = smp, k, e.p.stability && b.spec.Stability.On()
	used, cut := l.finish(res, e)
	if res.StoppedEarly == "" {
		// A repeat stopped early measured what it sent: its note says it.
		res.WarmupNote = warmupNote(used, e.p.warmup, cut, float64(stats.E2E.P50), time.Duration(k)*e.window)
	}
	if res.Stats.Overloaded && res.Stability.Checked && res.Stability.State == report.StateStable {
		// The rule weighs the same queue evidence; a cell is never both.
		res.Stability.State, res.Stability.Note = report.StateUnstable, res.Stats.OverloadNote
		res.Stability.Stable = report.StableOf(res.Stability.State)
	}
	return smp
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
func repeatObservers(p repeatPlan, rec *recorder, own workload.Observer, opts *Options, spec *Spec, requests *requestLog) repeatObs {
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
	if sh := opts.Shard; sh.On() {
		ro.prefix += fmt.Sprintf("@%d", sh.Index)
	}
	if requests != nil {
		ro.requests = requests.observer(p.cell, p.index, ro.prefix)
		ro.observers = append(ro.observers, ro.requests)
	}
	if opts.OTLP != nil {
		var o workload.Observer
		o, ro.tracer = opts.OTLP(p.target, p.cell, p.index, spec.SLO, spec.Sampling)
		ro.observers = append(ro.observers, o)
	}
	if opts.Live != nil {
		var live workload.Observer
		live, ro.monitor = opts.Live(p.target, p.cell)
		ro.observers = append(ro.observers, live)
	}
	return ro
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
