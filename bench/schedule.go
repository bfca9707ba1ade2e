package bench

import (
	"context"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// stopSchedule wraps a repeat's schedule and ends it at the end of a
// measured window. When the next arrival falls at or after the current
// limit, it waits for the limit instant (the requests in flight keep
// running), then asks decide whether to extend the run, and either yields
// the arrival or ends the schedule. Deciding before the arrival is handed
// to the runner means no request is sent past a limit that is not
// extended. It runs on the runner's dispatching goroutine, as the runner
// calls Next.
type stopSchedule struct {
	inner workload.Schedule
	ctx   context.Context
	t0    time.Time
	// limit is the offset from t0 at which the current window ends.
	limit time.Duration
	// decide returns the new limit to extend to, or false to stop.
	decide func() (time.Duration, bool)
	// resolve, while not nil, gives the first limit once it is known (the
	// end of the first window after a warm-up that lasts until the
	// pipeline is full); until then nothing is stopped.
	resolve func() (time.Duration, bool)
	// ended says the inner schedule ran out (a trace without loop).
	ended bool
	// halt, when closed, ends the schedule at once: the repeat stopped
	// early (failWatch). nil never does.
	halt <-chan struct{}
}

func (s *stopSchedule) Next() (time.Duration, bool) {
	off, ok := s.inner.Next()
	if !ok {
		s.ended = true
		return 0, false
	}
	select {
	case <-s.halt:
		return 0, false
	default:
	}
	if s.resolve != nil {
		l, known := s.resolve()
		if !known {
			return off, true
		}
		s.limit, s.resolve = l, nil
	}
	for off >= s.limit {
		if d := time.Until(s.t0.Add(s.limit)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return 0, false
			case <-s.halt:
				t.Stop()
				return 0, false
			case <-t.C:
			}
		}
		next, extend := s.decide()
		if !extend || next <= s.limit {
			return 0, false
		}
		s.limit = next
	}
	return off, true
}

func (s *stopSchedule) Rate(elapsed time.Duration) float64 { return s.inner.Rate(elapsed) }
func (s *stopSchedule) Clamped() uint64                    { return s.inner.Clamped() }

// closedLoop is a closed-loop schedule of n clients: the next arrival is due
// as soon as one of n slots is free, and a slot frees when a request ends.
// With the runner's in-flight cap at n, no arrival is ever dropped.
type closedLoop struct {
	ctx   context.Context
	slots chan struct{}
	n     int
	t0    time.Time
}

func newClosedLoop(ctx context.Context, n int) *closedLoop {
	c := &closedLoop{ctx: ctx, slots: make(chan struct{}, n), n: n}
	for i := 0; i < n; i++ {
		c.slots <- struct{}{}
	}
	return c
}

// Next blocks until a slot is free; the offset is now, from the first call
// (just after the runner's start, so the runner sends at once).
func (c *closedLoop) Next() (time.Duration, bool) {
	select {
	case <-c.slots:
	case <-c.ctx.Done():
		return 0, false
	}
	now := time.Now()
	if c.t0.IsZero() {
		c.t0 = now
	}
	return now.Sub(c.t0), true
}

// release frees the slot of a request that ended (or was dropped).
// The closed loop frees a slot for each request that ended or was dropped.
var _ workload.Observer = (*closedLoop)(nil)

// Done implements workload.Observer.
func (c *closedLoop) Done(*observation.Request) { c.release() }

// Dropped implements workload.Observer.
func (c *closedLoop) Dropped(*observation.Request) { c.release() }

// Sent implements workload.Observer.
func (c *closedLoop) Sent(*observation.Request) {}

// FirstToken implements workload.Observer.
func (c *closedLoop) FirstToken(*observation.Request) {}

// Token implements workload.Observer.
func (c *closedLoop) Token(*observation.Request) {}

func (c *closedLoop) release() {
	select {
	case c.slots <- struct{}{}:
	default:
	}
}

func (c *closedLoop) Rate(time.Duration) float64 { return 0 }
func (c *closedLoop) Clamped() uint64            { return 0 }
