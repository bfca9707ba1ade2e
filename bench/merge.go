package bench

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Merge combines the reports of the N shards of one split run into the
// report a single process would have written: per cell and repeat, the
// shards' counts and per-window aggregates add up and their request
// records are pooled (see mergeStates), then the cells, their bootstrap
// intervals and the ranking are computed from the pool as Run computes
// them. The shards must be 0..N-1 of one run (one configuration, one N).
// What is one machine's (the GPU samples, the known-answer checks, the
// timeline) is shard 0's.
func Merge(shards []*Report) (*Report, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("no shard report")
	}
	byIndex := make([]*Report, 0, len(shards))
	n := 0
	for i, r := range shards {
		if r.Shard == nil {
			return nil, fmt.Errorf("report %d is not a shard report (run with --shard=i/N)", i+1)
		}
		if n == 0 {
			n = r.Shard.Count
		}
		switch {
		case r.Shard.Count != n:
			return nil, fmt.Errorf("shard %d/%d beside shards of %d", r.Shard.Index, r.Shard.Count, n)
		case r.Environment.ConfigSHA256 != shards[0].Environment.ConfigSHA256:
			return nil, fmt.Errorf("shard %d ran configuration %s, shard %d %s", r.Shard.Index, r.Environment.ConfigSHA256, shards[0].Shard.Index, shards[0].Environment.ConfigSHA256)
		}
		byIndex = append(byIndex, r)
	}
	slices.SortFunc(byIndex, func(a, b *Report) int { return a.Shard.Index - b.Shard.Index })
	for i, r := range byIndex {
		if r.Shard.Index != i {
			return nil, fmt.Errorf("shards of %d: shard %d is missing or repeated (have %d reports)", n, i, len(byIndex))
		}
	}
	if len(byIndex) != n {
		return nil, fmt.Errorf("shards of %d: %d reports", n, len(byIndex))
	}
	first := byIndex[0]
	var cfg Config
	if err := yaml.Unmarshal([]byte(first.Environment.Config), &cfg); err != nil {
		return nil, fmt.Errorf("shard 0's configuration: %w", err)
	}
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
			var parts []RecorderState
			res := c.Repeats[ri]
			var replays []*ReplayResult
			for _, r := range byIndex {
				sc := r.Shard.Cells[ci]
				if ci >= len(r.Cells) || sc.Key != c.Key || ri >= len(sc.Repeats) || ri >= len(r.Cells[ci].Repeats) {
					return nil, fmt.Errorf("shard %d has no repeat %d of cell %s", r.Shard.Index, ri+1, c.Key)
				}
				parts = append(parts, sc.Repeats[ri])
				rr := r.Cells[ci].Repeats[ri]
				if rr.Started.Before(res.Started) {
					res.Started = rr.Started
				}
				res.Stability.Stable = res.Stability.Stable && (rr.Stability.Stable || !rr.Stability.Checked)
				res.Stability.Checked = res.Stability.Checked || rr.Stability.Checked
				res.SchedulingLatencyP99 = max(res.SchedulingLatencyP99, rr.SchedulingLatencyP99)
				res.PromptsDrawn += rr.PromptsDrawn
				if rr.Replay != nil {
					replays = append(replays, rr.Replay)
				}
			}
			res.PromptsDrawn -= c.Repeats[ri].PromptsDrawn // counted once above
			rc, k, span := mergeStates(parts, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples)
			stats, smp := rc.finish(k, span)
			res.Stats = stats
			res.Stability.Medians = nil
			med, _ := rc.windowMedians(k)
			for _, m := range med {
				res.Stability.Medians = append(res.Stability.Medians, Num(m))
			}
			if len(replays) > 0 {
				res.Replay = mergeReplays(replays)
			}
			acc[gi][ti].repeats = append(acc[gi][ti].repeats, res)
			acc[gi][ti].samples = append(acc[gi][ti].samples, smp)
		}
	}
	rep := &Report{Schema: Schema, Environment: first.Environment, Accuracy: first.Accuracy, GPU: first.GPU,
		Timeline: first.Timeline, MergedShards: n}
	for _, r := range byIndex {
		if r.Environment.Started.Before(rep.Environment.Started) {
			rep.Environment.Started = r.Environment.Started
		}
		if r.Environment.Finished.After(rep.Environment.Finished) {
			rep.Environment.Finished = r.Environment.Finished
		}
	}
	cells, reps := assembleCells(spec, names, groups, acc)
	rep.Cells = cells
	targets := make([]config.Target, len(names))
	for i, name := range names {
		targets[i].Name = name
	}
	b := &run{cfg: &cfg, spec: spec}
	rep.Ranking = rank(b.rankInput(targets, groups, reps, rep))
	return rep, nil
}

// mergeReplays combines the shards' views of one replay repeat: the rows
// add up; drift is the worst shard's (its distribution is not pooled).
func mergeReplays(rs []*ReplayResult) *ReplayResult {
	out := *rs[0]
	out.Replayed, out.Dropped, out.Clamped = 0, 0, 0
	for _, r := range rs {
		out.Replayed += r.Replayed
		out.Dropped += r.Dropped
		out.Clamped += r.Clamped
		if r.Drift.P99 > out.Drift.P99 {
			out.Drift = r.Drift
		}
		out.Degraded = out.Degraded || r.Degraded
	}
	return &out
}
