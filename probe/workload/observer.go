package workload

import (
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// Observer hears of a workload's requests as they happen: the live metrics
// (Series), a bench repeat's records, a replay's progress. Its methods run
// on the request goroutines, concurrently for different requests and in
// order for one; they must not keep o past the call, nor block. o.Seq
// identifies the request across its calls.
type Observer interface {
	// Sent: the request is about to be written (o.Scheduled and o.Sent set).
	Sent(o *observation.Request)
	// FirstToken: its first content event arrived (o.FirstToken set).
	FirstToken(o *observation.Request)
	// Token: a content event arrived, the first included: the last of
	// o.TokenTimes, counted in o.ContentEvents.
	Token(o *observation.Request)
	// Done: the request ended; o is complete, with its outcome.
	Done(o *observation.Request)
	// Dropped: an arrival was never sent (o.Scheduled, o.Outcome Dropped
	// and o.DropReason set).
	Dropped(o *observation.Request)
}

// Observers fans every event out to each of its observers, in order.
type Observers []Observer

// Sent implements Observer.
func (os Observers) Sent(o *observation.Request) {
	for _, x := range os {
		x.Sent(o)
	}
}

// FirstToken implements Observer.
func (os Observers) FirstToken(o *observation.Request) {
	for _, x := range os {
		x.FirstToken(o)
	}
}

// Token implements Observer.
func (os Observers) Token(o *observation.Request) {
	for _, x := range os {
		x.Token(o)
	}
}

// Done implements Observer.
func (os Observers) Done(o *observation.Request) {
	for _, x := range os {
		x.Done(o)
	}
}

// Dropped implements Observer.
func (os Observers) Dropped(o *observation.Request) {
	for _, x := range os {
		x.Dropped(o)
	}
}

// ObserveBeside is an Observe hook (the live exporter's, which gives each
// workload the observer its hook returns) that gives each workload both
// next's observer and mine's, next's first. next may be nil, or return
// nil: then mine's alone. An observer of next's that hears the stall scans
// (has Stalls) still does through the pair.
func ObserveBeside(next, mine func(*config.Target, *config.Workload) Observer) func(*config.Target, *config.Workload) Observer {
	return func(t *config.Target, w *config.Workload) Observer {
		m := mine(t, w)
		if next == nil {
			return m
		}
		other := next(t, w)
		if other == nil {
			return m
		}
		both := Observers{other, m}
		if s, ok := other.(stallsHearer); ok {
			return withStalls{both, s}
		}
		return both
	}
}

// stallsHearer is an observer that also hears the stall scans (the live
// exporter hands them to an Observe hook's observer that has the method).
type stallsHearer interface{ Stalls(StallScan) }

// withStalls is a fan-out that passes the stall scans on to the one member
// that hears them.
type withStalls struct {
	Observers
	stalls stallsHearer
}

// Stalls passes the scan on.
func (w withStalls) Stalls(s StallScan) { w.stalls.Stalls(s) }

// EndObserver implements the in-stream events of Observer as nothing, for an
// observer that needs only the ends of requests.
type EndObserver struct{}

// Sent implements Observer.
func (EndObserver) Sent(*observation.Request) {}

// FirstToken implements Observer.
func (EndObserver) FirstToken(*observation.Request) {}

// Token implements Observer.
func (EndObserver) Token(*observation.Request) {}

// Results is an Observer that hands fn every request that ended or was
// dropped (the load harness, tests).
type Results func(o *observation.Request)

// Sent implements Observer.
func (Results) Sent(*observation.Request) {}

// FirstToken implements Observer.
func (Results) FirstToken(*observation.Request) {}

// Token implements Observer.
func (Results) Token(*observation.Request) {}

// Done implements Observer.
func (f Results) Done(o *observation.Request) { f(o) }

// Dropped implements Observer.
func (f Results) Dropped(o *observation.Request) { f(o) }

// Tracer gives a request its W3C trace context at its admission, before it
// is sent (probe/otlp's head sampler): the client sends it as traceparent,
// the observation carries it to the observers. It must be cheap and must
// not block: it runs on the dispatcher, once per request.
type Tracer interface {
	Trace() observation.Trace
}

// Monitor hears of the workload itself rather than of one request: its
// limits, the requests in flight, the schedule's rate and clamps, the lag
// and degradation the runner computes, its known-answer checks and its
// state. Series is one; bench and the load harness run without (nil).
type Monitor interface {
	// Limits: the workload's in-flight cap and rate ceiling, and whether it
	// carries known-answer checks; told once, when it starts.
	Limits(maxInFlight int, maxRate float64, checks bool)
	Rate(rate float64)
	InFlight(delta int)
	Clamped(n uint64)
	Lag(p99 float64, degraded bool)
	Check(result string)
	State(state string)
	// Stalls: the latest scan of the requests in flight.
	Stalls(s StallScan)
}
