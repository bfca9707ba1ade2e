package workload

import (
	"context"
	"time"
)

// Window holds durations observed over a sliding window, for their p99: the
// runner's schedule lag, a replay's drift (probe/live).
type Window struct{ w *lagWindow }

// NewWindow returns a window of d (10 slots).
func NewWindow(d time.Duration) *Window { return &Window{newLagWindow(d, 10)} }

// Observe adds d, observed at at.
func (w *Window) Observe(at time.Time, d time.Duration) { w.w.observe(at, d) }

// P99 is the p99 of the durations of the window ending now, in seconds.
func (w *Window) P99(now time.Time) float64 {
	p, _ := w.w.quantile(now, 0.99)
	return p
}

// Waiter waits until an instant with the runner's precision (wait.go): a
// source that waits for its own instants (sessions) uses it.
type Waiter interface {
	// WaitUntil returns at at, or false when ctx is done first.
	WaitUntil(ctx context.Context, at time.Time) bool
	// Close frees the waiter; it is not used after.
	Close()
}

// NewWaiter returns a Waiter.
func NewWaiter() Waiter { return exportedWaiter{newWaiter()} }

type exportedWaiter struct{ w waiter }

func (e exportedWaiter) WaitUntil(ctx context.Context, at time.Time) bool {
	return e.w.waitUntil(ctx, at)
}
func (e exportedWaiter) Close() { e.w.close() }
