package workload

import (
	"context"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
)

// checkSchedule decides which arrivals carry a known-answer check. It belongs
// to the dispatcher goroutine. A check whose turn came stays due until an
// arrival actually sends it, so an arrival dropped at the in-flight cap
// delays the check instead of losing it.
type checkSchedule struct {
	checks  []config.Check
	pending []bool      // every-N checks whose turn came
	next    []time.Time // interval checks: the instant from which they are due
	arrived int
}

func newCheckSchedule(checks []config.Check) *checkSchedule {
	return &checkSchedule{checks: checks, pending: make([]bool, len(checks)), next: make([]time.Time, len(checks))}
}

// arrive counts one arrival, scheduled at at, and returns the index of the
// check it should carry, or -1. The first check listed wins when several
// are due; the others stay due.
func (s *checkSchedule) arrive(at time.Time) int {
	s.arrived++
	due := -1
	for i, c := range s.checks {
		if c.Every > 0 && s.arrived%c.Every == 0 {
			s.pending[i] = true
		}
		if due < 0 && (s.pending[i] || c.Interval > 0 && !at.Before(s.next[i])) {
			due = i
		}
	}
	return due
}

// sent records that check i went out on the arrival scheduled at at.
func (s *checkSchedule) sent(i int, at time.Time) {
	s.pending[i] = false
	if iv := s.checks[i].Interval; iv > 0 {
		s.next[i] = at.Add(iv)
	}
}

// checkRequest is the request of a known-answer check (plan.Template's
// KnownAnswer: greedy unless the workload sets a temperature, no length
// extensions).
func (r *Runner) checkRequest(c *config.Check) *client.Request {
	return r.Template.KnownAnswer(c.Prompt, c.MaxTokens)
}

// judgeCheck classifies a finished check (plan.Judge): pass when a
// successful answer matches the pattern anywhere, fail when it does not,
// error when no successful answer came.
func judgeCheck(c *config.Check, o *observation.Request) string {
	return plan.Judge(c.Pattern, c.Expect, o)
}

// observeCheck counts a finished check and logs a wrong or missing answer.
func (r *Runner) observeCheck(ctx context.Context, mon Monitor, i int, o *observation.Request) {
	c := &r.Checks[i]
	result := judgeCheck(c, o)
	mon.Check(result)
	if result == CheckPass || r.Logger == nil || ctx.Err() != nil {
		return
	}
	r.Logger.Warn("known-answer check did not pass", "workload", r.Name, "check", i, "result", result,
		"outcome", o.Outcome, "expect", c.Expect, "answer", textcut.Cut(o.Text, 200), "err", o.Err)
}
