// Package workload runs the continuous probe: an open-loop dispatcher sends
// each request at the instant its arrival process scheduled, whatever the
// server does, and records what the client observed as Prometheus metrics.
//
// The flow is one way: schedule -> prompt -> client -> observation -> metrics.
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
)

// DropReasons lists every drop reason, for pre-initialised counters.
var DropReasons = []string{DropInFlightCap, DropRateCeiling}

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

// Requests is implemented by a Prompts source that completes and follows
// the requests it feeds (a replay: it sends recorded bodies, forces output
// lengths, and measures each send's drift from its trace time). Request is
// called in the dispatcher right after Next, with the arrival's sequence
// number and the request built from that prompt, and may change it. Such a
// source is an Observer too: the runner adds it to its observers, and it
// finds each request again by its sequence number (observation.Seq).
type Requests interface {
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

// Runner drives one workload against one target.
type Runner struct {
	Name     string
	Target   *client.Target
	Schedule Schedule
	Ceiling  Ceiling // may be nil
	Prompts  Prompts
	Client   Doer
	// Observer hears of every request as it happens (the live metrics, a
	// bench recorder, a fan-out of several); nil: none.
	Observer Observer
	// Monitor hears of the workload's own state (Series); nil: none.
	Monitor     Monitor
	MaxInFlight int
	MaxRate     float64
	// Duration ends the run after that long; 0 runs until ctx is done.
	Duration time.Duration
	// StallThreshold: a request in flight that has received nothing for
	// longer is stalled (Monitor.Stalls); 0 takes
	// config.DefaultStallThreshold.
	StallThreshold time.Duration
	Sampling       config.Sampling
	// Timeout bounds each request.
	Timeout time.Duration
	// TokenWindow is the client's client.Request.TokenWindow for the
	// workload's synthetic requests: how many of each request's last
	// token instants its observers need (0: all of them, as a bench
	// record keeps).
	TokenWindow int
	// Checks are known-answer checks that some arrivals carry instead of a
	// synthetic prompt (checks.go).
	Checks []config.Check

	// The client is degraded when the schedule lag's p99 over DegradedWindow
	// exceeds DegradedLag.
	DegradedLag    time.Duration
	DegradedWindow time.Duration
	// Saturation, when set, is the process's goroutine scheduling latency:
	// its p99 above DegradedLag also marks the measurement degraded.
	Saturation interface{ P99() float64 }

	// Burst is the most requests the schedule puts on one instant (a
	// replay's largest group of rows). Before a replay's clock starts, Run
	// opens that many connections (at most MaxInFlight) through a Client
	// that can (client.Client.Warm), so that the first group does not dial
	// them all at its instant.
	Burst int

	// Prepare, when set, builds Prompts at the start of Run (the prompt
	// calibration against the server's /tokenize, which can take long when
	// the tokenizer stalls): the workload is "calibrating" meanwhile, and
	// "failed" if it returns an error. Workloads calibrate concurrently, each
	// starting as soon as its own prompts are ready.
	Prepare func(ctx context.Context) (Prompts, error)

	Logger *slog.Logger

	status atomic.Pointer[Status]
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

// Run sends requests until the schedule ends, Duration passes or ctx is done,
// then waits for the requests in flight. Cancelling ctx cancels them.
func (r *Runner) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.Prepare != nil && r.Prompts == nil {
		r.setStatus(StateCalibrating, "")
		p, err := r.Prepare(ctx)
		if err != nil {
			if ctx.Err() != nil {
				// Stopped (a reload, a shutdown) while calibrating.
				r.setStatus(StateFinished, "stopped while calibrating")
				return
			}
			r.setStatus(StateFailed, err.Error())
			if r.Logger != nil {
				r.Logger.Error("workload not started: its prompts could not be built", "workload", r.Name, "err", err)
			}
			return
		}
		r.Prompts = p
	}
	r.setStatus(StateRunning, "")
	defer func() {
		if r.Status().State == StateRunning {
			r.setStatus(StateFinished, "")
		}
	}()
	window := r.DegradedWindow
	if window <= 0 {
		window = 30 * time.Second
	}
	lags := newLagWindow(window, 10)
	_, lockstep := r.Prompts.(Requests)
	start := time.Now()
	if lockstep {
		// A replay's first rows often share an instant, each with a long
		// prompt: its clock starts ReplayLead from now, so that they are
		// prepared before it and go out together on time.
		start = start.Add(ReplayLead)
	}
	mon := r.Monitor
	if mon == nil {
		mon = noMonitor{}
	}
	mon.Limits(r.MaxInFlight, r.MaxRate, len(r.Checks) > 0)
	mon.Rate(r.Schedule.Rate(0))
	checks := newCheckSchedule(r.Checks)
	observer := r.Observer
	if rs, ok := r.Prompts.(Requests); ok {
		observer = Observers{observer, rs}
		if r.Observer == nil {
			observer = rs
		}
	}
	if observer == nil {
		observer = Observers{}
	}
	inFlightSet := newFlights()
	var seq uint64

	var inFlight atomic.Int64
	// The schedule belongs to this goroutine; the monitor reads its clamp
	// count through this copy.
	var clamped atomic.Uint64
	var wg sync.WaitGroup
	if w, ok := r.Client.(warmer); ok && lockstep && r.Burst > 1 {
		// In the replay's lead, while its first rows are prepared.
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Warm(ctx, r.Target, min(r.Burst, r.MaxInFlight))
		}()
	}
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		r.monitor(ctx, mon, start, lags, &clamped, inFlightSet)
	}()
	defer func() {
		wg.Wait()
		cancel()
		<-monitorDone
	}()

	wait := newWaiter()
	defer wait.close()
	// Requests are built ahead of their instants by prepare, in a goroutine
	// of their own, so that building a prompt never delays a send and
	// arrivals due at the same instant go out together.
	prepared := make(chan preparedRequest, r.lookahead(lockstep))
	budget := newByteBudget(lookaheadBytes)
	sends := &sendWindow{}
	prepCtx, stopPrep := context.WithCancel(ctx)
	prepDone := make(chan struct{})
	go func() {
		defer close(prepDone)
		r.prepare(prepCtx, start, lockstep, prepared, budget, sends, func() { clamped.Store(r.Schedule.Clamped()) })
	}()
	defer func() {
		stopPrep()
		budget.close()
		<-prepDone
	}()
	next := func() (*client.Request, bool) {
		select {
		case p, ok := <-prepared:
			if ok {
				budget.give(requestBytes(p.req))
			}
			return p.req, ok
		case <-ctx.Done():
			return nil, false
		}
	}
	// A replay row received while collecting a group but not of it: the
	// first of the next group.
	var (
		pending    *preparedRequest
		replayDone bool
	)
	nextRow := func() (preparedRequest, bool) {
		if pending != nil {
			p := *pending
			pending = nil
			return p, true
		}
		select {
		case p, ok := <-prepared:
			if ok {
				budget.give(requestBytes(p.req))
			}
			return p, ok
		case <-ctx.Done():
			return preparedRequest{}, false
		}
	}
	for !replayDone {
		// A new slice for each group: its senders keep pointers into it.
		group := make([]dueRequest, 0, 1)
		var off time.Duration
		if lockstep {
			// A replay: the schedule advanced with its prompts in prepare.
			p, ok := nextRow()
			if !ok {
				return
			}
			off = p.off
			group = append(group, dueRequest{n: p.seq, req: p.req, check: -1})
			// The rows of the trace that share this instant and are
			// prepared already go out with it, as one group.
		collect:
			for len(group) < lookaheadItems {
				select {
				case q, ok := <-prepared:
					if !ok {
						replayDone = true
						break collect
					}
					budget.give(requestBytes(q.req))
					if q.off != off {
						pending = &q
						break collect
					}
					group = append(group, dueRequest{n: q.seq, req: q.req, check: -1})
				default:
					break collect
				}
			}
			seq = group[len(group)-1].n + 1
		} else {
			var ok bool
			off, ok = r.Schedule.Next()
			clamped.Store(r.Schedule.Clamped())
			if !ok || (r.Duration > 0 && off >= r.Duration) {
				return
			}
			a := dueRequest{n: seq, check: -1}
			seq++
			// An arrival that carries a check draws no prompt, so the
			// synthetic prompts keep their order.
			if a.check = checks.arrive(start.Add(off)); a.check >= 0 {
				a.req = r.checkRequest(&r.Checks[a.check])
			} else if a.req, ok = next(); !ok {
				return
			}
			group = append(group, a)
		}
		at := start.Add(off)
		// The group's senders start before its instant and wait for it
		// at a gate: at the instant only the admission of each row is
		// left between one send and the next, not a goroutine's start.
		gate := make(chan struct{})
		for i := range group {
			a := &group[i]
			wg.Add(1)
			go func(a *dueRequest) {
				defer wg.Done()
				<-gate
				if a.fl == nil {
					return // dropped, or the run stopped before its instant
				}
				obs := &observation.Request{Seq: a.n, Scheduled: at}
				r.Client.Do(ctx, r.Target, a.req, obs)
				if a.window != nil && obs.Sent.IsZero() {
					a.window.sent() // never sent (its request could not be built)
				}
				inFlightSet.remove(a.fl)
				inFlight.Add(-1)
				mon.InFlight(-1)
				if lag, ok := obs.ScheduleLag(); ok {
					lags.observe(obs.Sent, lag)
				}
				if ctx.Err() != nil && obs.Outcome != observation.Success && errors.Is(obs.Err, context.Canceled) {
					// The run was stopped (a reload, a shutdown) while this
					// request was in flight: the server did nothing wrong,
					// so it is not counted as a failure.
					return
				}
				if a.check >= 0 {
					r.observeCheck(ctx, mon, a.check, obs)
					return
				}
				observer.Done(obs)
				if obs.Outcome != observation.Success && r.Logger != nil && ctx.Err() == nil {
					r.Logger.Debug("request failed", "workload", r.Name, "request_id", a.req.RequestID, "outcome", obs.Outcome, "status", obs.HTTPStatus, "err", obs.Err)
				}
			}(a)
		}
		sends.waitFor(at, len(group))
		if !wait.waitUntil(ctx, at) {
			close(gate)
			return
		}
		var dropped []int
		// Only a group's senders tell the preparation of their sends.
		var window *sendWindow
		if len(group) > 1 {
			window = sends
		}
		for i := range group {
			a := &group[i]
			reason := ""
			switch {
			case inFlight.Load() >= int64(r.MaxInFlight):
				reason = DropInFlightCap
			case r.Ceiling != nil && !r.Ceiling.Allow():
				reason = DropRateCeiling
			}
			if reason != "" {
				a.dropReason = reason
				dropped = append(dropped, i)
				continue
			}
			inFlight.Add(1)
			mon.InFlight(1)
			a.fl = inFlightSet.add(at)
			a.window = window
			// Its id, for the server's logs: the workload and the
			// arrival's sequence number.
			a.req.RequestID = r.Name + "-" + strconv.FormatUint(a.n, 10)
			if a.check >= 0 {
				a.req.Events = &requestEvents{o: Observers{}, f: a.fl, w: window}
				checks.sent(a.check, at)
			} else {
				a.req.Events = &requestEvents{o: observer, f: a.fl, w: window}
				a.req.TokenWindow = r.TokenWindow
			}
		}
		if len(group) > 1 {
			sends.release(len(group) - len(dropped))
		}
		close(gate)
		for _, i := range dropped {
			// A dropped check is counted as a dropped arrival, as before:
			// it held an arrival's place.
			observer.Dropped(&observation.Request{Seq: group[i].n, Scheduled: at, Outcome: observation.Dropped, DropReason: group[i].dropReason})
		}
	}
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
func (r *Runner) lookahead(lockstep bool) int {
	if lockstep {
		return lookaheadItems
	}
	return min(lookaheadItems, max(2, int(math.Ceil(r.MaxRate*lookaheadTime.Seconds()))))
}

func (r *Runner) request(p prompt.Prompt) *client.Request {
	return r.template().Request(p)
}

// template is the workload's request template: its sampling and timeout.
func (r *Runner) template() plan.Template {
	return plan.Template{Sampling: r.Sampling, Timeout: r.Timeout}
}

// monitor refreshes the rate, ceiling and degradation gauges once a second.
func (r *Runner) monitor(ctx context.Context, mon Monitor, start time.Time, lags *lagWindow, clampedSeen *atomic.Uint64, fl *flights) {
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
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-stallTick.C:
			mon.Stalls(fl.scan(now, stallAfter))
		case now := <-tick.C:
			mon.Rate(r.Schedule.Rate(now.Sub(start)))
			if c := clampedSeen.Load(); c > clamped {
				mon.Clamped(c - clamped)
				clamped = c
			}
			p99, n := lags.quantile(now, 0.99)
			saturated := r.Saturation != nil && r.Saturation.P99() > threshold.Seconds()
			mon.Lag(p99, (n > 0 && p99 > threshold.Seconds()) || saturated)
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
