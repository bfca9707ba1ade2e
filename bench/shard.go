package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Shard is one process's share of a bench run split across N processes
// (`bench --shard=i/N`, 0 <= i < N, so that a Kubernetes Indexed Job's
// completion index is used as is). Every shard computes the same seeded
// schedule a single process would send, and sends arrival n when
// n mod N = i, with the prompt a single process would have given it; a
// closed loop's clients are dealt out the same way, and a replay's rows.
// `bench merge` then combines the shards' reports into the one a single
// process would have written.
type Shard struct{ Index, Count int }

// ParseShard reads "i/N".
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return Shard{}, fmt.Errorf("--shard=%q: want i/N, such as 0/4", s)
	case n < 1 || n > merge.MaxShards:
		return Shard{}, fmt.Errorf("--shard=%q: N must be in [1, %d]", s, merge.MaxShards)
	case i < 0 || i >= n:
		return Shard{}, fmt.Errorf("--shard=%q: i must be in [0, N) (0-based, as a Job's completion index)", s)
	}
	return Shard{i, n}, nil
}

// On says the run is split.
func (s Shard) On() bool { return s.Count > 1 }

// share is this shard's part of n things dealt out in turn.
func (s Shard) share(n int) int {
	q := n / s.Count
	if s.Index < n%s.Count {
		q++
	}
	return q
}

// shardSchedule yields the arrivals of its shard: the inner schedule's
// arrivals n with n mod Count = Index.
type shardSchedule struct {
	inner workload.Schedule
	shard Shard
	n     int
}

func (s *shardSchedule) Next() (time.Duration, bool) {
	for {
		off, ok := s.inner.Next()
		if !ok {
			return 0, false
		}
		mine := s.n%s.shard.Count == s.shard.Index
		s.n++
		if mine {
			return off, true
		}
	}
}

func (s *shardSchedule) Rate(elapsed time.Duration) float64 {
	return s.inner.Rate(elapsed) / float64(s.shard.Count)
}

func (s *shardSchedule) Clamped() uint64 { return s.inner.Clamped() }

// export serialises the recorder as finish(k, span) saw it.
func (rc *recorder) export(k int, span time.Duration) report.RecorderState {
	rc.settle()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	st := report.RecorderState{
		WindowSeconds: rc.window.Seconds(), Windows: k, SpanSeconds: span.Seconds(),
		Measured: rc.measured, Goodput: rc.goodput, ReasoningTokens: rc.reasoningTokens, ReasoningRequests: rc.reasoningRequests,
		Outcomes:  outcomeCounts(rc.outcomes),
		WinTokens: rc.winTokens, WinGoodTokens: rc.winGoodTokens, WinSuccesses: rc.winSuccesses, WinCompletions: rc.winCompletions, WinInputTokens: rc.winInputTokens,
		WinOffered: rc.winOffered, WinDropped: rc.winDropped, WinSent: rc.winSent, WinEnded: rc.winEnded, WinE2E: rc.winE2E,
		RecordsSeen: rc.recsSeen, ITL: rc.itl, ITLSeen: rc.itlSeen,
	}
	st.HTTPErrors = countsOrNil(rc.httpErrors)
	st.StructuredChecks = countsOrNil(rc.structuredChecks)
	st.ToolCallChecks = countsOrNil(rc.toolCallChecks)
	st.Records = append(st.Records, rc.recs...)
	st.WinCapDropped, st.InFlightCap = rc.winCapDropped, rc.inFlightCap
	st.Points, st.PointsSeen = append([]report.StabilityPoint(nil), rc.points...), rc.pointsSeen
	st.UsageNotBelieved = rc.usageNotBelieved
	return st
}

// recorderOf is the recorder that holds st, a repeat's recorders as
// bench merge pooled them (merge.PoolStates), with the windows and the
// measured span they cover: export's inverse, from which the figures of
// the merged repeat are computed as one process computes its own. Its
// stability points are kept as a recorder keeps its own (addPoint), the
// pool holding every shard's.
func recorderOf(st report.RecorderState, maxRecs, maxITL int) (*recorder, int, time.Duration) {
	rc := newRecorderAt(time.Unix(0, 0), time.Duration(st.WindowSeconds*float64(time.Second)), config.SLO{}, maxRecs, maxITL, 1)
	rc.measured, rc.goodput = st.Measured, st.Goodput
	rc.reasoningTokens, rc.reasoningRequests = st.ReasoningTokens, st.ReasoningRequests
	rc.usageNotBelieved = st.UsageNotBelieved
	for o, n := range st.Outcomes {
		rc.outcomes[observation.Outcome(o)] += n
	}
	for code, n := range st.HTTPErrors {
		rc.httpErrors[code] += n
	}
	for r, n := range st.StructuredChecks {
		rc.structuredChecks[r] += n
	}
	for r, n := range st.ToolCallChecks {
		rc.toolCallChecks[r] += n
	}
	rc.winTokens, rc.winSuccesses, rc.winCompletions, rc.winInputTokens = st.WinTokens, st.WinSuccesses, st.WinCompletions, st.WinInputTokens
	rc.winGoodTokens = st.WinGoodTokens
	rc.winOffered, rc.winDropped, rc.winCapDropped = st.WinOffered, st.WinDropped, st.WinCapDropped
	rc.inFlightCap = st.InFlightCap
	rc.winSent, rc.winEnded, rc.winE2E = st.WinSent, st.WinEnded, st.WinE2E
	for _, p := range st.Points {
		rc.addPoint(p)
	}
	rc.recs, rc.recsSeen, rc.itl, rc.itlSeen = st.Records, st.RecordsSeen, st.ITL, st.ITLSeen
	return rc, st.Windows, time.Duration(st.SpanSeconds * float64(time.Second))
}

// shardPart collects a shard's recorders, cell by cell (the order of
// assembleCells: target by target, then group by group).
func shardPart(sh Shard, targets []string, groups []group, acc [][]cellAcc) *report.ShardPart {
	part := &report.ShardPart{Index: sh.Index, Count: sh.Count}
	for ti, target := range targets {
		for gi, g := range groups {
			c := report.ShardCells{Key: report.CellKey(target, g.load, g.name)}
			for _, r := range acc[gi][ti].repeats {
				if r.State != nil {
					c.Repeats = append(c.Repeats, *r.State)
				} else {
					// A shard without a share of the cell (fewer clients
					// than shards).
					c.Repeats = append(c.Repeats, report.RecorderState{Outcomes: map[string]int{}})
				}
			}
			part.Cells = append(part.Cells, c)
		}
	}
	return part
}

// DefaultShardSlack is --shard.slack: the time a repeat is given, past its
// planned length, to drain its requests before the next repeat's agreed
// start.
const DefaultShardSlack = 10 * time.Second

// MaxShardSlack bounds --shard.slack. The slack is room for the requests
// in flight at a repeat's planned end, which end within their target's
// request timeout (5 minutes by default, config.DefaultTimeout); an hour is
// twelve of those, room for a raised timeout. Every shard idles for the
// slack after every repeat, so a larger one is a unit slipped (1000h for
// 1000s) that would hold a run of a few repeats for weeks, not a plan.
const MaxShardSlack = time.Hour

// maxStartAhead bounds --shard.start-at: an instant further ahead is a
// mistake (milliseconds read as seconds), not a plan.
const maxStartAhead = 24 * time.Hour

// maxStartBehind bounds --shard.start-at on the other side: a shard that
// starts after the agreed instant starts at once, late, and says so (a pod
// scheduled late, a retried one); one more than a day behind is no late
// start but a wrong date (a stale manifest, a template's unset date), whose
// repeats would never overlap the other shards' however the merge pools
// them.
const maxStartBehind = 24 * time.Hour

// ParseStartAt reads --shard.start-at: an RFC 3339 instant
// (2026-12-03T21:00:00Z) or a Unix time in seconds, fractional or not
// (1796331600, as busybox's `date +%s` writes it), at most a day after
// now and a day before it. The zero instant (0001-01-01T00:00:00Z, Go's
// unset time) is refused by name: taken as "no start given" it would run
// without the shards' clock, and taken as an instant it is two thousand
// years late.
func ParseStartAt(s string, now time.Time) (time.Time, error) {
	var at time.Time
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && f > 0 && f < 1e11 {
		sec, frac := math.Modf(f)
		at = time.Unix(int64(sec), int64(math.Round(frac*1e9)))
	} else if at, err = time.Parse(time.RFC3339Nano, s); err != nil {
		return time.Time{}, fmt.Errorf("--shard.start-at=%q: want an RFC 3339 instant (2006-01-02T15:04:05Z) or a Unix time in seconds", s)
	}
	switch {
	case at.IsZero():
		return time.Time{}, fmt.Errorf("--shard.start-at=%q: the zero instant (an unset date): give the instant every shard starts at, or leave the flag out", s)
	case at.Sub(now) > maxStartAhead:
		return time.Time{}, fmt.Errorf("--shard.start-at=%q: %s ahead, more than %s", s, at.Sub(now).Round(time.Second), maxStartAhead)
	case now.Sub(at) > maxStartBehind:
		return time.Time{}, fmt.Errorf("--shard.start-at=%q: %s ago, more than %s: a wrong date, not a late start", s, now.Sub(at).Round(time.Second), maxStartBehind)
	}
	return at, nil
}

// CheckShardSlack checks --shard.slack: not negative, at most
// MaxShardSlack.
func CheckShardSlack(d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("--shard.slack=%s: must not be negative", d)
	case d > MaxShardSlack:
		return fmt.Errorf("--shard.slack=%s: more than %s (bench.MaxShardSlack): the room after each repeat for its last requests to end needs no more than the targets' request timeout (%s by default), and every shard idles for it after every repeat", d, MaxShardSlack, config.DefaultTimeout)
	}
	return nil
}

// Merge merges the reports of a split run's shards (merge.Merge), the
// bench reading the configuration they embedded and computing the
// figures of their pool.
func Merge(ctx context.Context, shards []merge.ShardFile) (*report.Report, error) {
	return merge.Merge(ctx, shards, readShardRun)
}

// shardRun is a split run as bench merge asks the bench for it
// (merge.Run): the configuration its shards embedded.
type shardRun struct{ cfg *Config }

// readShardRun is merge.ReadRun: the embedded configuration, parsed and
// validated offline (parseEmbedded).
func readShardRun(ctx context.Context, text []byte, field string) (merge.Run, error) {
	cfg, err := parseEmbedded(ctx, text, field)
	if err != nil {
		return nil, err
	}
	return shardRun{cfg}, nil
}

// Matrix implements merge.Run: the run's targets and groups, in the order
// it runs them (matrixGroups).
func (r shardRun) Matrix() merge.Matrix {
	spec := &r.cfg.Bench
	m := merge.Matrix{Seed: spec.Seed, MaxSamplesPerRepeat: spec.MaxSamplesPerRepeat, Repeats: spec.Repeats}
	for _, t := range r.cfg.RunTargets() {
		m.Targets = append(m.Targets, t.Name)
	}
	for _, g := range matrixGroups(spec) {
		m.Groups = append(m.Groups, merge.Group{Shape: g.name, Load: g.load})
	}
	return m
}

// MaxWindows implements merge.Run (maxWindows).
func (r shardRun) MaxWindows(c *report.CellResult, ri int) int { return maxWindows(r.cfg, c, ri) }

// Figures implements merge.Run: every pooled repeat's figures
// (pooledRepeat), then the cells and the ranking, as Run computes them.
func (r shardRun) Figures(ctx context.Context, rep *report.Report) error {
	spec := &r.cfg.Bench
	targets, groups := r.cfg.RunTargets(), matrixGroups(spec)
	names := make([]string, len(targets))
	for i := range targets {
		names[i] = targets[i].Name
	}
	acc := make([][]cellAcc, len(groups))
	for gi := range groups {
		acc[gi] = make([]cellAcc, len(names))
	}
	// The pool's cells are the matrix's (merge checked them): target by
	// target, then group by group, as assembleCells orders them.
	for ci := range rep.Cells {
		ti, gi := ci/len(groups), ci%len(groups)
		for ri := range rep.Cells[ci].Repeats {
			if err := ctx.Err(); err != nil {
				return err
			}
			res := rep.Cells[ci].Repeats[ri]
			smp := pooledRepeat(&res, rep.Shard.Cells[ci].Repeats[ri], spec)
			acc[gi][ti].repeats = append(acc[gi][ti].repeats, res)
			acc[gi][ti].samples = append(acc[gi][ti].samples, smp)
		}
	}
	cells, reps := assembleCells(ctx, spec, names, groups, acc)
	if err := ctx.Err(); err != nil {
		return err
	}
	rep.Cells = cells
	b := &run{cfg: r.cfg, spec: spec}
	rep.Ranking = rank(b.rankInput(targets, groups, reps, rep))
	return nil
}

// pooledRepeat fills a merged repeat's figures from its pooled recorder,
// as finishRepeat fills one process's, and judges its stability on the
// pooled windows; it returns the repeat's bootstrap sample.
func pooledRepeat(res *report.RepeatResult, st report.RecorderState, spec *Spec) *sample {
	rc, k, span := recorderOf(st, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples)
	stats, smp := rc.finish(k, span)
	var devices []report.GPUEnergy
	if e := res.Stats.Efficiency; e != nil {
		devices = e.Devices // every shard's GPUs, each once (merge.poolRepeat)
	}
	res.Stats = stats
	res.Stats.Efficiency = efficiencyOf(&res.Stats, devices, spec.Cost)
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
			res.Stability.Checked, res.Stability.State, res.Stability.Stable = false, "", nil
			res.Stability.Note = fmt.Sprintf("not judged: the merged replay filled no complete window of %s", rc.window)
		} else {
			setVerdict(&res.Stability, rc.judge(judged, time.Duration(judged)*rc.window, st.Rule()))
			if res.Stats.Overloaded && res.Stability.State == report.StateStable {
				res.Stability.State, res.Stability.Note = report.StateUnstable, res.Stats.OverloadNote
				res.Stability.Stable = report.StableOf(res.Stability.State)
			}
		}
	}
	return smp
}

// maxWindows is the most windows repeat ri of cell c can have under cfg:
// one, unless the stability check extends it, window by window, up to
// stability.max_duration (run.repeat); a replay's as many as its span
// fills (replayWindows).
func maxWindows(cfg *Config, c *report.CellResult, ri int) int {
	spec := &cfg.Bench
	st := spec.Stability
	if c.Load.Kind == report.LoadReplay {
		return replayWindows(cfg, c, ri)
	}
	if !st.On() || st.Window <= 0 {
		return 1
	}
	base := math.Ceil(float64(spec.Duration) / float64(st.Window))
	k := max(base, math.Floor(float64(st.MaxDuration)/float64(st.Window)))
	return int(min(k, merge.MaxShardWindows))
}

// replayWindows is the most windows a replay repeat can measure: a
// looping one is cut after its base windows (warm-up + duration); one
// that plays its window once measures from its warm-up's end to its last
// request's end (run.finishRepeat), which is at most the trace's window
// at its speed, plus the delay of the rows its rate ceiling held back,
// plus the target's request timeout, plus a second for the client's own
// lag: a window more than that span fills. The trace is not read here
// (the merge runs offline), so its window's length and rows are shard
// 0's, which every shard must agree with and which are themselves bounded
// (bench/merge's checks): the windows stay within merge.MaxShardWindows
// whatever a report claims.
func replayWindows(cfg *Config, c *report.CellResult, ri int) int {
	spec := &cfg.Bench
	st := spec.Stability
	window := spec.Duration // run.repeatWindows: the stability window when it is on
	if st.On() && st.Window > 0 {
		window = st.Window
	}
	if window <= 0 {
		return 1
	}
	base := math.Ceil(float64(spec.Duration) / float64(window))
	var rp *ReplaySpec
	for i := range spec.Matrix.Replays {
		if spec.Matrix.Replays[i].Name == c.Shape {
			rp = &spec.Matrix.Replays[i]
		}
	}
	res := c.Repeats[ri].Replay
	if rp == nil || rp.Loop || res == nil {
		return int(min(max(base, 1), merge.MaxShardWindows))
	}
	span := res.WindowSeconds
	if rp.End > 0 && rp.Speed > 0 {
		span = min(span, (rp.End-rp.Start).Seconds()/rp.Speed)
	}
	if rp.MaxRate > 0 {
		// At worst every row waits its turn under the ceiling.
		span += float64(res.Rows) / rp.MaxRate
	} else {
		// The default ceiling is ten times the busiest second's rows, so
		// it holds rows back by at most a tenth of the seconds they fill.
		span += (math.Ceil(span) + 1) / 10
	}
	timeout := config.DefaultTimeout
	for _, t := range cfg.RunTargets() {
		if t.Name == c.Target && t.Timeout > 0 {
			timeout = t.Timeout
		}
	}
	span += timeout.Seconds() + 1
	k := math.Ceil(span/window.Seconds()) + 1
	return int(min(max(k, base, 1), merge.MaxShardWindows))
}
