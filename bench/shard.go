package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

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

// MaxShards bounds N.
const MaxShards = 10000

// ParseShard reads "i/N".
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return Shard{}, fmt.Errorf("--shard=%q: want i/N, such as 0/4", s)
	case n < 1 || n > MaxShards:
		return Shard{}, fmt.Errorf("--shard=%q: N must be in [1, %d]", s, MaxShards)
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
		Outcomes:  map[string]int{},
		WinTokens: rc.winTokens, WinSuccesses: rc.winSuccesses, WinCompletions: rc.winCompletions, WinInputTokens: rc.winInputTokens,
		WinOffered: rc.winOffered, WinDropped: rc.winDropped, WinSent: rc.winSent, WinEnded: rc.winEnded, WinE2E: rc.winE2E,
		RecordsSeen: rc.recsSeen, ITL: rc.itl, ITLSeen: rc.itlSeen,
	}
	for o, n := range rc.outcomes {
		st.Outcomes[string(o)] = n
	}
	if len(rc.httpErrors) > 0 {
		st.HTTPErrors = maps.Clone(rc.httpErrors)
	}
	st.Records = append(st.Records, rc.recs...)
	st.WinCapDropped = rc.winCapDropped
	st.Points, st.PointsSeen = append([]report.StabilityPoint(nil), rc.points...), rc.pointsSeen
	return st
}

// mergeStates builds the recorder of one repeat as a single process would
// have kept it from the shards' recorders of that repeat: counts and
// per-window aggregates add up; the records are the union, exact while no
// shard sampled; a shard that sampled contributes, like every other, a
// uniform share at the lowest sampling fraction among them, so that the
// union stays a uniform sample of all the requests.
func mergeStates(parts []report.RecorderState, maxRecs, maxITL int) (*recorder, int, time.Duration) {
	window := 0.0
	for _, p := range parts {
		window = max(window, p.WindowSeconds)
	}
	rc := newRecorderAt(time.Unix(0, 0), time.Duration(window*float64(time.Second)), config.SLO{}, maxRecs, maxITL, 1)
	rc.outcomes = map[observation.Outcome]int{}
	k, span := 0, 0.0
	addInts := func(dst *[]int, src []int) {
		*dst = grow(*dst, len(src))
		for i, v := range src {
			(*dst)[i] += v
		}
	}
	fracRec, fracITL := 1.0, 1.0
	for _, p := range parts {
		if p.RecordsSeen > 0 {
			fracRec = min(fracRec, float64(len(p.Records))/float64(p.RecordsSeen))
		}
		if p.ITLSeen > 0 {
			fracITL = min(fracITL, float64(len(p.ITL))/float64(p.ITLSeen))
		}
	}
	for _, p := range parts {
		k, span = max(k, p.Windows), max(span, p.SpanSeconds)
		rc.measured += p.Measured
		rc.goodput += p.Goodput
		rc.reasoningTokens += p.ReasoningTokens
		rc.reasoningRequests += p.ReasoningRequests
		for o, n := range p.Outcomes {
			rc.outcomes[observation.Outcome(o)] += n
		}
		for code, n := range p.HTTPErrors {
			rc.httpErrors[code] += n
		}
		rc.winTokens = grow(rc.winTokens, len(p.WinTokens))
		for i, v := range p.WinTokens {
			rc.winTokens[i] += v
		}
		addInts(&rc.winSuccesses, p.WinSuccesses)
		addInts(&rc.winCompletions, p.WinCompletions)
		addInts(&rc.winInputTokens, p.WinInputTokens)
		addInts(&rc.winOffered, p.WinOffered)
		addInts(&rc.winDropped, p.WinDropped)
		addInts(&rc.winCapDropped, p.WinCapDropped)
		for _, pt := range p.Points {
			rc.addPoint(pt)
		}
		addInts(&rc.winSent, p.WinSent)
		addInts(&rc.winEnded, p.WinEnded)
		rc.winE2E = grow(rc.winE2E, len(p.WinE2E))
		for i, v := range p.WinE2E {
			rc.winE2E[i] = append(rc.winE2E[i], v...)
		}
		take := len(p.Records)
		if p.RecordsSeen > 0 {
			take = min(take, int(math.Round(fracRec*float64(p.RecordsSeen))))
		}
		rc.recs = append(rc.recs, p.Records[:take]...)
		rc.recsSeen += p.RecordsSeen
		takeITL := len(p.ITL)
		if p.ITLSeen > 0 {
			takeITL = min(takeITL, int(math.Round(fracITL*float64(p.ITLSeen))))
		}
		rc.itl = append(rc.itl, p.ITL[:takeITL]...)
		rc.itlSeen += p.ITLSeen
	}
	return rc, k, time.Duration(span * float64(time.Second))
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

// maxStartAhead bounds --shard.start-at: an instant further ahead is a
// mistake (milliseconds read as seconds), not a plan.
const maxStartAhead = 24 * time.Hour

// ParseStartAt reads --shard.start-at: an RFC 3339 instant
// (2026-12-03T21:00:00Z) or a Unix time in seconds, fractional or not
// (1796331600, as busybox's `date +%s` writes it), at most a day after
// now.
func ParseStartAt(s string, now time.Time) (time.Time, error) {
	var at time.Time
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && f > 0 && f < 1e11 {
		sec, frac := math.Modf(f)
		at = time.Unix(int64(sec), int64(math.Round(frac*1e9)))
	} else if at, err = time.Parse(time.RFC3339Nano, s); err != nil {
		return time.Time{}, fmt.Errorf("--shard.start-at=%q: want an RFC 3339 instant (2006-01-02T15:04:05Z) or a Unix time in seconds", s)
	}
	if at.Sub(now) > maxStartAhead {
		return time.Time{}, fmt.Errorf("--shard.start-at=%q: %s ahead, more than %s", s, at.Sub(now).Round(time.Second), maxStartAhead)
	}
	return at, nil
}

// shardClock is the schedule of repeat starts that every shard of a run
// computes alike, with no word between them: the first repeat starts at
// the instant given to all (--shard.start-at), and each next one at the
// previous one's agreed start plus its planned length (plannedLength:
// warm-up + duration, or a replay's window, the same on every shard) plus
// the slack. A repeat's end cannot be agreed on, since each shard drains
// its own requests; its planned start can. A shard that overruns a slot
// starts its next repeat late, at once, and says so; the one after is on
// the agreed schedule again, since every start is counted from the
// agreed ones, never from a late one.
type shardClock struct {
	next  time.Time // the agreed start of the next repeat
	slack time.Duration
}

// plan takes the agreed start of the next repeat, of the given planned
// length, and moves the clock past it.
func (c *shardClock) plan(length time.Duration) time.Time {
	at := c.next
	c.next = at.Add(length + c.slack)
	return at
}

// waitUntil waits until at, or ctx's end. It returns the instant the
// repeat's schedule starts from, at itself when the wait reached it, now
// when at had already passed, and the instant it woke.
func waitUntil(ctx context.Context, at time.Time) (origin, woke time.Time, err error) {
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, ctx.Err()
		case <-t.C:
		}
		return at, time.Now(), nil
	}
	now := time.Now()
	return now, now, nil
}
