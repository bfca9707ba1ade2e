package arrival

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// randomConfig draws a valid configuration: any process, burstiness down to
// 0.05, a constant rate, a ramp (holding or stopping) or 1-5 stages (some at
// rate zero, some ramping), and a ceiling from the lowest allowed up to 4×
// the peak.
func randomConfig(rng *rand.Rand) config.Arrival {
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	rate := func() float64 {
		if rng.IntN(5) == 0 {
			return 0
		}
		return logUniform(0.01, 1e5)
	}
	dur := func() time.Duration { return time.Duration(logUniform(1e6, 1e12)) } // 1 ms to 1000 s

	var c config.Arrival
	switch rng.IntN(3) {
	case 0:
		c.Process = config.ProcessConstant
	case 1:
		c.Process = config.ProcessPoisson
	default:
		c.Process = config.ProcessGamma
		c.Burstiness = logUniform(0.05, 20)
	}
	for {
		switch rng.IntN(3) {
		case 0:
			c.Rate = logUniform(0.01, 1e5)
		case 1:
			c.Ramp = &config.Ramp{From: rate(), To: rate(), Over: dur(), Stop: rng.IntN(2) == 0}
		default:
			c.Stages = make([]config.Stage, 1+rng.IntN(5))
			for i := range c.Stages {
				c.Stages[i] = config.Stage{Duration: dur(), Rate: rate()}
				if rng.IntN(2) == 0 {
					c.Stages[i].RampTo = ptr(rate())
				}
			}
		}
		if peak, err := peakOf(c); err == nil && peak > 0 {
			switch {
			case c.Process == config.ProcessConstant && rng.IntN(2) == 0:
				c.MaxRate = 0 // the default: the peak
			case c.Process == config.ProcessConstant:
				c.MaxRate = peak * (1 + 3*rng.Float64())
			default:
				c.MaxRate = peak * (1 + 1e-6 + 3*rng.Float64())
			}
			c.MaxRate = min(c.MaxRate, config.MaxRateLimit)
			return c
		}
		c.Rate, c.Ramp, c.Stages = 0, nil, nil // all-zero rate function: draw again
	}
}

func peakOf(c config.Arrival) (float64, error) {
	c.Process, c.Burstiness, c.MaxRate = config.ProcessConstant, 0, 0
	f, _, err := compile(c)
	if err != nil {
		return 0, err
	}
	return f.peak(), nil
}

// TestCeilingProperty draws thousands of random configurations and checks
// that the schedule never exceeds its ceiling: for every pair of arrivals
// i < j, offset_j - offset_i ≥ (j-i)/MaxRate - 1 ns. That is the same as
// "no window of length W holds more than floor((W+1ns)·MaxRate)+1 arrivals".
// The 1 ns is rounding the exact instants to whole nanoseconds; a further
// 0.001 ns covers float64 error in the schedule and in this check (about 1e-5
// ns for spacings up to 1e11 ns, i.e. ceilings down to 0.01 req/s).
func TestCeilingProperty(t *testing.T) {
	configs := 3000
	if testing.Short() {
		configs = 300
	}
	const arrivals = 1000
	const tol = 1 + 1e-3
	rng := rand.New(rand.NewPCG(2024, 7))
	clamped := 0
	for n := range configs {
		cfg := randomConfig(rng)
		seed := rng.Int64()
		offsets, s := collect(t, cfg, seed, arrivals)
		if s.Clamped() > 0 {
			clamped++
		}
		p := 1e9 / s.MaxRate() // ns
		if cfg.MaxRate != 0 && s.MaxRate() != cfg.MaxRate {
			t.Fatalf("config %d: MaxRate() = %v, want %v", n, s.MaxRate(), cfg.MaxRate)
		}
		describe := func() string { return fmt.Sprintf("config %d %s seed %d", n, show(cfg), seed) }
		// config computes the peak from the endpoints, without the rate
		// function; the two must agree.
		if peak, err := peakOf(cfg); err != nil || cfg.PeakRate() != peak {
			t.Fatalf("%s: PeakRate() = %v, the rate function peaks at %v (%v)", describe(), cfg.PeakRate(), peak, err)
		}

		// chain is the earliest instant the ceiling allows for arrival j,
		// max over i < j of offset_i + (j-i)·p, kept relative to the previous
		// arrival so that it stays small: chain_j - offset_{j-1}.
		chain := math.Inf(-1)
		for j := 1; j < len(offsets); j++ {
			gap := float64(offsets[j] - offsets[j-1])
			if gap < 0 {
				t.Fatalf("%s: offsets decrease at %d: %v then %v", describe(), j, offsets[j-1], offsets[j])
			}
			chain = max(0, chain) + p
			if gap < chain-tol {
				t.Fatalf("%s: arrival %d is %.3f ns after arrival %d; the ceiling allows no sooner than %.3f ns",
					describe(), j, gap, j-1, chain)
			}
			chain -= gap
		}

		// The same, stated as windows: W = a few spacings, and a random one.
		for _, w := range []float64{p, 2.5 * p, 10 * p, 100.3 * p, rng.Float64() * 50 * p} {
			limit := int(math.Floor((w+tol)/p)) + 1
			i := 0
			for j := range offsets {
				for float64(offsets[j]-offsets[i]) > w {
					i++
				}
				if j-i+1 > limit {
					t.Fatalf("%s: %d arrivals in a window of %.0f ns from %v, at most %d allowed",
						describe(), j-i+1, w, offsets[i], limit)
				}
			}
		}
	}
	// The property must have been exercised, not just vacuously true.
	t.Logf("%d of %d configurations hit the ceiling", clamped, configs)
	if clamped < configs/10 {
		t.Errorf("only %d of %d configurations ever hit the ceiling; the test is too gentle", clamped, configs)
	}
}

func show(c config.Arrival) string {
	s := fmt.Sprintf("{process %s b %g rate %g max %g", c.Process, c.Burstiness, c.Rate, c.MaxRate)
	if c.Ramp != nil {
		s += fmt.Sprintf(" ramp %+v", *c.Ramp)
	}
	for _, st := range c.Stages {
		to := "-"
		if st.RampTo != nil {
			to = fmt.Sprint(*st.RampTo)
		}
		s += fmt.Sprintf(" stage{%v %g→%s}", st.Duration, st.Rate, to)
	}
	return s + "}"
}
