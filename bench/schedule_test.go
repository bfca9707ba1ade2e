package bench

import (
	"context"
	"testing"
	"time"
)

type offsets struct {
	offs []time.Duration
	i    int
}

func (o *offsets) Next() (time.Duration, bool) {
	if o.i >= len(o.offs) {
		return 0, false
	}
	o.i++
	return o.offs[o.i-1], true
}
func (o *offsets) Rate(time.Duration) float64 { return 1 }
func (o *offsets) Clamped() uint64            { return 0 }

// TestStopSchedule: arrivals before the limit pass; the first at or after it
// asks decide, which extends once and then stops; nothing at or after the
// final limit is ever yielded.
func TestStopSchedule(t *testing.T) {
	in := &offsets{offs: []time.Duration{1, 5, 10, 12, 19, 20, 25}}
	decisions := 0
	s := &stopSchedule{inner: in, ctx: context.Background(), t0: time.Now().Add(-time.Hour), limit: 10,
		decide: func() (time.Duration, bool) {
			decisions++
			return 20, decisions == 1
		}}
	var got []time.Duration
	for {
		off, ok := s.Next()
		if !ok {
			break
		}
		got = append(got, off)
	}
	want := []time.Duration{1, 5, 10, 12, 19}
	if len(got) != len(want) || decisions != 2 || s.ended {
		t.Fatalf("got %v after %d decisions, want %v after 2", got, decisions, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	// An inner schedule that runs out is reported.
	s = &stopSchedule{inner: &offsets{offs: []time.Duration{1}}, ctx: context.Background(), t0: time.Now(), limit: time.Hour}
	s.Next()
	if _, ok := s.Next(); ok || !s.ended {
		t.Error("the end of the inner schedule is not reported")
	}
}

// TestStopScheduleWaitsForLimit: the decision is taken at the limit's
// instant, not before (requests in flight finish their window).
func TestStopScheduleWaitsForLimit(t *testing.T) {
	t0 := time.Now()
	var decidedAt time.Time
	s := &stopSchedule{inner: &offsets{offs: []time.Duration{time.Hour}}, ctx: context.Background(), t0: t0, limit: 30 * time.Millisecond,
		decide: func() (time.Duration, bool) { decidedAt = time.Now(); return 0, false }}
	if _, ok := s.Next(); ok {
		t.Fatal("an arrival past the limit was yielded")
	}
	if decidedAt.Sub(t0) < 30*time.Millisecond {
		t.Errorf("decided %v after t0, before the limit", decidedAt.Sub(t0))
	}
	// Cancelling the context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s = &stopSchedule{inner: &offsets{offs: []time.Duration{time.Hour}}, ctx: ctx, t0: time.Now(), limit: time.Hour,
		decide: func() (time.Duration, bool) { t.Error("decided after cancel"); return 0, false }}
	if _, ok := s.Next(); ok {
		t.Error("yielded after cancel")
	}
}

func TestClosedLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := newClosedLoop(ctx, 2)
	for i := 0; i < 2; i++ {
		if _, ok := c.Next(); !ok {
			t.Fatal("a free slot was not granted")
		}
	}
	got := make(chan bool)
	go func() { _, ok := c.Next(); got <- ok }()
	select {
	case <-got:
		t.Fatal("a third client ran while two were in flight")
	case <-time.After(20 * time.Millisecond):
	}
	c.release()
	if ok := <-got; !ok {
		t.Fatal("a released slot was not granted")
	}
	go func() { _, ok := c.Next(); got <- ok }()
	cancel()
	if ok := <-got; ok {
		t.Error("granted after cancel")
	}
}
