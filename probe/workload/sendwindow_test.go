package workload

import (
	"context"
	"testing"
	"time"
)

// TestSendWindowStandAside: the preparation waits for a group due within
// standAsideLead and for a released group's senders, never for a single
// arrival, a group far off, or longer than standAsideMax.
func TestSendWindowStandAside(t *testing.T) {
	for _, tc := range []struct {
		name     string
		set      func(w *sendWindow, now time.Time)
		min, max time.Duration
	}{
		{"nothing due", func(*sendWindow, time.Time) {}, 0, 500 * time.Millisecond},
		{"a single arrival due now", func(w *sendWindow, now time.Time) { w.waitFor(now.Add(time.Millisecond), 1) }, 0, 500 * time.Millisecond},
		{"a group due in 30 ms", func(w *sendWindow, now time.Time) { w.waitFor(now.Add(30*time.Millisecond), 20) }, 0, 500 * time.Millisecond},
		{"a group due in 1.5 ms", func(w *sendWindow, now time.Time) { w.waitFor(now.Add(1500*time.Microsecond), 20) }, 1500 * time.Microsecond, time.Second},
		{"senders that never send", func(w *sendWindow, _ time.Time) { w.release(3) }, standAsideMax, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &sendWindow{}
			now := time.Now()
			tc.set(w, now)
			w.standAside(context.Background())
			if el := time.Since(now); el < tc.min || el > tc.max {
				t.Errorf("stood aside %v, want %v to %v", el, tc.min, tc.max)
			}
		})
	}
	// Senders that send let it go on, long before its longest wait.
	w := &sendWindow{most: time.Minute}
	w.release(2)
	go func() { time.Sleep(time.Millisecond); w.sent(); w.sent() }()
	start := time.Now()
	w.standAside(context.Background())
	if el := time.Since(start); el < time.Millisecond || el >= 30*time.Second {
		t.Errorf("stood aside %v for two senders that sent after 1 ms", el)
	}
}
