package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// rankGroup is one load and shape: per target, the latency and throughput
// point values and their bootstrap resamples.
type rankGroup struct {
	lat, thr []float64 // [target]
	// joules are each target's joules per output token (NaN: none).
	joules         []float64
	latRep, thrRep [][]float64 // [target][resample]
}

// rankInput is what the ranking needs.
type rankInput struct {
	targets []string
	groups  []rankGroup
	// memory is each target's peak GPU memory; nil when not every target
	// has one.
	memory []float64
	// checks are each target's known-answer results; nil when none.
	checks [][]bool
	// perplexity is each target's perplexity (NaN: not scored); nil
	// without bench.perplexity or when no target was scored. With checks,
	// it makes the accuracy component (quality.go).
	perplexity []float64
	// validity is each target's share of valid answers (structured
	// answers and tool calls pooled over its cells; NaN: none checked);
	// nil when no target's answers were checked. It joins the accuracy
	// component (quality.go).
	validity []float64
	// below says, per target, that a cell of it is below min_success: it
	// ranks below every target that is not, in the point ranking and in
	// every resample (nil: none is).
	below []bool
	// success and goodput are each target's success and goodput ratios
	// over all its cells (NaN: none; successInput), shown beside its score.
	success, goodput []float64
	minSuccess       float64
	// efficiency says every target has joules per output token in every
	// group: the efficiency component is scored (the same in every
	// resample: the energy is not resampled).
	efficiency bool
	weights    report.Weights
	refs       References
	figure     string
	confidence float64
	resamples  int
	seed       uint64
}

type components struct{ lat, thr, mem, acc, eff []float64 }

// scores computes the components and composite scores for one set of
// values. lat and thr are [group][target].
func (in *rankInput) scores(lat, thr [][]float64, acc []float64) (components, []float64) {
	n := len(in.targets)
	c := components{lat: make([]float64, n), thr: make([]float64, n)}
	for g := range lat {
		ref := in.refs.Latency.Seconds()
		if ref <= 0 {
			ref = math.Inf(1)
			for _, v := range lat[g] {
				if v > 0 && !math.IsNaN(v) {
					ref = min(ref, v)
				}
			}
		}
		tref := in.refs.Throughput
		if tref <= 0 {
			for _, v := range thr[g] {
				if !math.IsNaN(v) {
					tref = max(tref, v)
				}
			}
		}
		for t := 0; t < n; t++ {
			if v := lat[g][t]; v > 0 && !math.IsNaN(v) && !math.IsInf(ref, 1) {
				c.lat[t] += ref / v
			}
			if v := thr[g][t]; tref > 0 && !math.IsNaN(v) {
				c.thr[t] += v / tref
			}
		}
	}
	if len(lat) > 0 {
		for t := 0; t < n; t++ {
			c.lat[t] /= float64(len(lat))
			c.thr[t] /= float64(len(lat))
		}
	}
	w := in.weights
	wsum := w.Latency + w.Throughput
	if in.memory != nil {
		c.mem = make([]float64, n)
		ref := in.refs.MemoryBytes
		if ref <= 0 {
			ref = math.Inf(1)
			for _, m := range in.memory {
				ref = min(ref, m)
			}
		}
		for t, m := range in.memory {
			c.mem[t] = ref / m
		}
		wsum += w.Memory
	}
	if acc != nil {
		c.acc = acc
		wsum += w.Accuracy
	}
	if in.efficiency {
		c.eff = in.efficiencyScores()
		wsum += w.Efficiency
	}
	s := make([]float64, n)
	for t := 0; t < n; t++ {
		if wsum <= 0 {
			continue
		}
		v := w.Latency*c.lat[t] + w.Throughput*c.thr[t]
		if c.mem != nil {
			v += w.Memory * c.mem[t]
		}
		if c.acc != nil {
			v += w.Accuracy * c.acc[t]
		}
		if c.eff != nil {
			v += w.Efficiency * c.eff[t]
		}
		s[t] = v / wsum
	}
	return c, s
}

// efficiencyScores are the targets' efficiency components: per group,
// the lowest joules per output token / the target's, averaged over the
// groups.
func (in *rankInput) efficiencyScores() []float64 {
	out := make([]float64, len(in.targets))
	for _, g := range in.groups {
		best := math.Inf(1)
		for _, j := range g.joules {
			best = min(best, j)
		}
		for t, j := range g.joules {
			out[t] += best / j / float64(len(in.groups))
		}
	}
	return out
}

// ranksOf gives 1 to the highest score of the targets not below the
// success floor (below, nil: none is), the ranks after theirs to those
// below it, by score; equal scores on one side share the best rank.
func ranksOf(scores []float64, below []bool) []int {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ahead(scores, below, idx[a], idx[b]) })
	r := make([]int, len(scores))
	for pos, i := range idx {
		r[i] = pos + 1
		if j := idx[max(pos-1, 0)]; pos > 0 && scores[i] == scores[j] && isBelow(below, i) == isBelow(below, j) {
			r[i] = r[j]
		}
	}
	return r
}

// ahead says whether target a ranks ahead of target b: above the success
// floor when b is not, else by a higher score.
func ahead(scores []float64, below []bool, a, b int) bool {
	if ba, bb := isBelow(below, a), isBelow(below, b); ba != bb {
		return bb
	}
	return scores[a] > scores[b]
}

func isBelow(below []bool, t int) bool { return t < len(below) && below[t] }

func fractions(checks [][]bool) []float64 {
	if checks == nil {
		return nil
	}
	out := make([]float64, len(checks))
	for t, cs := range checks {
		var ok int
		for _, c := range cs {
			if c {
				ok++
			}
		}
		if len(cs) > 0 {
			out[t] = float64(ok) / float64(len(cs))
		}
	}
	return out
}

// components are the ranking's scored components, and the note that says
// why a weighted one is not scored.
func (in *rankInput) components() ([]string, string) {
	components := []string{"latency", "throughput"}
	if in.memory != nil {
		components = append(components, "memory")
	}
	if in.checks != nil || in.perplexity != nil || in.validity != nil {
		components = append(components, "accuracy")
	}
	if in.efficiency {
		components = append(components, "efficiency")
	}
	var notes []string
	if in.memory == nil && in.weights.Memory > 0 {
		notes = append(notes, "memory not scored: not every target has a nonzero peak GPU memory reading (no NVML, or its server is not on the GPUs this host sees)")
	}
	if in.checks == nil && in.perplexity == nil && in.validity == nil && in.weights.Accuracy > 0 {
		notes = append(notes, "accuracy not scored: no known-answer checks configured, no perplexity scored, and no answer checked for validity")
	}
	if !in.efficiency && in.weights.Efficiency > 0 {
		notes = append(notes, "efficiency not scored: not every target has joules per output token in every load and shape (no NVML, a GPU whose readings did not cover a cell, or a cell without tokens)")
	}
	return components, strings.Join(notes, "; ")
}

// rank computes the leaderboard.
func rank(in *rankInput) report.RankingResult {
	n := len(in.targets)
	res := report.RankingResult{
		LatencyFigure: in.figure, Weights: in.weights, Confidence: in.confidence, Resamples: in.resamples,
		References: report.RefsJSON{LatencySeconds: in.refs.Latency.Seconds(), Throughput: in.refs.Throughput, MemoryBytes: in.refs.MemoryBytes},
	}
	res.Components, res.Note = in.components()
	res.MinSuccess = in.minSuccess
	if n == 0 {
		return res
	}
	point := func(get func(g *rankGroup) []float64) [][]float64 {
		out := make([][]float64, len(in.groups))
		for g := range in.groups {
			out[g] = get(&in.groups[g])
		}
		return out
	}
	comp, score := in.scores(point(func(g *rankGroup) []float64 { return g.lat }), point(func(g *rankGroup) []float64 { return g.thr }), in.accuracy(fractions(in.checks)))

	rng := rand.New(rand.NewPCG(in.seed, 0x2545f4914f6cdd1d))
	repScores := make([][]float64, n)
	repRanks := make([][]float64, n)
	lat := make([][]float64, len(in.groups))
	thr := make([][]float64, len(in.groups))
	for g := range in.groups {
		lat[g], thr[g] = make([]float64, n), make([]float64, n)
	}
	var checks [][]bool
	if in.checks != nil {
		checks = make([][]bool, n)
		for t := range checks {
			checks[t] = make([]bool, len(in.checks[t]))
		}
	}
	for b := 0; b < in.resamples; b++ {
		for g := range in.groups {
			for t := 0; t < n; t++ {
				lat[g][t] = in.groups[g].latRep[t][b]
				thr[g][t] = in.groups[g].thrRep[t][b]
			}
		}
		for t := range checks {
			for i := range checks[t] {
				checks[t][i] = in.checks[t][rng.IntN(len(in.checks[t]))]
			}
		}
		_, s := in.scores(lat, thr, in.accuracy(fractions(checks)))
		r := ranksOf(s, in.below)
		for t := 0; t < n; t++ {
			repScores[t] = append(repScores[t], s[t])
			repRanks[t] = append(repRanks[t], float64(r[t]))
		}
	}

	entries := make([]report.RankEntry, n)
	for t := 0; t < n; t++ {
		e := report.RankEntry{Target: in.targets[t], Score: score[t], Latency: report.Num(comp.lat[t]), Throughput: report.Num(comp.thr[t]),
			Memory: report.NaN(), Accuracy: report.NaN(), Efficiency: report.NaN(), PeakMemoryBytes: report.NaN()}
		if comp.mem != nil {
			e.Memory, e.PeakMemoryBytes = report.Num(comp.mem[t]), report.Num(in.memory[t])
		}
		if comp.acc != nil {
			e.Accuracy = report.Num(comp.acc[t])
		}
		if comp.eff != nil {
			e.Efficiency = report.Num(comp.eff[t])
		}
		e.SuccessRatio, e.GoodputRatio = report.NaN(), report.NaN()
		if t < len(in.success) {
			e.SuccessRatio, e.GoodputRatio = report.Num(in.success[t]), report.Num(in.goodput[t])
		}
		e.BelowMinSuccess = isBelow(in.below, t)
		e.ScoreCI, _ = percentileInterval(repScores[t], in.confidence)
		ri, _ := percentileInterval(repRanks[t], in.confidence)
		e.RankLo, e.RankHi = int(math.Floor(ri.Lo)), int(math.Ceil(ri.Hi))
		entries[t] = e
	}
	// The floor first: a target that failed requests ranks below one that
	// did not, however fast its successes were.
	sort.SliceStable(entries, func(a, b int) bool {
		if entries[a].BelowMinSuccess != entries[b].BelowMinSuccess {
			return entries[b].BelowMinSuccess
		}
		return entries[a].Score > entries[b].Score
	})
	for i := range entries {
		entries[i].Position = i + 1
		entries[i].Rank = i + 1
		// Never tied across the floor: the resamples keep its sides apart.
		if i > 0 && entries[i].RankLo <= entries[i-1].RankHi && entries[i].BelowMinSuccess == entries[i-1].BelowMinSuccess {
			entries[i].Tied, entries[i-1].Tied = true, true
			entries[i].Rank = entries[i-1].Rank
		}
	}
	res.Entries = entries
	return res
}
