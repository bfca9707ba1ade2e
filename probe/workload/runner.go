// Package workload runs the continuous probe: an open-loop dispatcher sends
// each request at the instant its arrival process scheduled, whatever the
// server does, and records what the client observed as Prometheus metrics.
//
// The flow is one way: schedule -> prompt -> client -> observation -> metrics.
package workload

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// DropInFlightCap is the drop reason for an arrival that found the in-flight
// cap full at its scheduled instant.
const DropInFlightCap = "in_flight_cap"

// Schedule yields the offsets of arrivals from the start of the run.
type Schedule interface {
	Next() (offset time.Duration, ok bool)
	Rate(elapsed time.Duration) float64
	Clamped() uint64
}

// Limiter guards the wire: Take blocks until one more request may be sent
// without exceeding the ceiling.
type Limiter interface {
	Take() time.Time
}

// Prompts yields the next prompt.
type Prompts interface {
	Next() prompt.Prompt
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
	Limiter     Limiter // may be nil
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

	// The client is degraded when the schedule lag's p99 over DegradedWindow
	// exceeds DegradedLag.
	DegradedLag    time.Duration
	DegradedWindow time.Duration
	// Saturation, when set, is the process's goroutine scheduling latency:
	// its p99 above DegradedLag also marks the measurement degraded.
	Saturation interface{ P99() float64 }

	Logger *slog.Logger
	// OnResult, when set, receives every observation after it is recorded
	// (bench and tests). It must not keep obs.
	OnResult func(*observation.Request)
}

// Run sends requests until the schedule ends, Duration passes or ctx is done,
// then waits for the requests in flight. Cancelling ctx cancels them.
func (r *Runner) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	window := r.DegradedWindow
	if window <= 0 {
		window = 30 * time.Second
	}
	lags := newLagWindow(window, 10)
	start := time.Now()
	r.Series.maxInFlight.Set(float64(r.MaxInFlight))
	r.Series.maxRate.Set(r.MaxRate)
	r.Series.rate.Set(r.Schedule.Rate(0))

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

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		off, ok := r.Schedule.Next()
		clamped.Store(r.Schedule.Clamped())
		if !ok || (r.Duration > 0 && off >= r.Duration) {
			return
		}
		// Draw the prompt before the scheduled instant, so its cost never
		// becomes schedule lag.
		p := r.Prompts.Next()
		at := start.Add(off)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		if r.Limiter != nil {
			r.Limiter.Take()
		}
		if inFlight.Load() >= int64(r.MaxInFlight) {
			r.Series.Drop(DropInFlightCap)
			if r.OnResult != nil {
				r.OnResult(&observation.Request{Scheduled: at, Outcome: observation.Dropped, DropReason: DropInFlightCap})
			}
			continue
		}
		inFlight.Add(1)
		r.Series.inFlight.Inc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			obs := &observation.Request{Scheduled: at}
			r.Client.Do(ctx, r.Target, r.request(p), obs)
			inFlight.Add(-1)
			r.Series.inFlight.Dec()
			if lag, ok := obs.ScheduleLag(); ok {
				lags.observe(obs.Sent, lag)
			}
			r.Series.Observe(obs)
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
