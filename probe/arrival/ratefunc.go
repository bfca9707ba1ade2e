package arrival

import (
	"math"
	"sort"
	"time"
)

// segment is one piece of the rate function r(t): on [start, start+dur] the
// rate moves linearly from `from` to `to`. An infinite segment holds a
// constant rate for ever and is always the last one.
type segment struct {
	start    time.Duration
	dur      time.Duration // zero when infinite
	infinite bool
	from, to float64 // req/s at the two ends
	slope    float64 // req/s per second; zero when infinite
	// lambda is the expected number of arrivals in the segment, ∫ r dt. It
	// is +Inf for an infinite segment with a positive rate and 0 for an
	// infinite segment at rate zero (which therefore ends the process).
	lambda float64
}

func linearSegment(start, dur time.Duration, from, to float64) segment {
	sec := dur.Seconds()
	return segment{
		start:  start,
		dur:    dur,
		from:   from,
		to:     to,
		slope:  (to - from) / sec,
		lambda: (from + to) / 2 * sec,
	}
}

func foreverSegment(start time.Duration, rate float64) segment {
	g := segment{start: start, infinite: true, from: rate, to: rate}
	if rate > 0 {
		g.lambda = math.Inf(1)
	}
	return g
}

// rateAt is r at sec seconds after the segment's start.
func (g *segment) rateAt(sec float64) float64 {
	if g.infinite {
		return g.from
	}
	return max(0, g.from+g.slope*sec)
}

// invert returns the offset t in seconds from the segment's start at which
// ∫_0^t r = l, for 0 ≤ l ≤ lambda. It is exact up to float64 rounding: a
// constant rate divides, a linear rate solves the quadratic
// from·t + slope·t²/2 = l.
func (g *segment) invert(l float64) float64 {
	if l <= 0 {
		// Also covers a zero-rate stretch reached with no operational time
		// left over: the arrival sits on the segment's start, never inside
		// the stretch.
		return 0
	}
	if g.slope == 0 {
		return l / g.from // from > 0 here: a zero-rate segment has lambda 0
	}
	// t = (-from + sqrt(from² + 2·slope·l)) / slope, written as
	// 2l / (from + sqrt(...)) so that it neither cancels when the slope is
	// small nor divides by zero when it is zero or negative. The denominator
	// is positive: either from > 0, or from == 0 and then slope > 0 (a
	// segment starting at zero with l > 0 must be rising).
	disc := max(0, g.from*g.from+2*g.slope*l) // a descending ramp's end can round below 0
	t := 2 * l / (g.from + math.Sqrt(disc))
	return min(t, g.dur.Seconds())
}

// rateFunc is the configured rate function, a list of contiguous segments
// starting at 0.
type rateFunc []segment

// at returns r(elapsed); 0 before the start and after the end of a finite
// function.
func (f rateFunc) at(elapsed time.Duration) float64 {
	if elapsed < 0 || len(f) == 0 {
		return 0
	}
	// The last segment whose start is ≤ elapsed.
	i := sort.Search(len(f), func(i int) bool { return f[i].start > elapsed }) - 1
	g := &f[i]
	if !g.infinite && elapsed >= g.start+g.dur {
		return 0 // past the end of a finite function
	}
	return g.rateAt((elapsed - g.start).Seconds())
}

// peak is the highest rate the function ever reaches. Linear pieces peak at
// an end.
func (f rateFunc) peak() float64 {
	p := 0.0
	for i := range f {
		p = max(p, f[i].from, f[i].to)
	}
	return p
}
