package arrival

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/ratelimit"
)

// fakeClock implements ratelimit.Clock without real sleeping: Sleep moves the
// clock forward. It is safe for concurrent use and never goes backwards.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

var _ ratelimit.Clock = (*fakeClock)(nil)

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(d time.Duration) { c.advance(d) }

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
}

// TestWireLimiterCatchUp simulates a dispatcher that sometimes stalls and
// then fires its overdue sends back to back: the instants the limiter lets
// sends through must stay 1/maxRate apart (to the 1 ns truncation
// NewWireLimiter documents), so that no window of length W sees more than
// floor((W+1ns)·maxRate)+1 sends.
func TestWireLimiterCatchUp(t *testing.T) {
	for i, maxRate := range []float64{0.5, 3, 123.4, 1000, 1e6} {
		t.Run(time.Duration(1e9/maxRate).String(), func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			lim := NewWireLimiter(maxRate, ratelimit.WithClock(clock))
			p := 1e9 / maxRate
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			var sends []time.Time
			for range 5000 {
				switch rng.IntN(10) {
				case 0: // a stall: the dispatcher falls behind
					clock.advance(time.Duration(rng.Float64() * 50 * p))
				case 1, 2, 3: // some work between sends
					clock.advance(time.Duration(rng.Float64() * p))
				default: // catching up: the next send is already overdue
				}
				lim.Take()
				sends = append(sends, clock.Now())
			}
			checkSpacing(t, sends, p)
		})
	}
}

// TestWireLimiterConcurrent: several goroutines share one limiter; the
// instants it grants, sorted, must still be spaced by the ceiling.
func TestWireLimiterConcurrent(t *testing.T) {
	const maxRate = 250.0
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	lim := NewWireLimiter(maxRate, ratelimit.WithClock(clock))
	var (
		mu     sync.Mutex
		grants []time.Time
		wg     sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for range 300 {
				at := lim.Take()
				mu.Lock()
				grants = append(grants, at)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(grants, func(a, b time.Time) int { return a.Compare(b) })
	checkSpacing(t, grants, 1e9/maxRate)
}

// TestWireLimiterKeepsPace: a dispatcher that is on time, calling exactly at
// the ceiling's spacing, must never be held back (a guard that delayed every
// send a little would build an unbounded lag).
func TestWireLimiterKeepsPace(t *testing.T) {
	for _, maxRate := range []float64{3, 7, 1000, 999} {
		clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
		lim := NewWireLimiter(maxRate, ratelimit.WithClock(clock))
		s, err := New(Config{Process: ProcessConstant, Rate: maxRate}, 0)
		if err != nil {
			t.Fatal(err)
		}
		start := clock.Now()
		for k := range 10_000 {
			off, _ := s.Next()
			clock.advance(start.Add(off).Sub(clock.Now()))
			lim.Take()
			if lag := clock.Now().Sub(start.Add(off)); lag > 1 {
				t.Fatalf("rate %v: send %d held back %v behind its scheduled instant", maxRate, k, lag)
			}
		}
	}
}

// TestWireLimiterLatenessDoesNotAccumulate: a dispatcher at the ceiling
// whose timer wakes it a little late each time (less than one interval) is
// never held back more than its own lateness: the limiter does not inherit
// one send's lateness into the next. (ratelimit anchors its grid at the
// first Take, so the first send's lateness is the one offset every later
// send may inherit.)
func TestWireLimiterLatenessDoesNotAccumulate(t *testing.T) {
	for i, maxRate := range []float64{200, 1000} {
		clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
		lim := NewWireLimiter(maxRate, ratelimit.WithClock(clock))
		s, err := New(Config{Process: ProcessConstant, Rate: maxRate}, 0)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		start := clock.Now()
		p := time.Duration(1e9 / maxRate)
		var first time.Duration
		for k := range 10_000 {
			off, _ := s.Next()
			late := time.Duration(rng.Float64() * 0.9 * float64(p))
			clock.advance(start.Add(off + late).Sub(clock.Now()))
			lim.Take()
			if k == 0 {
				first = late
			}
			if lag := clock.Now().Sub(start.Add(off)); lag > max(late, first)+1 {
				t.Fatalf("rate %v: send %d held %v behind schedule, its own lateness was %v", maxRate, k, lag, late)
			}
		}
	}
}

func checkSpacing(t *testing.T, at []time.Time, p float64) {
	t.Helper()
	// Windows, over the run (n ≤ 5000, so the truncation adds at most 5000
	// ns): no window of length W holds more than floor((W + n·1ns)/p)+2.
	for _, w := range []float64{p, 10 * p, 100.5 * p} {
		limit := int(math.Floor((w+float64(len(at)))/p)) + 2
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

func TestNewWireLimiterPanics(t *testing.T) {
	for _, r := range []float64{0, -1, math.NaN(), math.Inf(1), 2e9} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewWireLimiter(%v) did not panic", r)
				}
			}()
			NewWireLimiter(r)
		}()
	}
}
