package workload

import (
	"context"
	"testing"
	"time"
)

func TestWaiterWaitsAndCancels(t *testing.T) {
	for name, w := range map[string]waiter{"default": newWaiter(), "timer": newTimerWaiter()} {
		t.Run(name, func(t *testing.T) {
			defer w.close()
			for i := 0; i < 3; i++ {
				at := time.Now().Add(5 * time.Millisecond)
				if !w.waitUntil(context.Background(), at) {
					t.Fatal("wait returned false without cancellation")
				}
				if now := time.Now(); now.Before(at) {
					t.Fatalf("woke %v before the instant", at.Sub(now))
				}
			}
			// A past instant returns at once.
			if !w.waitUntil(context.Background(), time.Now().Add(-time.Second)) {
				t.Fatal("past instant")
			}
			// Cancellation ends a long wait, and the waiter still works after.
			ctx, cancel := context.WithCancel(context.Background())
			go func() { time.Sleep(10 * time.Millisecond); cancel() }()
			start := time.Now()
			if w.waitUntil(ctx, time.Now().Add(time.Hour)) {
				t.Fatal("cancelled wait returned true")
			}
			if time.Since(start) > 10*time.Second {
				t.Fatal("cancellation did not end the wait")
			}
			at := time.Now().Add(2 * time.Millisecond)
			if !w.waitUntil(context.Background(), at) || time.Now().Before(at) {
				t.Fatal("waiter broken after a cancellation")
			}
		})
	}
}
