package workload

import (
	"context"
	"time"
)

// waiter sleeps until a scheduled instant.
type waiter interface {
	// waitUntil returns when at has come (true) or ctx is done (false).
	waitUntil(ctx context.Context, at time.Time) bool
	close()
}

// timerWaiter uses the Go runtime's timers. When the process is otherwise
// idle, the runtime waits for them in epoll_wait with a millisecond timeout,
// so they fire up to 1 ms late; newWaiter prefers a kernel timer where the
// platform has one.
type timerWaiter struct{ t *time.Timer }

func newTimerWaiter() *timerWaiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &timerWaiter{t: t}
}

func (w *timerWaiter) waitUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	w.t.Reset(d)
	select {
	case <-ctx.Done():
		w.t.Stop()
		return false
	case <-w.t.C:
		return true
	}
}

func (w *timerWaiter) close() { w.t.Stop() }
