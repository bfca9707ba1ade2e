package config

import (
	"fmt"
	"math"
	"time"
)

// This file holds the arrival process's configuration and its validation.
// The arrival package builds schedules from an Arrival (arrival.New).

// Process names the shape of the gaps between arrivals.
type Process string

const (
	// ProcessConstant spaces arrivals evenly: one every 1/r(t).
	ProcessConstant Process = "constant"
	// ProcessPoisson draws exponential gaps: a (possibly inhomogeneous) Poisson
	// process, coefficient of variation 1.
	ProcessPoisson Process = "poisson"
	// ProcessGamma draws Gamma(shape=b, scale=1/b) gaps, b being
	// Arrival.Burstiness: b == 1 is Poisson, b < 1 burstier, b > 1 more regular; the
	// coefficient of variation of the gaps is 1/sqrt(b). This is the
	// meaning of vLLM bench's --burstiness.
	ProcessGamma Process = "gamma"
)

// MaxRateLimit is the highest accepted ceiling: arrivals are scheduled on a
// nanosecond grid, so 1 ns is the smallest spacing the ceiling can enforce.
const MaxRateLimit = 1e9

// Arrival describes an arrival process: a gap shape (Process, Burstiness), a
// rate function (exactly one of Rate, Ramp, Stages) and a ceiling (MaxRate).
//
// The k-th arrival (k = 1, 2, ...) happens at the instant t_k where the
// operational time Λ(t) = ∫_0^t r(s) ds reaches the sum of the first k unit-mean
// gaps. So the first arrival comes one gap after the start, not at 0, and a
// constant process at 1 req/s over a 10 s stage sends at 1 s, 2 s, ... 10 s.
// A zero-rate stretch gets no arrivals of its own.
//
// A field left at its zero value is left out when the arrival is written
// back as YAML (the bench's report embeds its configuration so), so that
// the matrix, which embeds an Arrival, writes what it was given.
type Arrival struct {
	Process Process `yaml:"process"`
	// Burstiness is the gamma shape b (> 0). Only for ProcessGamma; it must
	// be left 0 otherwise.
	Burstiness float64 `yaml:"burstiness"`

	// Rate is a constant rate in req/s, for ever. Zero means "not set".
	Rate float64 `yaml:"rate,omitempty"`
	// Ramp moves the rate linearly from From to To over Over.
	Ramp *Ramp `yaml:"ramp,omitempty"`
	// Stages run one after the other; the process ends after the last one.
	Stages []Stage `yaml:"stages,omitempty"`

	// MaxRate is the hard ceiling in req/s: consecutive scheduled arrivals
	// are at least 1/MaxRate apart, whatever the process draws. It must be at
	// least the peak of the rate function and at most MaxRateLimit.
	//
	// For ProcessConstant, 0 means "the peak of the rate function"; evenly
	// spaced arrivals never need the clamp then.
	//
	// For ProcessPoisson and ProcessGamma it is required and must be
	// strictly above the peak rate. A ceiling equal to the mean rate would not just trim bursts:
	// the delay the clamp adds is the waiting time of a queue at utilisation
	// 1, which grows without bound, and the emitted traffic would converge to
	// evenly spaced arrivals while still being called Poisson. With a
	// Poisson process at mean rate r and ceiling M the clamp delays a
	// fraction r/M of arrivals, by a mean of (r/M)/(2(M-r)) seconds
	// (Pollaczek–Khinchine for M/D/1); e.g. M = 2r delays half of them, by
	// 1/(2M) on average.
	MaxRate float64 `yaml:"max_rate,omitempty"`
}

// Ramp is a linear change of rate.
type Ramp struct {
	From float64       `yaml:"from"` // req/s at the start
	To   float64       `yaml:"to"`   // req/s at the end
	Over time.Duration `yaml:"over"` // > 0
	// Stop ends the process when the ramp ends. When false the rate holds
	// at To for ever (a continuous probe keeps probing).
	Stop bool `yaml:"stop"`
}

// Stage is one step of a staged run: Rate for Duration, or a linear ramp
// from Rate to *RampTo over Duration.
type Stage struct {
	Duration time.Duration `yaml:"duration"` // > 0
	Rate     float64       `yaml:"rate"`     // req/s (at the start, when ramping)
	RampTo   *float64      `yaml:"ramp_to"`  // nil: constant Rate
}

// FieldError says which arrival field is wrong and why. Field uses the
// YAML names relative to the arrival block, e.g. "stages[2].duration".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return "arrival: " + e.Field + ": " + e.Reason
}

func arrivalErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// checkArrivalRate refuses negative, NaN and infinite rates.
func checkArrivalRate(field string, r float64) error {
	if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		return arrivalErr(field, "must be a finite rate ≥ 0 req/s, got %v", r)
	}
	if r > MaxRateLimit {
		return arrivalErr(field, "must be at most %g req/s (1 ns spacing), got %v", float64(MaxRateLimit), r)
	}
	return nil
}

// Validate checks the arrival process. The error, if any, is a *FieldError.
func (c Arrival) Validate() error {
	_, err := c.validate()
	return err
}

// validate checks c and returns the peak of its rate function. The rate
// function is piecewise linear, so its peak is the highest endpoint.
func (c Arrival) validate() (float64, error) {
	if err := c.validateProcess(); err != nil {
		return 0, err
	}
	peak, err := c.validateRateFunction()
	if err != nil {
		return 0, err
	}
	if err := c.validateCeiling(peak); err != nil {
		return 0, err
	}
	return peak, nil
}

// validateProcess checks the gap shape: a known process, and a burstiness
// only for gamma's.
func (c Arrival) validateProcess() error {
	switch c.Process {
	case ProcessConstant, ProcessPoisson:
		if c.Burstiness != 0 {
			return arrivalErr("burstiness", "only applies to process %q, got %v with process %q", ProcessGamma, c.Burstiness, c.Process)
		}
	case ProcessGamma:
		if math.IsNaN(c.Burstiness) || math.IsInf(c.Burstiness, 0) || c.Burstiness <= 0 {
			return arrivalErr("burstiness", "must be a finite number > 0 for process %q, got %v", ProcessGamma, c.Burstiness)
		}
	default:
		return arrivalErr("process", "must be one of %q, %q, %q; got %q%s", ProcessConstant, ProcessPoisson, ProcessGamma, c.Process,
			didYouMean(string(c.Process), []Process{ProcessConstant, ProcessPoisson, ProcessGamma}))
	}
	return nil
}

// validateRateFunction checks that exactly one of rate, ramp and stages is
// set, and valid, and returns the rate function's peak, which must not be
// zero.
func (c Arrival) validateRateFunction() (float64, error) {
	if err := checkArrivalRate("rate", c.Rate); err != nil {
		return 0, err
	}
	set := 0
	if c.Rate != 0 {
		set++
	}
	if c.Ramp != nil {
		set++
	}
	if c.Stages != nil {
		set++
	}
	switch set {
	case 0:
		return 0, arrivalErr("rate", "one of rate, ramp or stages must be set")
	case 1:
	default:
		return 0, arrivalErr("rate", "set only one of rate, ramp or stages")
	}

	var peak float64
	var err error
	switch {
	case c.Rate != 0:
		peak = c.Rate
	case c.Ramp != nil:
		peak, err = c.Ramp.peak()
	default:
		peak, err = stagesPeak(c.Stages)
	}
	if err != nil {
		return 0, err
	}
	if peak == 0 {
		return 0, arrivalErr("rate", "the rate function is zero everywhere, so nothing would ever be sent")
	}
	return peak, nil
}

// peak checks the ramp and returns its higher end.
func (r *Ramp) peak() (float64, error) {
	if err := checkArrivalRate("ramp.from", r.From); err != nil {
		return 0, err
	}
	if err := checkArrivalRate("ramp.to", r.To); err != nil {
		return 0, err
	}
	if r.Over <= 0 {
		return 0, arrivalErr("ramp.over", "must be > 0, got %v", r.Over)
	}
	return max(r.From, r.To), nil
}

// stagesPeak checks the stages and returns the highest rate any of them
// reaches. Their durations must add up to a time.Duration.
func stagesPeak(stages []Stage) (float64, error) {
	if len(stages) == 0 {
		return 0, arrivalErr("stages", "must hold at least one stage")
	}
	var peak float64
	var start time.Duration
	for i, s := range stages {
		name := fmt.Sprintf("stages[%d]", i)
		if s.Duration <= 0 {
			return 0, arrivalErr(name+".duration", "must be > 0, got %v", s.Duration)
		}
		if start > math.MaxInt64-s.Duration {
			return 0, arrivalErr(name+".duration", "the stages add up to more than %v", time.Duration(math.MaxInt64))
		}
		if err := checkArrivalRate(name+".rate", s.Rate); err != nil {
			return 0, err
		}
		to := s.Rate
		if s.RampTo != nil {
			if err := checkArrivalRate(name+".ramp_to", *s.RampTo); err != nil {
				return 0, err
			}
			to = *s.RampTo
		}
		peak = max(peak, s.Rate, to)
		start += s.Duration
	}
	return peak, nil
}

// validateCeiling checks max_rate against the rate function's peak: at or
// above it for the constant process (0: the peak), strictly above it for
// the random ones, which must set it.
func (c Arrival) validateCeiling(peak float64) error {
	m := c.MaxRate
	if err := checkArrivalRate("max_rate", m); err != nil {
		return err
	}
	if c.Process == ProcessConstant {
		if m != 0 && m < peak {
			return arrivalErr("max_rate", "%v req/s is below the peak configured rate %v req/s", m, peak)
		}
		return nil
	}
	if m == 0 {
		return arrivalErr("max_rate", "required for process %q: set a ceiling above the peak rate %v req/s (a ceiling at the peak would reshape the process into evenly spaced arrivals)", c.Process, peak)
	}
	if m <= peak {
		return arrivalErr("max_rate", "%v req/s must be above the peak configured rate %v req/s for process %q (a ceiling at the peak would reshape the process into evenly spaced arrivals)", m, peak, c.Process)
	}
	return nil
}

// PeakRate is the highest rate the configured rate function reaches, or 0
// when the configuration is invalid.
func (c Arrival) PeakRate() float64 {
	// The ceiling does not change the rate function; a permissive one keeps
	// its own validation out of the way.
	c.MaxRate = MaxRateLimit
	peak, err := c.validate()
	if err != nil {
		return 0
	}
	return peak
}

// Ceiling is the ceiling in force for a valid c, in req/s: MaxRate, or the
// peak rate when MaxRate is 0 (which only ProcessConstant accepts).
func (c Arrival) Ceiling() (float64, error) {
	peak, err := c.validate()
	if err != nil {
		return 0, err
	}
	if c.MaxRate == 0 {
		return peak, nil
	}
	return c.MaxRate, nil
}

// DefaultBurstCeiling is the multiple of the peak rate that MaxRate
// defaults to for random processes (see WithDefaults).
const DefaultBurstCeiling = 10

// WithDefaults fills in MaxRate when it is 0: the peak rate for the constant
// process, and DefaultBurstCeiling times the peak for Poisson and gamma, so
// that the ceiling trims only rare bursts. With a Poisson process at a
// ceiling of 10 times its mean, the clamp moves 10% of arrivals by a mean
// of 1/(18 r) seconds (see MaxRate).
func (c Arrival) WithDefaults() Arrival {
	if c.MaxRate == 0 && c.Process != ProcessConstant {
		c.MaxRate = min(DefaultBurstCeiling*c.PeakRate(), MaxRateLimit)
	}
	return c
}
