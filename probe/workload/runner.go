// Package workload runs a load: a dispatcher sends each request of a Source
// at the instant it is due, whatever the server does, and tells its
// observers what the client observed. The live exporter (probe/live), the
// bench and the load harness run it, each from a Plan.
//
// The flow is one way: source -> prompt -> client -> observation -> observers.
package workload

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// Drop reasons: an arrival that is never sent is counted under one of them.
const (
	// DropInFlightCap: the in-flight cap was full at the scheduled instant.
	DropInFlightCap = "in_flight_cap"
	// DropRateCeiling: the dispatcher was late and the wire ceiling refused
	// to send the overdue arrival in a burst above max_rate.
	DropRateCeiling = "rate_ceiling"
	// DropTargetNotReady: the target's server was not ready (loading its
	// model, restarting: Plan.Ready) at the scheduled instant. Such an
	// arrival says nothing of the server's service: it is counted as
	// skipped, in no outcome, latency or SLO figure.
	DropTargetNotReady = "target_not_ready"
)

// DropReasons lists every drop reason, for pre-initialised counters.
var DropReasons = []string{DropInFlightCap, DropRateCeiling, DropTargetNotReady}

// Schedule yields the offsets of arrivals from the start of the run.
type Schedule interface {
	Next() (offset time.Duration, ok bool)
	Rate(elapsed time.Duration) float64
	Clamped() uint64
}

// Ceiling guards the wire: Allow says whether one more request may be sent
// now without exceeding the rate ceiling. It never blocks.
type Ceiling interface {
	Allow() bool
}

// Prompts yields the next prompt.
type Prompts interface {
	Next() prompt.Prompt
}

// Requests is a prompt source that completes and follows the requests it
// feeds (a replay: it sends recorded bodies, forces output lengths, and
// measures each send's drift from its trace time), the prompts of a
// Lockstep source. Request is called in the preparation right after Next,
// with the arrival's sequence number and the request built from that
// prompt, and may change it. It is an Observer too: the runner adds it to
// its observers (Source.Follower), and it finds each request again by its
// sequence number (observation.Seq).
type Requests interface {
	Prompts
	Request(seq uint64, req *client.Request)
	Observer
}

// Doer sends one request and fills its observation.
type Doer interface {
	Do(ctx context.Context, t *client.Target, r *client.Request, obs *observation.Request)
}

// warmer is a Doer that can open connections ahead (client.Client.Warm).
type warmer interface {
	Warm(ctx context.Context, t *client.Target, n int) int
}

// Plan is a runnable workload: its load (Source), where it goes (Target,
// through Client), who hears of it (Observer, Monitor) and its limits.
// Plan.Runner is the one constructor of a Runner; the live exporter
// (Build), the bench and the load harness each fill a Plan, and what they
// would otherwise each choose (the wire ceiling, the defaults) is chosen
// here, from the plan.
type Plan struct {
	Name   string
	Target *client.Target
	// Source is the load: when its requests are due, what they are, and
	// who follows them (source.go). Nil: Prepare builds it when Run starts.
	Source Source
	// Prepare, when Source is nil, builds it at the start of Run (the
	// prompt calibration against the server's /tokenize, which can take
	// long when the tokenizer stalls): the workload is "calibrating"
	// meanwhile, and "failed" if it returns an error. Workloads calibrate
	// concurrently, each starting as soon as its own prompts are ready.
	Prepare func(ctx context.Context) (Source, error)
	Client  Doer
	// Observer hears of every request as it happens (the live metrics, a
	// bench recorder, a fan-out of several); nil: none.
	Observer Observer
	// Monitor hears of the workload's own state (Series); nil: none.
	Monitor Monitor
	// Tracer, when set, gives each observed request its W3C trace context
	// (probe/otlp's spans), which the client sends as traceparent; nil:
	// none is sent.
	Tracer Tracer
	// Template turns the source's prompts into requests: the sampling
	// parameters and each request's timeout.
	Template plan.Template
	// Checks are known-answer checks that some arrivals of an open loop
	// carry instead of a synthetic prompt (checks.go).
	Checks []config.Check
	Limits
	// Saturation, when set, is the process's goroutine scheduling latency:
	// its p99 above DegradedLag also marks the measurement degraded.
	Saturation interface{ P99() float64 }
	Logger     *slog.Logger
	// Ready, when set, says at each arrival's instant whether the target
	// is ready: an arrival due while it is not is skipped (dropped with
	// DropTargetNotReady), and the schedule keeps its clock, so that no
	// burst follows the return of readiness. Nil: always ready.
	Ready func() bool
	// Start, when set, is the instant the run's clock starts from (a
	// replay's ReplayLead later), rather than the instant Run starts:
	// processes given one Start share one clock, their arrivals due at
	// one instant each (the shards of a bench, --shard.start-at). An
	// instant already passed makes the first arrivals late, caught up.
	Start time.Time
}

// Limits bound a workload: what it may have in flight and send, for how
// long, and when its measurement is stalled or degraded.
type Limits struct {
	MaxInFlight int
	// MaxRate is the schedule's highest rate: the wire ceiling's rate, and
	// how far ahead an open loop prepares its prompts.
	MaxRate float64
	// Burst is the most requests the schedule puts on one instant (a
	// replay's largest group of rows). Before a replay's clock starts, Run
	// opens that many connections (at most MaxInFlight) through a Client
	// that can (client.Client.Warm), so that the first group does not dial
	// them all at its instant; the wire ceiling has room for them.
	Burst int
	// Ceiling guards the wire (arrival.NewWireCeiling); nil: the one of
	// MaxRate, DegradedLag and Burst (plan.ReplayCeiling), or none when
	// MaxRate is 0 or Unceiled.
	Ceiling Ceiling
	// Unceiled: the requests follow replies, not an arrival process (a
	// sessions workload's turns, whose ceiling is the session arrivals').
	Unceiled bool
	// Duration ends the run after that long; 0 runs until ctx is done.
	Duration time.Duration
	// StallThreshold: a request in flight that has received nothing for
	// longer is stalled (Monitor.Stalls); 0 takes
	// config.DefaultStallThreshold.
	StallThreshold time.Duration
	// The client is degraded when the schedule lag's p99 over DegradedWindow
	// exceeds DegradedLag (0: plan.DefaultDegradedLag), which is also the
	// wire ceiling's tolerance.
	DegradedLag    time.Duration
	DegradedWindow time.Duration
	// TokenWindow is the client's client.Request.TokenWindow for the
	// workload's synthetic requests: how many of each request's last
	// token instants its observers need (0: all of them, as a bench
	// record keeps).
	TokenWindow int
}

// Runner returns the runner of the plan.
func (p Plan) Runner() *Runner { return &Runner{Plan: p} }

// ceiling is the wire ceiling of the plan (Limits.Ceiling).
func (p *Plan) ceiling() Ceiling {
	switch {
	case p.Ceiling != nil:
		return p.Ceiling
	case p.Unceiled || p.MaxRate <= 0:
		return nil
	}
	// The tolerance is the degraded lag the monitor judges by, its default
	// included: a plan that leaves DegradedLag unset (a test's, the load
	// harness's) gets the exporter's 10 ms, not a bucket of two sends that
	// drops whatever a busy machine makes overdue.
	lag := p.DegradedLag
	if lag <= 0 {
		lag = plan.DefaultDegradedLag
	}
	return plan.ReplayCeiling(p.MaxRate, lag, max(1, p.Burst))
}

// DefaultDegradedWindow is the window of the lag p99 when Limits (or
// probe/live.Options) say none.
const DefaultDegradedWindow = 30 * time.Second

// degradedWindow is DegradedWindow, or its default.
func (l Limits) degradedWindow() time.Duration {
	if l.DegradedWindow <= 0 {
		return DefaultDegradedWindow
	}
	return l.DegradedWindow
}

// Runner drives one workload against one target: Plan.Runner builds it.
type Runner struct {
	Plan

	status atomic.Pointer[Status]

	// drain is closed by Drain; grace is its grace period.
	drainOnce sync.Once
	drainMu   sync.Mutex
	drainCh   chan struct{}
	grace     atomic.Int64

	inFlight atomic.Int64 // requests sent and not yet ended
}

// InFlight is the number of the workload's requests sent and not yet ended.
func (r *Runner) InFlight() int { return int(r.inFlight.Load()) }

// draining is the channel Drain closes.
func (r *Runner) draining() chan struct{} {
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	if r.drainCh == nil {
		r.drainCh = make(chan struct{})
	}
	return r.drainCh
}

// Drain asks Run to stop: it sends no arrival due after this (none is
// counted as dropped: the schedule ends), lets the requests in flight run
// on for at most grace, then cancels those still running and reports them
// with the outcome observation.Cancelled, so that every request sent ends
// in a counted outcome. Run returns once they all have. A workload still
// preparing its source stops at once. Drain may be called before Run,
// during it or after it, and more than once (the first grace counts).
func (r *Runner) Drain(grace time.Duration) {
	r.drainOnce.Do(func() {
		r.grace.Store(int64(max(grace, 0)))
		close(r.draining())
	})
}

// Status is a workload's state and, when it failed, why.
type Status struct {
	State  string // one of States
	Reason string
}

// Status returns the workload's current state: calibrating before Run has
// its prompts, then running, finished or failed.
func (r *Runner) Status() Status {
	if s := r.status.Load(); s != nil {
		return *s
	}
	return Status{State: StateCalibrating}
}

func (r *Runner) setStatus(state, reason string) {
	r.status.Store(&Status{State: state, Reason: reason})
	if r.Monitor != nil {
		r.Monitor.State(state)
	}
}

// Run sends requests until the source ends, Duration passes or ctx is
// done, then waits for the requests in flight. Cancelling ctx cancels them.
// Every source goes through this one loop: its feed (feed.go) hands it the
// next group of requests due at one instant; the group's senders start and
// wait at a gate; at the instant each request is admitted or dropped, and
// the gate opens.
//
// Cancelling ctx ends the run at once and cancels the requests in flight;
// Drain ends it gracefully. Either way a request the exporter cut short is
// reported with the outcome observation.Cancelled.
func (r *Runner) Run(ctx context.Context) {
	// reqCtx bounds the requests in flight; loopCtx, the schedule and the
	// preparation, which a drain ends first.
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	loopCtx, stopLoop := context.WithCancel(reqCtx)
	defer stopLoop()
	drain := r.draining()
	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-runDone:
			return
		case <-drain:
		}
		stopLoop()
		timer := time.NewTimer(time.Duration(r.grace.Load()))
		defer timer.Stop()
		select {
		case <-runDone:
		case <-timer.C:
			cancel()
		}
	}()
	ctx = loopCtx
	if !r.prepareSource(ctx) {
		return
	}
	r.setStatus(StateRunning, "")
	defer func() {
		if r.Status().State == StateRunning {
			r.setStatus(StateFinished, "")
		}
	}()
	d := r.dispatch(reqCtx, ctx, cancel)
	defer d.stop()
	for {
		off, group, ok := d.feed.next(ctx)
		if !ok {
			return
		}
		at := d.start.Add(off)
		// The group's senders start before its instant and wait for it
		// at a gate: at the instant only the admission of each row is
		// left between one send and the next, not a goroutine's start.
		gate := make(chan struct{})
		for i := range group {
			d.wg.Add(1)
			go d.send(reqCtx, &group[i], at, gate)
		}
		d.sends.waitFor(at, len(group))
		if !d.wait.waitUntil(ctx, at) {
			close(gate)
			return
		}
		dropped := d.admit(group, at)
		close(gate)
		for _, i := range dropped {
			// A dropped check is counted as a dropped arrival, as before:
			// it held an arrival's place.
			d.observer.Dropped(&observation.Request{Seq: group[i].n, Scheduled: at, Outcome: observation.Dropped, DropReason: group[i].dropReason})
		}
	}
}

// prepareSource builds the source with Prepare when there is none yet;
// false: the workload does not start (stopped or failed meanwhile).
func (r *Runner) prepareSource(ctx context.Context) bool {
	if r.Prepare == nil || r.Source != nil {
		return true
	}
	r.setStatus(StateCalibrating, "")
	src, err := r.Prepare(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped (a reload, a shutdown) while calibrating.
			r.setStatus(StateFinished, "stopped while calibrating")
			return false
		}
		r.setStatus(StateFailed, err.Error())
		if r.Logger != nil {
			r.Logger.Error("workload not started: its prompts could not be built", "workload", r.Name, "err", err)
		}
		return false
	}
	r.Source = src
	return true
}

// dispatcher is one Run's state: what its loop, its senders, its
// preparation and its monitor share.
type dispatcher struct {
	r        *Runner
	start    time.Time // the run's clock: offsets count from it
	mon      Monitor
	observer Observer
	ceiling  Ceiling
	checks   *checkSchedule
	flights  *flights
	lags     *lagWindow
	inFlight *atomic.Int64 // the runner's
	// The schedule belongs to the feed's goroutine; the monitor reads its
	// clamp count through this copy.
	clamped atomic.Uint64
	wg      sync.WaitGroup
	wait    waiter
	sends   *sendWindow
	feed    feed
	ahead   *ahead
	cancel  context.CancelFunc
	// monitorDone is closed when the monitor returns.
	monitorDone chan struct{}
}

// dispatch starts a run: its clock, its monitor, and its preparation.
//
// ctx bounds the requests and the monitor, loopCtx the preparation.
func (r *Runner) dispatch(ctx, loopCtx context.Context, cancel context.CancelFunc) *dispatcher {
	d := &dispatcher{r: r, inFlight: &r.inFlight, lags: newLagWindow(r.degradedWindow(), 10), cancel: cancel, ceiling: r.ceiling()}
	bound := r.Source.Bound()
	d.start = time.Now()
	if !r.Start.IsZero() {
		d.start = r.Start
	}
	if bound {
		// A replay's first rows often share an instant, each with a long
		// prompt: its clock starts ReplayLead from now, so that they are
		// prepared before it and go out together on time.
		d.start = d.start.Add(ReplayLead)
	}
	d.mon = r.Monitor
	if d.mon == nil {
		d.mon = noMonitor{}
	}
	d.mon.Limits(r.MaxInFlight, r.MaxRate, len(r.Checks) > 0)
	d.mon.Rate(r.Source.Rate(0))
	d.checks = newCheckSchedule(r.Checks)
	d.observer = r.Observer
	if f := r.Source.Follower(); f != nil {
		d.observer = Observers{d.observer, f}
		if r.Observer == nil {
			d.observer = f
		}
	}
	if d.observer == nil {
		d.observer = Observers{}
	}
	d.flights = newFlights()
	if w, ok := r.Client.(warmer); ok && bound && r.Burst > 1 {
		// In the replay's lead, while its first rows are prepared.
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			w.Warm(ctx, r.Target, min(r.Burst, r.MaxInFlight))
		}()
	}
	d.monitorDone = make(chan struct{})
	go func() {
		defer close(d.monitorDone)
		r.monitor(ctx, d)
	}()
	d.wait = newWaiter()
	if bound {
		d.feed = &lockstepFeed{d: d}
	} else {
		d.feed = &pacedFeed{d: d}
	}
	d.sends = &sendWindow{}
	d.ahead = newAhead(r.lookahead(bound))
	d.ahead.start(loopCtx, d.feed)
	return d
}

// stop ends the preparation, waits for the requests in flight, and ends
// the monitor.
func (d *dispatcher) stop() {
	d.ahead.stop()
	d.wait.close()
	d.wg.Wait()
	d.cancel()
	<-d.monitorDone
}

// send is one request's goroutine: it waits at the gate of its group, and
// sends the request if it was admitted.
func (d *dispatcher) send(ctx context.Context, a *dueRequest, at time.Time, gate <-chan struct{}) {
	defer d.wg.Done()
	<-gate
	if a.fl == nil {
		return // dropped, or the run stopped before its instant
	}
	r := d.r
	obs := &observation.Request{Seq: a.n, Scheduled: at}
	r.Client.Do(ctx, r.Target, a.req, obs)
	if a.window != nil && obs.Sent.IsZero() {
		a.window.sent() // never sent (its request could not be built)
	}
	d.flights.remove(a.fl)
	obs.Stalled = a.fl.everStalled.Load()
	d.inFlight.Add(-1)
	d.mon.InFlight(-1)
	if lag, ok := obs.ScheduleLag(); ok {
		d.lags.observe(obs.Sent, lag)
	}
	if ctx.Err() != nil && obs.Outcome != observation.Success && errors.Is(obs.Err, context.Canceled) {
		// The run was stopped (a reload, a shutdown) while this
		// request was in flight, and its drain's grace ran out: the
		// server did nothing wrong, so it is not a failure, but it
		// was sent, so it is counted, as cancelled.
		obs.Outcome = observation.Cancelled
		if a.check >= 0 {
			return // a check cut short has no result
		}
	}
	if a.check >= 0 {
		r.observeCheck(ctx, d.mon, a.check, obs)
		return
	}
	// The answer's validity is part of the observation every observer
	// reads; only the request's own kinds can judge it.
	r.Template.Kinds.Check(ctx, obs)
	d.observer.Done(obs)
	if obs.Outcome != observation.Success && r.Logger != nil && ctx.Err() == nil {
		r.Logger.Debug("request failed", "workload", r.Name, "request_id", a.req.RequestID, "outcome", obs.Outcome, "status", obs.HTTPStatus, "err", obs.Err)
	}
}

// admit asks, at the group's instant, the in-flight cap and the wire
// ceiling for each of its requests, and readies those admitted; it returns
// the indexes of those dropped.
func (d *dispatcher) admit(group []dueRequest, at time.Time) []int {
	r := d.r
	var dropped []int
	// Only a group's senders tell the preparation of their sends.
	var window *sendWindow
	if len(group) > 1 {
		window = d.sends
	}
	for i := range group {
		a := &group[i]
		reason := ""
		switch {
		case r.Ready != nil && !r.Ready():
			reason = DropTargetNotReady
		case d.inFlight.Load() >= int64(r.MaxInFlight):
			reason = DropInFlightCap
		case d.ceiling != nil && !d.ceiling.Allow():
			reason = DropRateCeiling
		}
		if reason != "" {
			a.dropReason = reason
			dropped = append(dropped, i)
			continue
		}
		d.inFlight.Add(1)
		d.mon.InFlight(1)
		a.fl = d.flights.add(at)
		a.window = window
		// Its id, for the server's logs: the workload and the
		// arrival's sequence number.
		a.req.RequestID = r.Name + "-" + strconv.FormatUint(a.n, 10)
		if a.check >= 0 {
			a.req.Events = &requestEvents{o: Observers{}, f: a.fl, w: window}
			d.checks.sent(a.check, at)
		} else {
			a.req.Events = &requestEvents{o: d.observer, f: a.fl, w: window}
			a.req.TokenWindow = r.TokenWindow
			if r.Tracer != nil {
				a.req.Trace = r.Tracer.Trace()
			}
		}
	}
	if len(group) > 1 {
		d.sends.release(len(group) - len(dropped))
	}
	return dropped
}

// dueRequest is one request of a group due at one instant, from its
// preparation to its admission.
type dueRequest struct {
	n     uint64
	req   *client.Request
	check int // the known-answer check it carries, or -1
	// Set at the instant, before the gate opens: the in-flight entry of
	// an admitted request (nil: not sent), or why it was dropped.
	fl         *flight
	dropReason string
	window     *sendWindow // a group's: told of the send
}

// lookahead is how many requests prepare may hold ready. A replay's are
// bounded in time by prepare itself; synthetic prompts, which may each cost
// /tokenize calls, are drawn about lookaheadTime ahead at the workload's
// rate ceiling, so the server sees no burst of calibration at the start.
func (r *Runner) lookahead(bound bool) int {
	if bound {
		return lookaheadItems
	}
	return min(lookaheadItems, max(2, int(math.Ceil(r.MaxRate*lookaheadTime.Seconds()))))
}

// monitor refreshes the rate, ceiling and degradation gauges once a second.
func (r *Runner) monitor(ctx context.Context, d *dispatcher) {
	mon, start, lags, clampedSeen, fl := d.mon, d.start, d.lags, &d.clamped, d.flights
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// Stalls are scanned four times per threshold (at most once a second),
	// so a stall shows within 1.25 thresholds of its last event.
	stallAfter := r.StallThreshold
	if stallAfter <= 0 {
		stallAfter = config.DefaultStallThreshold
	}
	stallTick := time.NewTicker(min(time.Second, max(stallAfter/4, 25*time.Millisecond)))
	defer stallTick.Stop()
	var clamped uint64
	threshold := r.DegradedLag
	if threshold <= 0 {
		threshold = plan.DefaultDegradedLag
	}
	// state tells the monitor the clamps since it was last told and the
	// lag's verdict now.
	state := func(now time.Time) {
		if c := clampedSeen.Load(); c > clamped {
			mon.Clamped(c - clamped)
			clamped = c
		}
		p99, n := lags.quantile(now, 0.99)
		saturated := r.Saturation != nil && r.Saturation.P99() > threshold.Seconds()
		mon.Lag(p99, (n > 0 && p99 > threshold.Seconds()) || saturated)
	}
	for {
		select {
		case <-ctx.Done():
			// Once more at the end: a run that ends between two ticks (a
			// replay shorter than a second, or a tick the scheduler held
			// back on a busy machine) still counts every arrival its
			// ceiling moved, and leaves the verdict of its last window.
			state(time.Now())
			return
		case now := <-stallTick.C:
			mon.Stalls(fl.scan(now, stallAfter))
		case now := <-tick.C:
			mon.Rate(r.Source.Rate(now.Sub(start)))
			state(now)
		}
	}
}

// noMonitor is the Monitor of a runner without one.
type noMonitor struct{}

func (noMonitor) Limits(int, float64, bool) {}
func (noMonitor) Rate(float64)              {}
func (noMonitor) InFlight(int)              {}
func (noMonitor) Clamped(uint64)            {}
func (noMonitor) Lag(float64, bool)         {}
func (noMonitor) Check(string)              {}
func (noMonitor) State(string)              {}
func (noMonitor) Stalls(StallScan)          {}
