package bench

import (
	"math"
	"slices"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// The engine's own per-request timings (observation.ServerTimings), as the
// bench keeps them: each measured successful request's parts in its record
// (report.Record.Server, which a shard report carries to the merge), each
// repeat's p50 and p99 of every part from those records (serverTimingsOf),
// a cell's the median over its repeats (medianServerTimings), and every
// request's parts in --output.requests (setServerFields). The client
// overhead is the one the live series infer_probe_client_overhead_seconds
// observes (observation.Request.ClientOverhead): the client's TTFT, from
// the scheduled instant as the bench measures it, less the engine's queue
// and TTFT.

// serverParts are a request's timings by the engine's account, nil when
// its answer carried none.
func serverParts(o *observation.Request) *report.ServerParts {
	if !o.Server.Any() {
		return nil
	}
	num := func(d time.Duration, ok bool) report.Num {
		if !ok {
			return report.NaN()
		}
		return report.Num(d.Seconds())
	}
	s := &o.Server
	p := &report.ServerParts{
		Queue:      num(s.Queue.D, s.Queue.OK),
		EngineTTFT: num(s.TTFT.D, s.TTFT.OK),
		Generation: num(s.Generation.D, s.Generation.OK),
	}
	p.ClientOverhead = num(o.ClientOverhead())
	return p
}

// serverTimingsOf is a repeat's figures of the engine's timings, from its
// measured successful records; nil when none of them carried any.
func serverTimingsOf(recs []report.Record) *report.ServerTimings {
	var st report.ServerTimings
	var queue, ttft, gen, overhead []float64
	carried := false
	for i := range recs {
		r := &recs[i]
		// A measured request has an E2E when, and only when, it
		// succeeded (newRecord).
		if !r.Measured || math.IsNaN(float64(r.E2E)) {
			continue
		}
		st.Successes++
		p := r.Server
		if p == nil {
			continue
		}
		carried = true
		for _, x := range []struct {
			v   report.Num
			dst *[]float64
		}{{p.Queue, &queue}, {p.EngineTTFT, &ttft}, {p.Generation, &gen}, {p.ClientOverhead, &overhead}} {
			if x.v.Valid() {
				*x.dst = append(*x.dst, float64(x.v))
			}
		}
		if p.ClientOverhead.Valid() {
			st.Decomposed++
		}
	}
	if !carried {
		return nil
	}
	st.DecomposedRatio = float64(st.Decomposed) / float64(st.Successes)
	st.Queue, st.EngineTTFT, st.Generation, st.ClientOverhead = timingPart(queue), timingPart(ttft), timingPart(gen), timingPart(overhead)
	return &st
}

// timingPart is the count, p50 and p99 of xs (sorted in place).
func timingPart(xs []float64) report.TimingPart {
	if len(xs) == 0 {
		return report.TimingPart{P50: report.NaN(), P99: report.NaN()}
	}
	slices.Sort(xs)
	return report.TimingPart{Count: len(xs), P50: report.Num(quantileSorted(xs, 0.5)), P99: report.Num(quantileSorted(xs, 0.99))}
}

// medianServerTimings is a cell's figures: each one's median over the
// repeats that have the engine's timings (medianStats' rule for a Dist:
// a repeat without them does not vote), a count rounded down as
// medianStats rounds one; nil when no repeat has them.
func medianServerTimings(all []report.Stats) *report.ServerTimings {
	var have []*report.ServerTimings
	for i := range all {
		if t := all[i].ServerTimings; t != nil {
			have = append(have, t)
		}
	}
	if len(have) == 0 {
		return nil
	}
	med := func(f func(*report.ServerTimings) float64) float64 {
		v := make([]float64, len(have))
		for i, t := range have {
			v[i] = f(t)
		}
		return median(v)
	}
	count := func(f func(*report.ServerTimings) int) int {
		return int(math.Floor(med(func(t *report.ServerTimings) float64 { return float64(f(t)) })))
	}
	part := func(f func(*report.ServerTimings) *report.TimingPart) report.TimingPart {
		// A part's quantiles are NaN in a repeat without it: median skips
		// them, so the repeats that have the part decide.
		return report.TimingPart{
			Count: count(func(t *report.ServerTimings) int { return f(t).Count }),
			P50:   report.Num(med(func(t *report.ServerTimings) float64 { return float64(f(t).P50) })),
			P99:   report.Num(med(func(t *report.ServerTimings) float64 { return float64(f(t).P99) })),
		}
	}
	return &report.ServerTimings{
		Successes:       count(func(t *report.ServerTimings) int { return t.Successes }),
		Decomposed:      count(func(t *report.ServerTimings) int { return t.Decomposed }),
		DecomposedRatio: med(func(t *report.ServerTimings) float64 { return t.DecomposedRatio }),
		Queue:           part(func(t *report.ServerTimings) *report.TimingPart { return &t.Queue }),
		EngineTTFT:      part(func(t *report.ServerTimings) *report.TimingPart { return &t.EngineTTFT }),
		Generation:      part(func(t *report.ServerTimings) *report.TimingPart { return &t.Generation }),
		ClientOverhead:  part(func(t *report.ServerTimings) *report.TimingPart { return &t.ClientOverhead }),
	}
}

// setServerFields puts a request's timings by the engine's account in its
// record: each part it gave, the client overhead when its TTFT was split,
// and the decomposition's result for a request that was sent (an arrival
// never sent had no answer to carry any).
func setServerFields(rec *RequestRecord, o *observation.Request) {
	if o.Sent.IsZero() {
		return
	}
	secs := func(d time.Duration, ok bool) *float64 {
		if !ok {
			return nil
		}
		v := d.Seconds()
		return &v
	}
	s := &o.Server
	rec.ServerQueue = secs(s.Queue.D, s.Queue.OK)
	rec.ServerTTFT = secs(s.TTFT.D, s.TTFT.OK)
	rec.ServerGeneration = secs(s.Generation.D, s.Generation.OK)
	rec.ClientOverhead = secs(o.ClientOverhead())
	rec.ServerTimings = o.TimingsResult()
}
