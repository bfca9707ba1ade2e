package config

import (
	"fmt"
	"time"
)

// Check is a known-answer check that a continuous workload carries, so that
// the live ranking has an accuracy figure as /probe modules do. Some of the
// workload's arrivals send the check's prompt instead of a synthetic one
// (they keep the arrival process and the rate ceiling: a check is never extra
// load), and the answer must match Expect. The semantics of prompt, expect and
// max_tokens are those of a module's known_answers: Expect is Go RE2, matched
// anywhere in the answer text.
type Check struct {
	KnownAnswer `yaml:",inline"`
	// Every makes every Nth arrival of the workload (the Nth, the 2Nth, ...)
	// this check. Exclusive with Interval.
	Every int `yaml:"every"`
	// Interval makes the workload's first arrival this check, then the first
	// arrival at least Interval after the previous one. Exclusive with Every.
	Interval time.Duration `yaml:"interval"`
}

// MinCheckInterval bounds Interval from below: a check is a sample of
// correctness, not load.
const MinCheckInterval = time.Second

// applyCheckDefaults fills max_tokens of every workload check.
func (c *Config) applyCheckDefaults() {
	for i := range c.Workloads {
		for j := range c.Workloads[i].Checks {
			if c.Workloads[i].Checks[j].MaxTokens == 0 {
				c.Workloads[i].Checks[j].MaxTokens = DefaultKnownAnswerMaxTokens
			}
		}
	}
}

// validateChecks validates the checks of every workload and compiles their
// patterns.
func (c *Config) validateChecks(v *validator) {
	for i := range c.Workloads {
		w := &c.Workloads[i]
		if len(w.Checks) > MaxKnownAnswers {
			v.add(path{"workloads", i}, "checks", fmt.Sprintf("at most %d checks", MaxKnownAnswers))
		}
		for j := range w.Checks {
			ch := &w.Checks[j]
			p := path{"workloads", i, "checks", j}
			v.checkKnownAnswer(p, &ch.KnownAnswer)
			switch {
			case ch.Every < 0:
				v.add(p, "every", "must not be negative")
			case ch.Interval < 0:
				v.add(p, "interval", "must not be negative")
			case ch.Every == 0 && ch.Interval == 0:
				v.add(p, "every", "set every (every Nth arrival) or interval (at most one per interval)")
			case ch.Every > 0 && ch.Interval > 0:
				v.add(p, "interval", "set either every or interval, not both")
			case ch.Interval > 0 && ch.Interval < MinCheckInterval:
				v.add(p, "interval", fmt.Sprintf("must be at least %s", MinCheckInterval))
			}
		}
	}
}
