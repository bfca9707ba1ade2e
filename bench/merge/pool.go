package merge

import (
	"cmp"
	"context"
	"fmt"
	"math"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// pool combines the checked shards, in shard order, into one report as a
// single process would have recorded it before its figures: shard 0's
// cells, each repeat with what the shards' results add up to (poolRepeat)
// and, in its Shard part, the shards' recorders of that repeat pooled
// into one (PoolStates). What is one machine's (the GPU samples, the
// known-answer checks, the timeline) is shard 0's; the run spans the
// earliest start to the latest end.
func pool(ctx context.Context, byIndex []ShardFile, m Matrix) (*report.Report, error) {
	first := byIndex[0].Report
	rep := &report.Report{Schema: report.Schema, Environment: first.Environment, Accuracy: first.Accuracy, GPU: first.GPU,
		Timeline: first.Timeline, MergedShards: len(byIndex), Shard: &report.ShardPart{Index: 0, Count: 1}}
	// check held shard 0's cells to the matrix, target by target, then
	// group by group, and every shard's to shard 0's.
	for ci, c := range first.Cells {
		cell := report.CellResult{Key: c.Key, Target: c.Target, Load: c.Load, Shape: c.Shape}
		states := report.ShardCells{Key: c.Key}
		for ri := range c.Repeats {
			if err := interrupted(ctx); err != nil {
				return nil, err
			}
			res, st := poolRepeat(byIndex, ci, ri)
			cell.Repeats = append(cell.Repeats, res)
			states.Repeats = append(states.Repeats, st)
		}
		rep.Cells = append(rep.Cells, cell)
		rep.Shard.Cells = append(rep.Shard.Cells, states)
	}
	for _, sf := range byIndex {
		r := sf.Report
		if r.Environment.Started.Before(rep.Environment.Started) {
			rep.Environment.Started = r.Environment.Started
		}
		if r.Environment.Finished.After(rep.Environment.Finished) {
			rep.Environment.Finished = r.Environment.Finished
		}
	}
	if err := interrupted(ctx); err != nil {
		return nil, err
	}
	return rep, nil
}

// poolRepeat pools repeat ri of cell ci from every shard: its result as
// shard 0 has it, with the earliest start, the worst scheduling latency,
// the prompts every shard drew, each shard's schedule offset and wake-up
// lateness, its
// replay's rows added up (poolReplays); and its recorders pooled
// (PoolStates), from which Run.Figures computes the rest.
func poolRepeat(byIndex []ShardFile, ci, ri int) (report.RepeatResult, report.RecorderState) {
	var parts []report.RecorderState
	c := &byIndex[0].Report.Cells[ci]
	res := c.Repeats[ri]
	var replays []*report.ReplayResult
	// Each GPU's energy once: shards on one host read the same GPUs (by
	// UUID; shard 0's reading is kept), shards on several hosts add theirs.
	var devices []report.GPUEnergy
	seen := map[string]bool{}
	for si, sf := range byIndex {
		if e := sf.Report.Cells[ci].Repeats[ri].Stats.Efficiency; e != nil {
			for _, d := range e.Devices {
				id := d.UUID
				if id == "" {
					id = fmt.Sprintf("shard %d GPU %s", si, d.GPU)
				}
				if !seen[id] {
					seen[id] = true
					devices = append(devices, d)
				}
			}
		}
	}
	res.Stats.Efficiency = nil
	if len(devices) > 0 {
		// Run.Figures computes the rest over the pooled tokens.
		res.Stats.Efficiency = &report.Efficiency{Devices: devices}
	}
	for _, sf := range byIndex {
		r := sf.Report
		// check held every shard's cells and repeats to shard 0's.
		sc := r.Shard.Cells[ci]
		parts = append(parts, sc.Repeats[ri])
		rr := r.Cells[ci].Repeats[ri]
		if !rr.Started.IsZero() && (rr.Started.Before(res.Started) || res.Started.IsZero()) {
			res.Started = rr.Started
		}
		res.Stability.Checked = res.Stability.Checked || rr.Stability.Checked
		res.SchedulingLatencyP99 = max(res.SchedulingLatencyP99, rr.SchedulingLatencyP99)
		res.PromptsDrawn += rr.PromptsDrawn
		// What a failure met, from the first shard that saw one.
		res.FirstError = cmp.Or(res.FirstError, rr.FirstError)
		res.StoppedEarly = cmp.Or(res.StoppedEarly, rr.StoppedEarly)
		if rr.Replay != nil {
			replays = append(replays, rr.Replay)
		}
	}
	res.PromptsDrawn -= c.Repeats[ri].PromptsDrawn // counted once above
	// Each shard's schedule origin after the earliest's: how far apart
	// their schedules are (one instant when they shared --shard.start-at,
	// however late each host woke); and, apart, how late each woke.
	clocked := byIndex[0].Report.Shard.StartAt != nil
	res.WakeupLateSeconds = 0 // shard 0's: ShardWakeupLate has each one's
	for _, sf := range byIndex {
		rr := &sf.Report.Cells[ci].Repeats[ri]
		off, late := report.NaN(), report.NaN() // a shard without a share of the repeat never started it
		if !rr.Started.IsZero() {
			off, late = report.Num(rr.Started.Sub(res.Started).Seconds()), rr.WakeupLateSeconds
		}
		res.ShardStartOffsets = append(res.ShardStartOffsets, off)
		if clocked {
			res.ShardWakeupLate = append(res.ShardWakeupLate, late)
		}
	}
	if len(replays) > 0 {
		res.Replay = poolReplays(replays)
	}
	res.Client = poolClients(byIndex, ci, ri)
	return res, PoolStates(parts)
}

// poolClients combines the shards' client verdicts on one repeat: each
// shard is a client of its own, and one that fell behind put its delay
// into the merged figures, so the merge is degraded when any shard was
// (with that shard's note), else ok when any was judged, else not
// judged; the arrivals add up, the p99s are the worst shard's. Nil when
// no shard has one (reports from before it).
func poolClients(byIndex []ShardFile, ci, ri int) *report.ClientCheck {
	var out *report.ClientCheck
	for si, sf := range byIndex {
		c := sf.Report.Cells[ci].Repeats[ri].Client
		if c == nil {
			continue
		}
		if out == nil {
			out = &report.ClientCheck{State: report.StateNotJudged, LateAfterSeconds: c.LateAfterSeconds, LagP99: report.NaN()}
		}
		out.Arrivals += c.Arrivals
		out.Late += c.Late
		if math.IsNaN(float64(out.LagP99)) || c.LagP99 > out.LagP99 {
			out.LagP99 = c.LagP99
		}
		out.SchedulingLatencyP99 = max(out.SchedulingLatencyP99, c.SchedulingLatencyP99)
		switch {
		case out.State == report.ClientDegraded:
		case c.State == report.ClientDegraded:
			out.State, out.Note = c.State, fmt.Sprintf("shard %d: %s", si, c.Note)
		case c.State == report.ClientOK:
			out.State, out.Note = c.State, ""
		case out.State == report.StateNotJudged:
			out.Note = fmt.Sprintf("client not judged: no shard measured enough arrivals (%s)", c.Note)
		}
	}
	if out != nil && out.Arrivals > 0 {
		out.LateShare = float64(out.Late) / float64(out.Arrivals)
	}
	return out
}

// poolReplays combines the shards' views of one replay repeat: the rows
// sent and dropped add up (each shard sends and drops its own); clamped is
// counted once, since every shard computes the whole seeded schedule and
// clamps the same rows (the largest, should one differ); drift is the
// worst shard's (its distribution is not pooled).
func poolReplays(rs []*report.ReplayResult) *report.ReplayResult {
	out := *rs[0]
	out.Replayed, out.Dropped, out.Clamped = 0, 0, 0
	for _, r := range rs {
		out.Replayed += r.Replayed
		out.Dropped += r.Dropped
		out.Clamped = max(out.Clamped, r.Clamped)
		if r.Drift.P99 > out.Drift.P99 {
			out.Drift = r.Drift
		}
		out.Degraded = out.Degraded || r.Degraded
	}
	return &out
}

// PoolStates pools the shards' recorders of one repeat into the one a
// single process would have kept: counts and per-window aggregates add
// up; the records are the union, exact while no shard sampled; a shard
// that sampled contributes, like every other, a uniform share at the
// lowest sampling fraction among them, so that the union stays a uniform
// sample of all the requests. The stability points are every shard's, in
// shard order: the recorder the figures are computed from keeps them as
// it keeps its own.
func PoolStates(parts []report.RecorderState) report.RecorderState {
	st := report.RecorderState{Outcomes: map[string]int{}, HTTPErrors: map[string]int{}}
	fracRec, fracITL := 1.0, 1.0
	for _, p := range parts {
		st.WindowSeconds = max(st.WindowSeconds, p.WindowSeconds)
		if p.RecordsSeen > 0 {
			fracRec = min(fracRec, float64(len(p.Records))/float64(p.RecordsSeen))
		}
		if p.ITLSeen > 0 {
			fracITL = min(fracITL, float64(len(p.ITL))/float64(p.ITLSeen))
		}
	}
	for _, p := range parts {
		st.Windows, st.SpanSeconds = max(st.Windows, p.Windows), max(st.SpanSeconds, p.SpanSeconds)
		st.Measured += p.Measured
		st.Goodput += p.Goodput
		st.ReasoningTokens += p.ReasoningTokens
		st.ReasoningRequests += p.ReasoningRequests
		st.UsageNotBelieved += p.UsageNotBelieved
		for o, n := range p.Outcomes {
			st.Outcomes[o] += n
		}
		for code, n := range p.HTTPErrors {
			st.HTTPErrors[code] += n
		}
		for _, m := range []struct {
			dst *map[string]int
			src map[string]int
		}{{&st.StructuredChecks, p.StructuredChecks}, {&st.ToolCallChecks, p.ToolCallChecks}} {
			for r, n := range m.src {
				if *m.dst == nil {
					*m.dst = map[string]int{}
				}
				(*m.dst)[r] += n
			}
		}
		for _, l := range []struct{ dst, src *[]float64 }{{&st.WinTokens, &p.WinTokens}, {&st.WinGoodTokens, &p.WinGoodTokens}} {
			*l.dst = grow(*l.dst, len(*l.src))
			for i, v := range *l.src {
				(*l.dst)[i] += v
			}
		}
		for _, l := range []struct{ dst, src *[]int }{
			{&st.WinSuccesses, &p.WinSuccesses}, {&st.WinCompletions, &p.WinCompletions}, {&st.WinInputTokens, &p.WinInputTokens},
			{&st.WinOffered, &p.WinOffered}, {&st.WinDropped, &p.WinDropped}, {&st.WinCapDropped, &p.WinCapDropped},
			{&st.WinSent, &p.WinSent}, {&st.WinEnded, &p.WinEnded},
		} {
			*l.dst = grow(*l.dst, len(*l.src))
			for i, v := range *l.src {
				(*l.dst)[i] += v
			}
		}
		st.InFlightCap += p.InFlightCap
		st.Points = append(st.Points, p.Points...)
		st.PointsSeen += p.PointsSeen
		st.WinE2E = grow(st.WinE2E, len(p.WinE2E))
		for i, v := range p.WinE2E {
			st.WinE2E[i] = append(st.WinE2E[i], v...)
		}
		take := len(p.Records)
		if p.RecordsSeen > 0 {
			take = min(take, int(math.Round(fracRec*float64(p.RecordsSeen))))
		}
		st.Records = append(st.Records, p.Records[:take]...)
		st.RecordsSeen += p.RecordsSeen
		takeITL := len(p.ITL)
		if p.ITLSeen > 0 {
			takeITL = min(takeITL, int(math.Round(fracITL*float64(p.ITLSeen))))
		}
		st.ITL = append(st.ITL, p.ITL[:takeITL]...)
		st.ITLSeen += p.ITLSeen
	}
	return st
}

// grow extends s with zeros to at least n elements.
func grow[T any](s []T, n int) []T {
	for len(s) < n {
		var zero T
		s = append(s, zero)
	}
	return s
}
