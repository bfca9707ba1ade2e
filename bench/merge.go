package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// ShardFile is one shard's report and the file it was read from, which
// the merge's errors name.
type ShardFile struct {
	File   string
	Report *report.Report
}

// Merge combines the reports of the N shards of one split run into the
// report a single process would have written: per cell and repeat, the
// shards' counts and per-window aggregates add up and their request
// records are pooled (see mergeStates), then the cells, their bootstrap
// intervals and the ranking are computed from the pool as Run computes
// them. The shards must be 0..N-1 of one run (one configuration, one N).
// What is one machine's (the GPU samples, the known-answer checks, the
// timeline) is shard 0's.
//
// A shard report is a file from elsewhere, so every figure the merge
// reads is checked first (validateShards): a crafted or damaged shard is
// refused with an error naming its file and field, never merged into a
// report or let panic or allocate beyond its own size. The merge ends
// with ctx's error when ctx ends.
func Merge(ctx context.Context, shards []ShardFile) (*report.Report, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("no shard report")
	}
	if len(shards) > MaxShards {
		return nil, fmt.Errorf("%d reports: at most %d shards", len(shards), MaxShards)
	}
	byIndex, cfg, err := validateShards(ctx, shards)
	if err != nil {
		return nil, err
	}
	n := len(byIndex)
	first := byIndex[0].Report
	spec := &cfg.Bench
	if spec.Weights == nil {
		w := DefaultWeights
		spec.Weights = &w
	}

	// The matrix, from shard 0's cells: target by target, then group by
	// group, as assembleCells orders them.
	var names []string
	var groups []group
	for _, c := range first.Cells {
		if len(names) == 0 || names[len(names)-1] != c.Target {
			names = append(names, c.Target)
		}
		if len(names) == 1 {
			groups = append(groups, group{name: c.Shape, load: c.Load})
		}
	}
	if len(first.Cells) != len(names)*len(groups) || len(first.Shard.Cells) != len(first.Cells) {
		return nil, fmt.Errorf("shard 0's cells are not a matrix")
	}
	acc := make([][]cellAcc, len(groups))
	for gi := range groups {
		acc[gi] = make([]cellAcc, len(names))
	}
	for ci, c := range first.Cells {
		ti, gi := ci/len(groups), ci%len(groups)
		for ri := range c.Repeats {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("merge interrupted: %w", err)
			}
			res, smp := mergeRepeat(byIndex, ci, ri, spec)
			acc[gi][ti].repeats = append(acc[gi][ti].repeats, res)
			acc[gi][ti].samples = append(acc[gi][ti].samples, smp)
		}
	}
	rep := &report.Report{Schema: report.Schema, Environment: first.Environment, Accuracy: first.Accuracy, GPU: first.GPU,
		Timeline: first.Timeline, MergedShards: n}
	for _, sf := range byIndex {
		r := sf.Report
		if r.Environment.Started.Before(rep.Environment.Started) {
			rep.Environment.Started = r.Environment.Started
		}
		if r.Environment.Finished.After(rep.Environment.Finished) {
			rep.Environment.Finished = r.Environment.Finished
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("merge interrupted: %w", err)
	}
	cells, reps := assembleCells(ctx, spec, names, groups, acc)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("merge interrupted: %w", err)
	}
	rep.Cells = cells
	targets := make([]config.Target, len(names))
	for i, name := range names {
		targets[i].Name = name
	}
	b := &run{cfg: cfg, spec: spec}
	rep.Ranking = rank(b.rankInput(targets, groups, reps, rep))
	return rep, nil
}

// mergeRepeat merges repeat ri of cell ci from every shard: its records
// and windows pooled (mergeStates) and finished as one process finishes
// its own, its stability judged on the pooled windows.
func mergeRepeat(byIndex []ShardFile, ci, ri int, spec *Spec) (report.RepeatResult, *sample) {
	var parts []report.RecorderState
	c := &byIndex[0].Report.Cells[ci]
	res := c.Repeats[ri]
	var replays []*report.ReplayResult
	for _, sf := range byIndex {
		r := sf.Report
		// validateShards checked every shard's cells and repeats
		// against shard 0's.
		sc := r.Shard.Cells[ci]
		parts = append(parts, sc.Repeats[ri])
		rr := r.Cells[ci].Repeats[ri]
		if !rr.Started.IsZero() && (rr.Started.Before(res.Started) || res.Started.IsZero()) {
			res.Started = rr.Started
		}
		res.Stability.Checked = res.Stability.Checked || rr.Stability.Checked
		res.SchedulingLatencyP99 = max(res.SchedulingLatencyP99, rr.SchedulingLatencyP99)
		res.PromptsDrawn += rr.PromptsDrawn
		if rr.Replay != nil {
			replays = append(replays, rr.Replay)
		}
	}
	res.PromptsDrawn -= c.Repeats[ri].PromptsDrawn // counted once above
	// Each shard's start after the earliest's: how far apart their
	// schedules began (one instant when they shared --shard.start-at).
	for _, sf := range byIndex {
		off := report.NaN() // a shard without a share of the repeat never started it
		if s := sf.Report.Cells[ci].Repeats[ri].Started; !s.IsZero() {
			off = report.Num(s.Sub(res.Started).Seconds())
		}
		res.ShardStartOffsets = append(res.ShardStartOffsets, off)
	}
	rc, k, span := mergeStates(parts, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples)
	stats, smp := rc.finish(k, span)
	res.Stats = stats
	// The pooled records' distribution and the added-up windows,
	// as one process draws its own.
	res.Distribution, res.Windows = smp.distribution(), rc.windows(k)
	res.Stability.Medians = nil
	med, _ := rc.windowMedians(k)
	for _, m := range med {
		res.Stability.Medians = append(res.Stability.Medians, report.Num(m))
	}
	if st := spec.Stability; res.Stability.Checked && st.On() {
		// The shards ran the same windows, unextended: the stability is
		// the pooled requests', judged as one process judges its own (a
		// replay's over its complete windows).
		judged := k
		if span > 0 {
			judged = int(span / rc.window)
		}
		res.Stability.Windows = judged
		if judged < 1 {
			res.Stability.Checked, res.Stability.State, res.Stability.Stable = false, "", false
			res.Stability.Note = fmt.Sprintf("not judged: the merged replay filled no complete window of %s", rc.window)
		} else {
			setVerdict(&res.Stability, rc.judge(judged, time.Duration(judged)*rc.window, st.Rule()))
			if res.Stats.Overloaded && res.Stability.Stable {
				res.Stability.State, res.Stability.Stable, res.Stability.Note = report.StateUnstable, false, res.Stats.OverloadNote
			}
		}
	}
	if len(replays) > 0 {
		res.Replay = mergeReplays(replays)
	}
	return res, smp
}

// mergeReplays combines the shards' views of one replay repeat: the rows
// sent and dropped add up (each shard sends and drops its own); clamped is
// counted once, since every shard computes the whole seeded schedule and
// clamps the same rows (the largest, should one differ); drift is the
// worst shard's (its distribution is not pooled).
func mergeReplays(rs []*report.ReplayResult) *report.ReplayResult {
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
