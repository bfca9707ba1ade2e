package bench

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// repeatSpan is how long one repeat runs: planned, as configured (its
// warm-up, then its measured windows; a replay, its trace's window at its
// speed), and at most (a warm-up that lasts until its bound because no
// request completed, then every window the stability rule may extend it
// to). The requests in flight at a repeat's end run on after either (they
// are waited for), counted in neither: no plan can know them.
type repeatSpan struct{ planned, most time.Duration }

// runPlan is what the matrix is planned to take: said before its first
// repeat (line), in the log, and counted by the progress's estimate.
type runPlan struct {
	cells, repeats int
	// loads says the matrix has rate or concurrency cells, whose repeats
	// the fields below describe: the configured warm-up and its bound
	// (the warm-up lasts until the pipeline is full: its first completion's
	// 1.25 × E2E, or the bound when none completes), the measured time
	// (the duration in whole stability windows), the most the stability
	// rule extends it to, and why it never does when it cannot.
	loads             bool
	warmup, maxWarmup time.Duration
	duration          time.Duration
	measured, most    time.Duration
	window            time.Duration
	fixed             string
	// replays says the matrix replays traces; sweep, that a rate sweep
	// runs after it (its points depend on the rates that pass: no plan).
	replays, sweep bool
	// units are each repeat's span, in the order they run.
	units []repeatSpan
}

// planned are the units' planned spans, the progress's units.
func (rp *runPlan) planned() []time.Duration {
	out := make([]time.Duration, len(rp.units))
	for i, u := range rp.units {
		out[i] = u.planned
	}
	return out
}

// totals are the matrix's planned time and the most it may take.
func (rp *runPlan) totals() (planned, most time.Duration) {
	for _, u := range rp.units {
		planned += u.planned
		most += u.most
	}
	return planned, most
}

// line says the plan in words: the cells and repeats, a repeat's warm-up
// and measured time with how far each may grow, and the matrix's planned
// time beside the most it may take. A run that takes longer than planned
// has said so before it started.
func (rp *runPlan) line() string {
	if len(rp.units) == 0 {
		if rp.sweep {
			return "plan: the rate sweep alone, whose length depends on the rates that pass"
		}
		return ""
	}
	ms := toMillisecond
	var parts []string
	if rp.loads {
		warm := fmt.Sprintf("warm-up %s (longer until the pipeline is full, at most %s)", ms(rp.warmup), ms(rp.maxWarmup))
		if rp.warmup == 0 {
			warm = fmt.Sprintf("warm-up until the pipeline is full (at most %s)", ms(rp.maxWarmup))
		}
		meas := fmt.Sprintf("then %s measured", ms(rp.measured))
		if ms(rp.measured) != ms(rp.duration) {
			meas += fmt.Sprintf(" (the duration, %s, in whole windows of %s)", ms(rp.duration), ms(rp.window))
		}
		if rp.fixed == "" {
			meas += fmt.Sprintf(", up to %s when the stability rule extends a repeat whose drift is suggestive", ms(rp.most))
		} else {
			meas += ", never extended (" + rp.fixed + ")"
		}
		parts = append(parts, "each repeat: "+warm+", "+meas)
	}
	if rp.replays {
		parts = append(parts, "a replay: its trace's window after the warm-up, never extended")
	}
	planned, most := rp.totals()
	total := fmt.Sprintf("%s planned", ms(planned))
	if ms(most) > ms(planned) {
		total += fmt.Sprintf(", at most %s", ms(most))
	}
	total += " (the requests in flight at each repeat's end aside)"
	parts = append(parts, total)
	if rp.sweep {
		parts = append(parts, "then the rate sweep, whose length depends on the rates that pass")
	}
	return fmt.Sprintf("plan: %d %s × %d %s; %s", rp.cells, plural(rp.cells, "cell", "cells"), rp.repeats, plural(rp.repeats, "repeat", "repeats"),
		strings.Join(parts, "; "))
}

// log states the plan in the log, its durations to the millisecond.
func (rp *runPlan) log(logger *slog.Logger) {
	ms := toMillisecond
	planned, most := rp.totals()
	logger.Info("bench plan", "cells", rp.cells, "repeats", rp.repeats, "warmup", ms(rp.warmup), "max_warmup", ms(rp.maxWarmup),
		"measured", ms(rp.measured), "max_measured", ms(rp.most), "planned", ms(planned), "at_most", ms(most), "sweep", rp.sweep)
}

// toMillisecond is a duration as the plan says it: 10 s in 3 windows
// measures 9.999999999 s, said 10s.
func toMillisecond(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// runPlan is the matrix's plan: its groups on targets targets, each
// repeat's span in the order runMatrix runs them.
func (b *run) runPlan(groups []group, targets int) *runPlan {
	spec := b.spec
	rp := &runPlan{cells: len(groups) * targets, repeats: spec.Repeats, sweep: spec.Sweep != nil,
		warmup: spec.Warmup, maxWarmup: spec.Warmup + spec.Duration, duration: spec.Duration}
	win := b.repeatWindows(repeatPlan{duration: spec.Duration, stability: true}, false)
	rp.window, rp.measured, rp.most = win.window, time.Duration(win.base)*win.window, time.Duration(win.most)*win.window
	switch {
	case !spec.Stability.On():
		rp.fixed = "the stability check is off"
	case b.opts.Shard.On():
		rp.fixed = "a shard: bench merge judges the pooled windows"
	case win.most <= win.base:
		rp.fixed = "stability.max_duration leaves no room"
	}
	for _, g := range groups {
		rp.replays = rp.replays || g.replay != nil
		rp.loads = rp.loads || g.replay == nil
		for r := 0; r < spec.Repeats; r++ {
			for range targets {
				rp.units = append(rp.units, b.span(g))
			}
		}
	}
	return rp
}

// span is how long a repeat of a group runs (repeatSpan): a rate's or a
// concurrency's, its warm-up and measured windows, at most the warm-up's
// bound and the windows the stability rule may extend it to; a replay's,
// its warm-up and its trace's window at its speed (a looping one is cut
// at its measured windows), never longer: its warm-up is the configured
// one and it is never extended.
func (b *run) span(g group) repeatSpan {
	spec := b.spec
	win := b.repeatWindows(repeatPlan{duration: spec.Duration, stability: true}, g.replay != nil)
	measured := spec.Warmup + time.Duration(win.base)*win.window
	switch r := g.replay; {
	case r == nil:
		return repeatSpan{planned: measured, most: spec.Warmup + spec.Duration + time.Duration(win.most)*win.window}
	case r.Loop:
		return repeatSpan{planned: measured, most: measured}
	}
	r := g.replay
	d := spec.Warmup
	if recs := b.traces[r.Name].Records; len(recs) > 0 {
		end := recs[len(recs)-1].Offset
		if r.End > 0 {
			end = min(end, r.End)
		}
		d += time.Duration(float64(max(0, end-r.Start)) / r.Speed)
	}
	return repeatSpan{planned: d, most: d}
}
