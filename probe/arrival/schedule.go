// Package arrival decides when an open-loop load generator sends each request.
//
// A Schedule is a pure, seeded function of its configuration, a
// config.Arrival (which internal/config validates): it yields the offsets,
// from the start of the run, at which requests are due, whatever the server
// does. The dispatcher sleeps until each offset and sends. Every process is one
// model: a rate function r(t) (constant, linear ramp, or stages of either),
// and unit-mean renewal gaps in operational time Λ(t) = ∫_0^t r(s) ds, inverted
// exactly (division for constant pieces, the quadratic for linear ones).
//
// The ceiling MaxRate is applied in the schedule itself: consecutive emitted
// arrivals are at least 1/MaxRate apart. The ideal timeline is computed
// independently of the clamp, so a burst that was held back delays only the
// arrivals that follow it closely, and the schedule returns to the ideal
// instants as soon as the process lets it: no drift accumulates.
// NewWireCeiling adds a second guard right before each send.
package arrival

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// pcgStream is the second PCG seed word. Fixed, so that a seed alone names a
// schedule.
const pcgStream = 0x9e3779b97f4a7c15

// Rebasing keeps the float64 offset from the current base small inside the
// infinite tail, so that precision stays far below a nanosecond however long
// the process runs. Each rebase rounds by at most 2^-53 of the offset (1e-4
// ns at 2^40 ns), which is negligible and does not bias.
const (
	rebaseArrivals = 1024    // operational time units since the base
	rebaseNs       = 1 << 40 // ~18 minutes
)

// clampCountNs is the smallest move by the ceiling that Clamped counts. The
// ideal and the clamped timelines are computed by different float64 paths,
// and a constant process running exactly at its ceiling differs from
// last+1/MaxRate by far less than this; such a move is rounding, not the
// ceiling at work.
const clampCountNs = 1.0

// Schedule yields the arrival offsets of one run. Next is not safe for
// concurrent use; Rate, MaxRate and Clamped are, and may be read while
// another goroutine calls Next.
type Schedule struct {
	fn      rateFunc
	process config.Process
	gamma   gammaSampler
	rng     *rand.Rand
	maxRate float64
	minGap  float64 // ns between emitted arrivals, 1e9/maxRate

	// The ideal timeline.
	seg  int     // index of the current segment in fn
	base instant // the instant where lrel is 0 (the segment's start, or a rebase point)
	lrel float64 // operational time since base
	done bool

	// The emitted timeline.
	last    instant // the previous emitted arrival, before rounding
	emitted bool    // whether last is set
	clamped atomic.Uint64
}

// New builds the schedule for cfg. The seed selects the random stream (PCG);
// the same seed and config always yield the same offsets. A seed is ignored
// by config.ProcessConstant. The error, if any, is cfg.Validate's (a
// *config.FieldError).
func New(cfg config.Arrival, seed int64) (*Schedule, error) {
	fn, maxRate, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	s := &Schedule{
		fn:      fn,
		process: cfg.Process,
		rng:     rand.New(rand.NewPCG(uint64(seed), pcgStream)),
		maxRate: maxRate,
		minGap:  1e9 / maxRate,
		base:    instant{ns: int64(fn[0].start)},
	}
	if cfg.Process == config.ProcessGamma {
		s.gamma = newGammaSampler(cfg.Burstiness)
	}
	return s, nil
}

// Next returns the offset from the start of the run of the next arrival, and
// false once a finite process has ended (and on every call after that).
// Offsets never decrease. Each is the exact arrival instant rounded to the
// nearest nanosecond, so a constant process at rate r yields round(k·1e9/r)
// ns: consecutive gaps are within 1 ns of 1/r and never drift.
//
// An arrival the ceiling delayed may land after the end of the last stage or
// inside a zero-rate stretch that follows a burst; it is still returned, and
// counted by Clamped.
//
// A process also ends if its next arrival would lie beyond the largest
// time.Duration (about 292 years).
func (s *Schedule) Next() (time.Duration, bool) {
	if s.done {
		return 0, false
	}
	s.lrel += s.gap()
	g := &s.fn[s.seg]
	for s.lrel > g.lambda { // never true in an infinite segment with a positive rate
		s.lrel -= g.lambda
		s.seg++
		if s.seg == len(s.fn) {
			s.done = true
			return 0, false
		}
		g = &s.fn[s.seg]
		s.base = instant{ns: int64(g.start)}
	}
	off := g.invert(s.lrel) * 1e9
	ideal, ok := s.base.add(off)
	if !ok {
		s.done = true
		return 0, false
	}
	if g.infinite && (s.lrel >= rebaseArrivals || off >= rebaseNs) {
		s.base, s.lrel = ideal, 0
	}

	at := ideal
	if s.emitted {
		floor, ok := s.last.add(s.minGap)
		if !ok {
			s.done = true
			return 0, false
		}
		if ideal.less(floor) {
			if floor.sub(ideal) >= clampCountNs {
				s.clamped.Add(1)
			}
			at = floor
		}
	}
	s.last, s.emitted = at, true
	return time.Duration(at.round()), true
}

// Rate returns the configured rate r(elapsed) in req/s, for a gauge: 0 before
// the start and after the end of a finite process. It is the rate function,
// not what the ceiling let through.
func (s *Schedule) Rate(elapsed time.Duration) float64 {
	return s.fn.at(elapsed)
}

// MaxRate returns the ceiling in force, in req/s (after defaulting). It is
// always in (0, config.MaxRateLimit], so it can be passed to NewWireCeiling.
func (s *Schedule) MaxRate() float64 {
	return s.maxRate
}

// Clamped returns how many arrivals so far the ceiling moved later (by 1 ns
// or more) than the process placed them.
func (s *Schedule) Clamped() uint64 {
	return s.clamped.Load()
}

// gap draws the next unit-mean gap in operational time.
func (s *Schedule) gap() float64 {
	switch s.process {
	case config.ProcessPoisson:
		return s.rng.ExpFloat64()
	case config.ProcessGamma:
		return s.gamma.sample(s.rng)
	default:
		return 1
	}
}

// instant is a point in time as whole nanoseconds plus a fraction in [0, 1).
// A float64 of nanoseconds would lose sub-nanosecond precision after 2^53 ns
// (104 days); this keeps it for the life of the process.
type instant struct {
	ns   int64
	frac float64
}

// add returns a+d for d ≥ 0 nanoseconds, and false if the result would not
// fit in a time.Duration.
func (a instant) add(d float64) (instant, bool) {
	s := a.frac + d
	w := math.Floor(s)
	if w >= float64(math.MaxInt64-a.ns) {
		return instant{}, false
	}
	return instant{ns: a.ns + int64(w), frac: s - w}, true
}

func (a instant) less(b instant) bool {
	return a.ns < b.ns || (a.ns == b.ns && a.frac < b.frac)
}

// sub returns a-b in nanoseconds.
func (a instant) sub(b instant) float64 {
	return float64(a.ns-b.ns) + (a.frac - b.frac)
}

// round returns the nearest whole nanosecond (halves round up).
func (a instant) round() int64 {
	if a.frac >= 0.5 && a.ns < math.MaxInt64 {
		return a.ns + 1
	}
	return a.ns
}
