package bench

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// summarize sorts xs in place and summarises it.
func summarize(xs []float64) report.Dist {
	if len(xs) == 0 {
		return report.Dist{}
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return report.Dist{
		Count: len(xs),
		Mean:  sum / float64(len(xs)),
		Min:   xs[0],
		P50:   quantileSorted(xs, 0.5),
		P90:   quantileSorted(xs, 0.9),
		P95:   quantileSorted(xs, 0.95),
		P99:   quantileSorted(xs, 0.99),
		P999:  quantileSorted(xs, 0.999),
		Max:   xs[len(xs)-1],
	}
}

// quantileSorted is the p-quantile of sorted xs (see Dist); NaN when empty.
func quantileSorted(xs []float64, p float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	h := float64(n-1) * p
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return xs[n-1]
	}
	return xs[lo] + (h-float64(lo))*(xs[lo+1]-xs[lo])
}

// median of the non-NaN values of xs (the mean of the middle two for an even
// count); NaN when there are none. xs is not modified.
func median(xs []float64) float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}

// The figures that carry bootstrap intervals, in this order.
const (
	figTTFTP50 = iota
	figTTFTP90
	figTTFTP99
	figTPOTP50
	figTPOTP90
	figTPOTP99
	figE2EP50
	figE2EP90
	figE2EP99
	figThroughput
	figGoodputRatio
	figSuccessRatio
	numFigures
)

// FigureNames name the figures with intervals, as keys of CellResult.CI:
// latency quantiles in seconds, output_tokens_per_second, goodput_ratio
// and success_ratio.
var FigureNames = [numFigures]string{
	"ttft_p50", "ttft_p90", "ttft_p99",
	"tpot_p50", "tpot_p90", "tpot_p99",
	"e2e_p50", "e2e_p90", "e2e_p99",
	"output_tokens_per_second", "goodput_ratio", "success_ratio",
}

func figureIndex(name string) int {
	for i, n := range FigureNames {
		if n == name {
			return i
		}
	}
	return -1
}

// figures is one value of every figure.
type figures [numFigures]float64

// The latencies with intervals.
const (
	latTTFT = iota
	latTPOT
	latE2E
	numLatencies
)

var figureQuantiles = [3]float64{0.5, 0.9, 0.99}

// sortedIndex holds one latency of a repeat's requests, sorted, with each
// request's position in that order (-1: the request has no such latency),
// so that a bootstrap resample is counted, not sorted.
type sortedIndex struct {
	vals []float64
	pos  []int32
}

func newSortedIndex(values []float64) sortedIndex {
	type iv struct {
		v float64
		i int32
	}
	ivs := make([]iv, 0, len(values))
	for i, v := range values {
		if !math.IsNaN(v) {
			ivs = append(ivs, iv{v, int32(i)})
		}
	}
	// The values are not NaN (dropped above), so cmp.Compare is the plain order.
	slices.SortFunc(ivs, func(a, b iv) int { return cmp.Or(cmp.Compare(a.v, b.v), cmp.Compare(a.i, b.i)) })
	s := sortedIndex{vals: make([]float64, len(ivs)), pos: make([]int32, len(values))}
	for i := range s.pos {
		s.pos[i] = -1
	}
	for k, x := range ivs {
		s.vals[k] = x.v
		s.pos[x.i] = int32(k)
	}
	return s
}

// sample is what the bootstrap resamples for one repeat: its requests, each
// with its latencies (when measured), the output tokens it delivered within
// the measured window and whether it was measured, succeeded and met the
// SLO.
type sample struct {
	lat      [numLatencies]sortedIndex
	tokens   []float64
	measured []bool
	goodput  []bool
	success  []bool
	// window is the measured window's length in seconds; scale multiplies
	// sums when the requests are a reservoir sample of more.
	window float64
	scale  float64
	// block is the resample's block of consecutive requests (blockLength;
	// 0 or 1: requests one by one); the requests are in send order.
	block int
	// tau[l][q] is the integrated autocorrelation time of latency l's
	// figureQuantiles[q] (quantileTau; 0 or 1: independent requests): a
	// resample draws the quantile's rank as n/tau requests would.
	tau [numLatencies][len(figureQuantiles)]float64
}

func (s *sample) n() int { return len(s.tokens) }

// resampler draws bootstrap resamples. It reuses its buffers; it is not
// safe for concurrent use.
type resampler struct {
	rng    *rand.Rand
	counts [numLatencies][]int32
}

func newResampler(seed1, seed2 uint64) *resampler {
	return &resampler{rng: rand.New(rand.NewPCG(seed1, seed2))}
}

// figures computes s's figures over one resample of its requests (drawn
// with replacement, as many as it has, in circular blocks of s.block
// consecutive ones); with identity true it uses every request once
// instead, which gives the point estimate by the same code.
func (r *resampler) figures(s *sample, identity bool) figures {
	var f figures
	n := s.n()
	for l := range r.counts {
		m := len(s.lat[l].vals)
		if cap(r.counts[l]) < m {
			r.counts[l] = make([]int32, m)
		}
		r.counts[l] = r.counts[l][:m]
		clear(r.counts[l])
	}
	var tokens float64
	var measured, good, succeeded int
	block := max(1, s.block)
	start := 0
	for k := 0; k < n; k++ {
		i := k
		if !identity {
			if k%block == 0 {
				start = r.rng.IntN(n)
			}
			i = (start + k%block) % n
		}
		if identity {
			for l := range r.counts {
				if p := s.lat[l].pos[i]; p >= 0 {
					r.counts[l][p]++
				}
			}
		}
		tokens += s.tokens[i]
		if s.measured[i] {
			measured++
			if s.goodput[i] {
				good++
			}
			if s.success[i] {
				succeeded++
			}
		}
	}
	var q [3]float64
	for l := range r.counts {
		if identity {
			countQuantiles(s.lat[l].vals, r.counts[l], figureQuantiles[:], q[:])
		} else {
			r.quantiles(s, l, q[:])
		}
		copy(f[l*3:l*3+3], q[:])
	}
	f[figThroughput] = math.NaN()
	if s.window > 0 {
		f[figThroughput] = tokens * s.scale / s.window
	}
	f[figGoodputRatio], f[figSuccessRatio] = math.NaN(), math.NaN()
	if measured > 0 {
		f[figGoodputRatio] = float64(good) / float64(measured)
		f[figSuccessRatio] = float64(succeeded) / float64(measured)
	}
	return f
}

// quantiles draws one resample of latency l's figureQuantiles into out.
// A bootstrap resample's p-quantile is the value at a rank whose share of
// the m values varies as p(1-p)/m (the binomial count of resampled values
// below it), so the rank is drawn so, from a normal: the same replicates
// as resampling the requests one by one, but with the variance of m/tau
// independent requests when the requests above and below the quantile
// come in bursts (sample.tau). Resampling blocks of requests cannot give
// that to a tail: a p99 of 600 requests rests on 6 of them, which a burst
// puts in one block or two.
func (r *resampler) quantiles(s *sample, l int, out []float64) {
	vals := s.lat[l].vals
	m := float64(len(vals))
	for q, p := range figureQuantiles {
		if m == 0 {
			out[q] = math.NaN()
			continue
		}
		tau := max(1, s.tau[l][q])
		sd := math.Sqrt(p * (1 - p) * tau / m)
		u := min(1, max(0, p+sd*r.studentT(m/tau-1)))
		out[q] = quantileSorted(vals, u)
	}
}

// studentT draws from Student's t distribution with df degrees of
// freedom (at least 1), a normal beyond 100: the rank's spread is itself
// estimated from the run's n/tau effective requests, and when they are
// few the interval must be a t interval's, not a normal's (as batch means
// use t with one degree fewer than their batches).
func (r *resampler) studentT(df float64) float64 {
	z := r.rng.NormFloat64()
	if df > 100 {
		return z
	}
	k := max(1, int(math.Round(df)))
	var chi2 float64
	for range k {
		x := r.rng.NormFloat64()
		chi2 += x * x
	}
	return z / math.Sqrt(chi2/float64(k))
}

// resolvable says whether the requests of samples bound figure f at level
// conf. A latency quantile p of requests worth n independent ones (the
// repeats' requests over their tau) has its rank's interval p ± z
// sqrt(p(1-p)/n): when that reaches past the last request (or before the
// first), no request bounds the quantile on that side, and an interval
// cut at the largest request would claim a precision the run does not
// have (its p99 of 600 requests worth 30 could be anywhere above the
// largest). Such a figure gets no interval: the gate calls it
// inconclusive, as it is. The rule asks about z² p/(1-p) effective
// requests of a p99 (380 at 95%), 35 of a p90. Figures that are not
// latency quantiles are always resolvable.
func resolvable(samples []*sample, f int, conf float64) bool {
	if f >= numLatencies*len(figureQuantiles) {
		return true
	}
	l, q := f/len(figureQuantiles), f%len(figureQuantiles)
	p := figureQuantiles[q]
	var n float64
	for _, s := range samples {
		n += float64(len(s.lat[l].vals)) / max(1, s.tau[l][q])
	}
	if n == 0 {
		return false
	}
	z := math.Sqrt2 * math.Erfinv(conf)
	half := z * math.Sqrt(p*(1-p)/n)
	return p+half < 1 && p-half > 0
}

// countQuantiles computes the quantiles ps (ascending) of the multiset that
// holds counts[k] copies of vals[k] (vals ascending), with quantileSorted's
// interpolation, into out. NaN when the multiset is empty.
func countQuantiles(vals []float64, counts []int32, ps []float64, out []float64) {
	var total int
	for _, c := range counts {
		total += int(c)
	}
	if total == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return
	}
	// at(r) is the r-th smallest (0-based). The ranks asked for mostly
	// grow, so one walk serves every quantile; it steps back when a
	// quantile's lower rank is below the previous one's upper rank.
	k, cum := 0, int(counts[0]) // cum: copies up to and including vals[k]
	at := func(r int) float64 {
		for k > 0 && cum-int(counts[k]) > r {
			cum -= int(counts[k])
			k--
		}
		for cum <= r {
			k++
			cum += int(counts[k])
		}
		return vals[k]
	}
	for i, p := range ps {
		h := float64(total-1) * p
		lo := int(math.Floor(h))
		if lo >= total-1 {
			out[i] = at(total - 1)
			continue
		}
		a := at(lo)
		b := at(lo + 1)
		out[i] = a + (h-float64(lo))*(b-a)
	}
}

// percentileInterval is the central interval of level conf of xs (NaNs
// ignored), by the percentile method; ok is false when xs has no values.
func percentileInterval(xs []float64, conf float64) (report.Interval, bool) {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return report.Interval{}, false
	}
	slices.Sort(v)
	a := (1 - conf) / 2
	return report.Interval{Lo: quantileSorted(v, a), Hi: quantileSorted(v, 1-a)}, true
}

// bootstrapCell resamples the requests of every repeat of a cell
// independently, resamples times, and returns, for each resample, the
// median over repeats of each figure: the same statistic as the cell's
// reported value. The result is indexed [figure][resample].
func bootstrapCell(samples []*sample, resamples int, seed1, seed2 uint64) [numFigures][]float64 {
	return bootstrapCellContext(context.Background(), samples, resamples, seed1, seed2)
}

// bootstrapCellContext is bootstrapCell, which stops early when ctx ends
// (the caller then checks ctx): a merge's MaxResamples over a large pool
// take minutes.
func bootstrapCellContext(ctx context.Context, samples []*sample, resamples int, seed1, seed2 uint64) [numFigures][]float64 {
	var out [numFigures][]float64
	for f := range out {
		out[f] = make([]float64, resamples)
	}
	r := newResampler(seed1, seed2)
	per := make([]figures, len(samples))
	col := make([]float64, len(samples))
	for b := 0; b < resamples; b++ {
		if ctx.Err() != nil {
			break
		}
		for i, s := range samples {
			per[i] = r.figures(s, false)
		}
		for f := 0; f < numFigures; f++ {
			for i := range per {
				col[i] = per[i][f]
			}
			out[f][b] = median(col)
		}
	}
	return out
}

// widenSuccessRatio widens the success ratio's bootstrap interval in ci to
// cover the Wilson score interval of the repeats' pooled successes over
// their requests, at level conf. Where every request succeeded (or none
// did) every resample holds the same ratio, and the bootstrap's interval
// is the point [1, 1]: a precision that n requests cannot have (none of 20
// failing is consistent with a failure rate of 16% at 95%), on which the
// regression gate would call any later run ok. The Wilson interval is the
// binomial's own, right at 0 and 1.
func widenSuccessRatio(ci map[string]report.Interval, stats []report.Stats, conf float64) {
	var succeeded, n int
	for i := range stats {
		succeeded += stats[i].Successes
		n += stats[i].Requests
	}
	if n == 0 {
		return
	}
	w := wilsonInterval(succeeded, n, conf)
	name := FigureNames[figSuccessRatio]
	if b, ok := ci[name]; ok {
		w.Lo, w.Hi = min(w.Lo, b.Lo), max(w.Hi, b.Hi)
	}
	ci[name] = w
}

// wilsonInterval is the Wilson score interval of a proportion k/n at level
// conf (Wilson 1927): it stays within [0, 1] and has width at k = 0 and
// k = n.
func wilsonInterval(k, n int, conf float64) report.Interval {
	z := math.Sqrt2 * math.Erfinv(conf)
	p, nf := float64(k)/float64(n), float64(n)
	d := 1 + z*z/nf
	center := (p + z*z/(2*nf)) / d
	half := z / d * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return report.Interval{Lo: max(0, center-half), Hi: min(1, center+half)}
}
