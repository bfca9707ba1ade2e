package stability

import (
	"cmp"
	"math"
	"slices"
)

// zQuantile is the standard normal quantile at p (0 < p < 1).
func zQuantile(p float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// median of xs (NaN when empty); xs is reordered.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// lengthFit regresses y on the columns of x (plus an intercept) by least
// squares, dropping columns that do not vary, and returns the residuals.
// Columns nearly collinear with those kept are dropped too (a fixed shape:
// every request with the same lengths).
func lengthFit(y []float64, x [][]float64) []float64 {
	n := len(y)
	// Centre everything; an intercept is then implicit.
	cols := make([][]float64, 0, len(x))
	for _, c := range x {
		cc := center(c)
		if ss(cc) > 1e-9*float64(n) {
			cols = append(cols, cc)
		}
	}
	r := center(y)
	// Gram-Schmidt: orthogonalise the columns, then project r out of each.
	var basis [][]float64
	for _, c := range cols {
		v := slices.Clone(c)
		for _, b := range basis {
			project(v, b)
		}
		if ss(v) > 1e-6*ss(c) {
			basis = append(basis, v)
		}
	}
	for _, b := range basis {
		project(r, b)
	}
	return r
}

func center(xs []float64) []float64 {
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x - m
	}
	return out
}

func ss(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x * x
	}
	return s
}

// project removes from v its component along b.
func project(v, b []float64) {
	var vb, bb float64
	for i := range v {
		vb += v[i] * b[i]
		bb += b[i] * b[i]
	}
	if bb == 0 {
		return
	}
	k := vb / bb
	for i := range v {
		v[i] -= k * b[i]
	}
}

// trend is the Theil-Sen slope of y against t with Sen's distribution-free
// confidence interval at level 1-alpha (two-sided), and Kendall's S in
// standard units (continuity-corrected; the Mann-Kendall test statistic).
type trend struct {
	Slope, Lo, Hi float64
	Z             float64
	// Inflation is the factor by which serial correlation inflated the
	// variance of Kendall's S (1: none found; see serialInflation).
	Inflation float64
	// The sorted pairwise slopes, Kendall's S and the points, from which
	// inflated recomputes Z and the interval.
	slopes []float64
	s      float64
	n      int
}

// theilSen computes the trend of y over t; len(t) == len(y) >= 3, t
// sorted; lag is the longest lag of serial correlation allowed for, which
// the detrended residuals' serial correlation sets (see serialInflation).
func theilSen(t, y []float64, alpha float64, lag int) trend {
	n := len(t)
	slopes := make([]float64, 0, n*(n-1)/2)
	var s float64
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			dt := t[j] - t[i]
			dy := y[j] - y[i]
			if dt == 0 {
				continue
			}
			k := dy / dt
			slopes = append(slopes, k)
			switch {
			case k > 0:
				s++
			case k < 0:
				s--
			}
		}
	}
	m := len(slopes)
	if m == 0 {
		return trend{Slope: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Inflation: 1}
	}
	slices.Sort(slopes)
	var med float64
	if m%2 == 1 {
		med = slopes[m/2]
	} else {
		med = (slopes[m/2-1] + slopes[m/2]) / 2
	}
	tr := trend{Slope: med, slopes: slopes, s: s, n: n}
	return tr.inflated(serialInflation(t, y, med, lag, max(lag/2, 2)), alpha)
}

// inflated is the trend with its variance inflated by infl (≥ 1) for
// serial correlation: its z and Sen's interval at 1-alpha.
func (tr trend) inflated(infl float64, alpha float64) trend {
	nn := float64(tr.n)
	m := len(tr.slopes)
	sd := math.Sqrt(nn * (nn - 1) * (2*nn + 5) / 18 * infl)
	tr.Inflation, tr.Z = infl, 0
	switch {
	case tr.s > 0:
		tr.Z = (tr.s - 1) / sd
	case tr.s < 0:
		tr.Z = (tr.s + 1) / sd
	}
	c := zQuantile(1-alpha/2) * sd
	// Sen: the interval runs from the M1-th to the (M2+1)-th smallest slope,
	// M1 = (m-C)/2, M2 = (m+C)/2; rounded outwards, 0-based.
	lo := int(math.Floor((float64(m)-c)/2)) - 1
	hi := int(math.Ceil((float64(m) + c) / 2))
	tr.Lo, tr.Hi = tr.slopes[min(max(lo, 0), m-1)], tr.slopes[min(max(hi, 0), m-1)]
	return tr
}

// stepInflation is the serial-correlation factor of y (in time order) less
// the step cp: a step detrended by a line leaves a sawtooth that looks like
// serial correlation, and would inflate the variance of the very tests
// that should find the step.
func stepInflation(t, y []float64, cp changePoint, lag int) float64 {
	ys := slices.Clone(y)
	for i := cp.At; i < len(ys); i++ {
		ys[i] -= cp.Step
	}
	return serialInflation(t, ys, 0, lag, max(lag/2, 2))
}

// serialInflation corrects the Mann-Kendall variance for serial
// correlation, after Hamed and Rao (1998): detrend y by slope, rank the
// residuals (in the order of t, which the caller sorted), and weigh their
// autocorrelations ρ_k,
//
//	n/n* = 1 + 2/(n(n-1)(n-2)) · Σ_k (n-k)(n-k-1)(n-k-2) · ρ_k
//
// summing lags while they add up (Geyer's initial positive sequence: pairs
// ρ_2m-1 + ρ_2m while positive, at most maxLag lags) in place of Hamed
// and Rao's significance screening, which drops the many small positive
// ρ_k of a slowly wandering series and so misses most of its correlation.
// Latencies of requests that overlap in time share the server's state (the
// batch they ran in), so neighbours are positively correlated and the
// independent-sample variance understates the noise of a trend. The factor
// is never below 1.
func serialInflation(t, y []float64, slope float64, maxLag, block int) float64 {
	n := len(y)
	if n < 10 || maxLag < 1 {
		return 1
	}
	maxLag = min(maxLag, n/2)
	e := make([]float64, n)
	for i := range y {
		e[i] = y[i] - slope*t[i]
	}
	r := make([]float64, n)
	mean := float64(n-1) / 2
	for i, rank := range ranks(e) {
		r[i] = float64(rank) - mean
	}
	den := ss(r)
	nn := float64(n)
	rho := func(k int) float64 {
		var num float64
		for i := 0; i+k < n; i++ {
			num += r[i] * r[i+k]
		}
		return num / den
	}
	w := func(k int) float64 {
		nk := nn - float64(k)
		return nk * (nk - 1) * (nk - 2) / (nn * (nn - 1) * (nn - 2))
	}
	var sum float64
	for k := 1; k+1 <= maxLag; k += 2 {
		a, b := rho(k), rho(k+1)
		if a+b <= 0 {
			break
		}
		sum += w(k)*a + w(k+1)*b
	}
	f := 1 + 2*sum
	// Batch means: blocks of block consecutive completions; the variance of
	// their means, times block, over the variance of one rank, estimates the
	// same factor without the ACF's bias towards 0 when the correlation is
	// weak and long.
	if block >= 2 && n/block >= 4 {
		nb := n / block
		var v float64
		for b := 0; b < nb; b++ {
			var m float64
			for i := b * block; i < (b+1)*block; i++ {
				m += r[i]
			}
			m /= float64(block)
			v += m * m
		}
		v /= float64(nb)
		f = max(f, v*float64(block)/(den/nn))
	}
	return max(f, 1)
}

// changePoint is the most likely single step in a series: the first index
// of its second part, the step's size (the median of the second part less
// the first's), and Pettitt's statistic K = max |U_k| over the split points
// with its two-sided p-value under serial correlation (see pettitt).
type changePoint struct {
	At   int
	Step float64
	K    float64
	P    float64
}

// pettitt finds the change point of y (in time order) by Pettitt's
// rank test: U_k = 2·Σ_{i<k} R_i − k(n+1) over the ranks R of y, K its
// largest magnitude, p ≈ 2·exp(−6K²/(n³+n²)) for independent values.
// Requests that overlap share the server's state, so the variance of U is
// multiplied by inflation (≥ 1), as the trend test's is. Split points
// within edge of either end are not considered (a step there is a trend's
// or the warm-up's business, and too few points to size it).
func pettitt(y []float64, inflation float64, edge int) changePoint {
	n := len(y)
	if n < 2*edge+2 || n < 10 {
		return changePoint{P: 1}
	}
	r := make([]float64, n)
	for i, rank := range ranks(y) {
		r[i] = float64(rank + 1)
	}
	nn := float64(n)
	var sum float64
	best, at := 0.0, 0
	for k := 1; k < n; k++ {
		sum += r[k-1]
		u := 2*sum - float64(k)*(nn+1)
		if k >= edge && k <= n-edge && math.Abs(u) > best {
			best, at = math.Abs(u), k
		}
	}
	if at == 0 {
		return changePoint{P: 1}
	}
	p := min(1, 2*math.Exp(-6*best*best/((nn*nn*nn+nn*nn)*max(inflation, 1))))
	step := median(slices.Clone(y[at:])) - median(slices.Clone(y[:at]))
	return changePoint{At: at, Step: step, K: best, P: p}
}

// ranks is each value's rank in xs, from 0, ties in the order of xs.
func ranks(xs []float64) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(xs[a], xs[b]); c != 0 {
			return c
		}
		return a - b
	})
	r := make([]int, len(xs))
	for rank, i := range idx {
		r[i] = rank
	}
	return r
}
