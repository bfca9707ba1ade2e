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
	"sync"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
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
// called in the dispatcher right after Next, with the request built from
// that prompt, and may change it; the function it returns, if not nil, is
// called with the request's observation once recorded, or with the dropped
// arrival's.
type Requests interface {
	Request(req *client.Request) func(*observation.Request)
}

// Doer sends one request and fills its observation.
type Doer interface {
	Do(ctx context.Context, t *client.Target, r *client.Request, obs *observation.Request)
}

// Runner drives one workload against one target.
type Runner struct {
	Name        string
	Target      *client.Target
	Schedule    Schedule
	Ceiling     Ceiling // may be nil
	Prompts     Prompts
	Client      Doer
	Series      *Series
	MaxInFlight int
	MaxRate     float64
	// Duration ends the run after that long; 0 runs until ctx is done.
	Duration time.Duration
	Sampling config.Sampling
	// Timeout bounds each request.
	Timeout time.Duration
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

	// Prepare, when set, builds Prompts at the start of Run (the prompt
	// calibration against the server's /tokenize, which can take long when
	// the tokenizer stalls): the workload is "calibrating" meanwhile, and
	// "failed" if it returns an error. Workloads calibrate concurrently, each
	// starting as soon as its own prompts are ready.
	Prepare func(ctx context.Context) (Prompts, error)

	Logger *slog.Logger
	// OnResult, when set, receives every observation after it is recorded
	// (bench and tests). It must not keep obs.
	OnResult func(*observation.Request)

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
	if r.Series != nil {
		r.Series.SetState(state)
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
	start := time.Now()
	r.Series.maxInFlight.Set(float64(r.MaxInFlight))
	r.Series.maxRate.Set(r.MaxRate)
	r.Series.rate.Set(r.Schedule.Rate(0))
	checks := newCheckSchedule(r.Checks)
	if len(r.Checks) > 0 && r.Series.checks == nil {
		r.Series.InitChecks()
	}

	var inFlight atomic.Int64
	// The schedule belongs to this goroutine; the monitor reads its clamp
	// count through this copy.
	var clamped atomic.Uint64
	var wg sync.WaitGroup
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		r.monitor(ctx, start, lags, &clamped)
	}()
	defer func() {
		wg.Wait()
		cancel()
		<-monitorDone
	}()

	wait := newWaiter()
	defer wait.close()
	for {
		off, ok := r.Schedule.Next()
		clamped.Store(r.Schedule.Clamped())
		if !ok || (r.Duration > 0 && off >= r.Duration) {
			return
		}
		at := start.Add(off)
		// Draw the prompt before the scheduled instant, so its cost never
		// becomes schedule lag. An arrival that carries a check draws none,
		// so the synthetic prompts keep their order.
		check := checks.arrive(at)
		var req *client.Request
		var follow func(*observation.Request)
		if check >= 0 {
			req = r.checkRequest(&r.Checks[check])
		} else {
			req = r.request(r.Prompts.Next())
			if rs, ok := r.Prompts.(Requests); ok {
				follow = rs.Request(req)
			}
		}
		if !wait.waitUntil(ctx, at) {
			return
		}
		reason := ""
		switch {
		case inFlight.Load() >= int64(r.MaxInFlight):
			reason = DropInFlightCap
		case r.Ceiling != nil && !r.Ceiling.Allow():
			reason = DropRateCeiling
		}
		if reason != "" {
			r.Series.Drop(reason)
			if r.OnResult != nil {
				r.OnResult(&observation.Request{Scheduled: at, Outcome: observation.Dropped, DropReason: reason})
			}
			if follow != nil {
				follow(&observation.Request{Scheduled: at, Outcome: observation.Dropped, DropReason: reason})
			}
			continue
		}
		inFlight.Add(1)
		r.Series.inFlight.Inc()
		if check >= 0 {
			checks.sent(check, at)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			obs := &observation.Request{Scheduled: at}
			r.Client.Do(ctx, r.Target, req, obs)
			inFlight.Add(-1)
			r.Series.inFlight.Dec()
			if lag, ok := obs.ScheduleLag(); ok {
				lags.observe(obs.Sent, lag)
			}
			if ctx.Err() != nil && obs.Outcome != observation.Success && errors.Is(obs.Err, context.Canceled) {
				// The run was stopped (a reload, a shutdown) while this
				// request was in flight: the server did nothing wrong,
				// so it is not counted as a failure.
				return
			}
			if check >= 0 {
				r.observeCheck(ctx, check, obs)
				return
			}
			r.Series.Observe(obs)
			if follow != nil {
				follow(obs)
			}
			if obs.Outcome != observation.Success && r.Logger != nil && ctx.Err() == nil {
				r.Logger.Debug("request failed", "workload", r.Name, "outcome", obs.Outcome, "status", obs.HTTPStatus, "err", obs.Err)
			}
			if r.OnResult != nil {
				r.OnResult(obs)
			}
		}()
	}
}

func (r *Runner) request(p prompt.Prompt) *client.Request {
	return &client.Request{
		Prompt:      p.Text,
		MaxTokens:   p.OutputTokens,
		IgnoreEOS:   r.Sampling.IgnoreEOS,
		MinTokens:   r.Sampling.MinTokens,
		Temperature: r.Sampling.Temperature,
		TopP:        r.Sampling.TopP,
		Seed:        r.Sampling.Seed,
		Timeout:     r.Timeout,
	}
}

// monitor refreshes the rate, ceiling and degradation gauges once a second.
func (r *Runner) monitor(ctx context.Context, start time.Time, lags *lagWindow, clampedSeen *atomic.Uint64) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var clamped uint64
	threshold := r.DegradedLag
	if threshold <= 0 {
		threshold = 10 * time.Millisecond
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			r.Series.rate.Set(r.Schedule.Rate(now.Sub(start)))
			if c := clampedSeen.Load(); c > clamped {
				r.Series.clamped.Add(float64(c - clamped))
				clamped = c
			}
			p99, n := lags.quantile(now, 0.99)
			r.Series.lagP99.Set(p99)
			saturated := r.Saturation != nil && r.Saturation.P99() > threshold.Seconds()
			if (n > 0 && p99 > threshold.Seconds()) || saturated {
				r.Series.degraded.Set(1)
			} else {
				r.Series.degraded.Set(0)
			}
		}
	}
}
