package workload

import (
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestStallScan: a request silent past the threshold is stalled, new only
// at the first scan that finds it; an event makes it alive again, and a
// later silence stalls it anew; the oldest age counts from the scheduled
// instant; a request removed is no longer scanned.
func TestStallScan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fs := newFlights()
	old := fs.add(t0)
	young := fs.add(t0.Add(1500 * time.Millisecond))
	var mu sync.Mutex
	var tokens int
	ev := &requestEvents{o: Results(func(*observation.Request) {}), f: old}
	count := Observers{ev.o, eventCounter{&mu, &tokens}}
	ev.o = count
	for _, step := range []struct {
		name   string
		at     time.Duration // since t0
		event  time.Duration // an event of old at t0 plus this, before the scan; 0: none
		remove bool          // young ends before the scan
		want   StallScan
	}{
		{"both alive", 900 * time.Millisecond, 0, false, StallScan{OldestAge: 900 * time.Millisecond}},
		{"old stalls", 2 * time.Second, 0, false, StallScan{Stalled: 1, New: 1, OldestAge: 2 * time.Second}},
		{"still stalled, not new", 2200 * time.Millisecond, 0, false, StallScan{Stalled: 1, OldestAge: 2200 * time.Millisecond}},
		{"young stalls too", 2600 * time.Millisecond, 0, false, StallScan{Stalled: 2, New: 1, OldestAge: 2600 * time.Millisecond}},
		{"old hears a token", 2700 * time.Millisecond, 2650 * time.Millisecond, false, StallScan{Stalled: 1, OldestAge: 2700 * time.Millisecond}},
		{"old stalls again", 3800 * time.Millisecond, 0, true, StallScan{Stalled: 1, New: 1, OldestAge: 3800 * time.Millisecond}},
	} {
		if step.event > 0 {
			ev.Content(&observation.Request{ContentEvents: 1, TokenTimes: []time.Time{t0.Add(step.event)}})
		}
		if step.remove {
			fs.remove(young)
		}
		if got := fs.scan(t0.Add(step.at), time.Second); got != step.want {
			t.Errorf("%s: %+v, want %+v", step.name, got, step.want)
		}
	}
	if !old.everStalled.Load() || !young.everStalled.Load() {
		t.Error("a request found stalled is not marked so")
	}
	if tokens != 1 {
		t.Errorf("the content event reached the observer %d times, want once", tokens)
	}
	if got := newFlights().scan(t0, time.Second); got != (StallScan{}) {
		t.Errorf("no request in flight: %+v", got)
	}
}

// eventCounter counts the token events it hears.
type eventCounter struct {
	mu *sync.Mutex
	n  *int
}

func (c eventCounter) Sent(*observation.Request)       {}
func (c eventCounter) FirstToken(*observation.Request) {}
func (c eventCounter) Token(*observation.Request)      { c.mu.Lock(); *c.n++; c.mu.Unlock() }
func (c eventCounter) Done(*observation.Request)       {}
func (c eventCounter) Dropped(*observation.Request)    {}

// TestByteBudget: a take within the budget passes; a request larger than
// the whole budget passes on an empty one; a take that does not fit waits
// for a give; once closed, every take, waiting or not, fails.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(10)
	if !b.take(50, 10) {
		t.Fatal("a request larger than the budget did not pass an empty one")
	}
	b.give(50)
	if !b.take(6, 10) {
		t.Fatal("6 of 10 bytes not taken")
	}
	got := make(chan bool)
	go func() { got <- b.take(6, 10) }()
	b.give(6)
	if !<-got {
		t.Fatal("a take that fits after a give failed")
	}
	go func() { got <- b.take(6, 10) }() // 4 left: waits
	b.close()
	if <-got {
		t.Error("a waiting take passed a closed budget")
	}
	if b.take(1, 10) {
		t.Error("a take passed a closed budget")
	}
}

// TestWindow: the exported window's p99 over its span, 0 once it has
// passed.
func TestWindow(t *testing.T) {
	w := NewWindow(10 * time.Second)
	now := time.Unix(1000, 0)
	for i := range 100 {
		d := time.Millisecond
		if i == 99 {
			d = time.Second
		}
		w.Observe(now, d)
	}
	if p := w.P99(now); p < 0.9e-3 || p > 1.2e-3 {
		t.Errorf("p99 of 99 × 1 ms and one 1 s: %v, want about 1 ms", p)
	}
	if p := w.P99(now.Add(time.Minute)); p != 0 {
		t.Errorf("p99 a minute later: %v, want 0", p)
	}
}
