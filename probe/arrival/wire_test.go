package arrival

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// checkWindows: no window of length W holds more than floor(W·maxRate)+burst
// allowed sends.
func checkWindows(t *testing.T, at []time.Time, maxRate float64, burst int) {
	t.Helper()
	p := float64(time.Second) / maxRate
	for _, w := range []float64{p / 2, p, 10 * p, 100.5 * p} {
		limit := int(math.Floor(w/p)) + burst
		i := 0
		for j := range at {
			for float64(at[j].Sub(at[i])) > w {
				i++
			}
			if j-i+1 > limit {
				t.Fatalf("%d sends in a window of %.0f ns, want ≤ %d", j-i+1, w, limit)
			}
		}
	}
}

// TestWireCeilingStalls: a dispatcher that sometimes stalls and then finds
// its arrivals overdue may send at most WireBurst of them at once; the wire
// never exceeds the ceiling over any window.
func TestWireCeilingStalls(t *testing.T) {
	for i, maxRate := range []float64{0.5, 3, 123.4, 1000, 1e6} {
		tol := []time.Duration{0, 10 * time.Millisecond}[i%2]
		lim := NewWireCeiling(maxRate, tol)
		now := time.Unix(1_700_000_000, 0)
		p := float64(time.Second) / maxRate
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		var sent []time.Time
		refused := 0
		for range 5000 {
			switch rng.IntN(10) {
			case 0:
				now = now.Add(time.Duration(rng.Float64() * 50 * p))
			case 1, 2, 3:
				now = now.Add(time.Duration(rng.Float64() * p))
			}
			if lim.AllowN(now, 1) {
				sent = append(sent, now)
			} else {
				refused++
			}
		}
		if refused == 0 {
			t.Errorf("rate %v: a dispatcher firing overdue arrivals back to back was never refused", maxRate)
		}
		checkWindows(t, sent, maxRate, WireBurstFor(maxRate, tol))
	}
}

// TestWireCeilingLateness: a schedule at its ceiling whose every send is a
// little late (less than one interval) loses nothing, and lateness does not
// carry over.
func TestWireCeilingLateness(t *testing.T) {
	for i, maxRate := range []float64{3, 200, 1000} {
		s, err := New(config.Arrival{Process: config.ProcessConstant, Rate: maxRate}, 0)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Unix(1_700_000_000, 0)
		lim := NewWireCeiling(maxRate, 0)
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		p := time.Duration(float64(time.Second) / maxRate)
		var sent []time.Time
		for k := range 10_000 {
			off, _ := s.Next()
			at := start.Add(off + time.Duration(rng.Float64()*0.9*float64(p)))
			if !lim.AllowN(at, 1) {
				t.Fatalf("rate %v: send %d, late by less than one interval, was refused", maxRate, k)
			}
			sent = append(sent, at)
		}
		checkWindows(t, sent, maxRate, WireBurst)
	}
}

// TestWireCeilingAfterStall: after a stall of many intervals, two overdue
// sends go and the rest are refused; the next on-time arrival goes.
func TestWireCeilingAfterStall(t *testing.T) {
	const maxRate = 100.0
	p := 10 * time.Millisecond
	lim := NewWireCeiling(maxRate, 0)
	start := time.Unix(1_700_000_000, 0)
	for k := 1; k <= 5; k++ {
		if !lim.AllowN(start.Add(time.Duration(k)*p), 1) {
			t.Fatalf("on-time send %d refused", k)
		}
	}
	// A 100 ms stall: arrivals 6..15 are all overdue at t = 15p.
	late := start.Add(15 * p)
	allowed := 0
	for k := 6; k <= 15; k++ {
		if lim.AllowN(late, 1) {
			allowed++
		}
	}
	if allowed != WireBurst {
		t.Errorf("%d overdue sends allowed at once, want %d", allowed, WireBurst)
	}
	if !lim.AllowN(start.Add(17*p), 1) {
		t.Error("the next on-time arrival after the stall was refused")
	}
}

// TestWireCeilingTolerance: with a tolerance of 10 ms at 1000 req/s, a
// dispatcher late by up to 10 ms loses nothing, and the bucket is 11.
func TestWireCeilingTolerance(t *testing.T) {
	const maxRate = 1000.0
	if b := WireBurstFor(maxRate, 10*time.Millisecond); b != 11 {
		t.Fatalf("burst = %d, want 11", b)
	}
	s, err := New(config.Arrival{Process: config.ProcessConstant, Rate: maxRate}, 0)
	if err != nil {
		t.Fatal(err)
	}
	lim := NewWireCeiling(maxRate, 10*time.Millisecond)
	start := time.Unix(1_700_000_000, 0)
	rng := rand.New(rand.NewPCG(3, 3))
	last := start
	for k := range 10_000 {
		off, _ := s.Next()
		// Late by up to 9 ms, never earlier than the previous send.
		at := start.Add(off + time.Duration(rng.Float64()*9e6))
		if at.Before(last) {
			at = last
		}
		last = at
		if !lim.AllowN(at, 1) {
			t.Fatalf("send %d late by %v refused", k, at.Sub(start.Add(off)))
		}
	}
}

func TestNewWireCeilingPanics(t *testing.T) {
	for _, r := range []float64{0, -1, math.NaN(), math.Inf(1), 2e9} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewWireCeiling(%v) did not panic", r)
				}
			}()
			NewWireCeiling(r, 0)
		}()
	}
}
