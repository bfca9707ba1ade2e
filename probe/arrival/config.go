package arrival

import (
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// The configuration of an arrival process and its validation live in
// internal/config (config.Arrival); this file builds the rate function from
// it.

// compile validates c and returns its rate function and effective ceiling.
func compile(c config.Arrival) (rateFunc, float64, error) {
	m, err := c.Ceiling()
	if err != nil {
		return nil, 0, err
	}
	var f rateFunc
	switch {
	case c.Rate != 0:
		f = rateFunc{foreverSegment(0, c.Rate)}
	case c.Ramp != nil:
		r := c.Ramp
		f = rateFunc{linearSegment(0, r.Over, r.From, r.To)}
		if !r.Stop {
			f = append(f, foreverSegment(r.Over, r.To))
		}
	default:
		f = make(rateFunc, 0, len(c.Stages))
		var start time.Duration
		for _, s := range c.Stages {
			to := s.Rate
			if s.RampTo != nil {
				to = *s.RampTo
			}
			f = append(f, linearSegment(start, s.Duration, s.Rate, to))
			start += s.Duration
		}
	}
	return f, m, nil
}
