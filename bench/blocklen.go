package bench

import (
	"math"
	"slices"
)

// The bootstrap's blocks. A batching engine's latencies are correlated in
// time: requests that share a batch share its step time, and a burst of
// arrivals slows every request in flight. Resampled one by one, such
// requests look more independent than they are, and the intervals come
// out too narrow: the regression gate then calls an unchanged rerun
// regressed and the ranking separates equal servers. The bootstrap
// therefore resamples blocks of consecutive requests (in the order they
// were sent), circularly (Politis and Romano 1992), of a length chosen
// from the run's own autocorrelation (Politis and White 2004, with the
// correction of Patton, Politis and White 2009): 1 for independent
// requests, longer the longer the correlation lasts.

// blockLength is the circular block bootstrap's block length for a run
// whose requests, in send order, have the given series (one per latency;
// NaN where a request has none, skipped): the longest of the series'
// own. At least 1, at most n/3 (a resample of three blocks still mixes).
func blockLength(series ...[]float64) int {
	b := 1
	for _, s := range series {
		x := make([]float64, 0, len(s))
		for _, v := range s {
			if v > 0 && !math.IsInf(v, 0) {
				// Latencies are compared as ratios (the gate's
				// log scale): their logs' correlation.
				x = append(x, math.Log(v))
			}
		}
		b = max(b, politisWhite(x).block)
	}
	return b
}

// quantileTaus is quantileTau of every latency's figureQuantiles. A tail
// quantile's own is told by few requests (a p99 of 600 by the 6 above
// it) and comes out low when they come in one burst: measured on
// latencies whose logs are AR(1) at 0.9, p99's own tau averaged 3.2 where
// its spread across runs needs about 7; the median's was 11.5. A bursty
// tail is no less bursty than the middle (for a Gaussian AR(1), the
// correlation of exceedances falls as the quantile rises), so the upper
// quantiles take at least the median's.
func quantileTaus(cols [numLatencies][]float64) [numLatencies][len(figureQuantiles)]float64 {
	var taus [numLatencies][len(figureQuantiles)]float64
	for l := range cols {
		x := make([]float64, 0, len(cols[l]))
		for _, y := range cols[l] {
			if !math.IsNaN(y) {
				x = append(x, y)
			}
		}
		sorted := slices.Sorted(slices.Values(x))
		for q, p := range figureQuantiles {
			taus[l][q] = quantileTau(x, quantileSorted(sorted, p))
			if q > 0 {
				taus[l][q] = max(taus[l][q], taus[l][0])
			}
		}
	}
	return taus
}

// quantileTau is the integrated autocorrelation time of the quantile q of
// x (in send order): that of the indicator of a request's value at or
// below q, whose mean the quantile's rank is. n requests tell the quantile
// as precisely as n/tau independent ones: tau is 1 when the requests are
// independent, larger when the slow ones come in bursts. At least 1; 1
// for no values.
func quantileTau(x []float64, q float64) float64 {
	if len(x) == 0 {
		return 1
	}
	ind := make([]float64, len(x))
	for i, y := range x {
		if y <= q {
			ind[i] = 1
		}
	}
	return politisWhite(ind).tau
}

// longRun is what x's autocorrelation says of its mean's precision.
type longRun struct {
	// block is the optimal block length of the circular block bootstrap
	// for the mean of x (Politis and White 2004, section 3.2, with Patton,
	// Politis and White 2009's D = 4/3 g(0)²), rounded up; 1 when x is too
	// short to tell or shows no correlation.
	block int
	// tau is the integrated autocorrelation time, the long-run variance
	// over the variance (the same flat-top estimate's g(0) over R(0)): the
	// mean of x varies as that of len(x)/tau independent values. At least
	// 1.
	tau float64
}

func politisWhite(x []float64) longRun {
	n := len(x)
	if n < 16 {
		return longRun{1, 1}
	}
	var mean float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(n)
	kn := max(5, int(math.Ceil(math.Sqrt(math.Log10(float64(n))))))
	mMax := int(math.Ceil(math.Sqrt(float64(n)))) + kn
	maxLag := min(2*mMax, n-1)
	// The autocovariances, computed as far as the lags asked for: the
	// search below stops at the first quiet run of lags, a few for
	// independent requests, so that 100,000 of them cost milliseconds,
	// not the seconds of every lag up to maxLag.
	acov := make([]float64, 0, maxLag+1)
	at := func(k int) float64 {
		for len(acov) <= k {
			j := len(acov)
			var s float64
			for i := j; i < n; i++ {
				s += (x[i] - mean) * (x[i-j] - mean)
			}
			acov = append(acov, s/float64(n))
		}
		return acov[k]
	}
	if !(at(0) > 0) {
		return longRun{1, 1}
	}
	// m: the first lag after which kn correlations in a row are
	// insignificant (|rho| < 2 sqrt(log10 n / n)).
	bound := 2 * math.Sqrt(math.Log10(float64(n))/float64(n))
	m := mMax
	for cand := 0; cand+kn <= maxLag && cand < mMax; cand++ {
		quiet := true
		for k := 1; k <= kn; k++ {
			if math.Abs(at(cand+k)/acov[0]) >= bound {
				quiet = false
				break
			}
		}
		if quiet {
			m = cand
			break
		}
	}
	bigM := min(2*m, maxLag)
	if bigM == 0 {
		return longRun{1, 1}
	}
	// The flat-top lag window's sums: g0 the long-run variance, g the
	// first moment of the autocovariances.
	g0, g := acov[0], 0.0
	for k := 1; k <= bigM; k++ {
		w := flatTop(float64(k) / float64(bigM))
		g0 += 2 * w * at(k)
		g += 2 * w * float64(k) * at(k)
	}
	if !(g0 > 0) {
		return longRun{1, 1}
	}
	r := longRun{block: 1, tau: max(1, g0/acov[0])}
	d := 4.0 / 3 * g0 * g0
	if b := math.Pow(2*g*g/d, 1.0/3) * math.Pow(float64(n), 1.0/3); b >= 1 {
		r.block = min(int(math.Ceil(b)), max(1, n/3))
	}
	return r
}

// flatTop is Politis and Romano's trapezoidal lag window.
func flatTop(t float64) float64 {
	switch t = math.Abs(t); {
	case t <= 0.5:
		return 1
	case t <= 1:
		return 2 * (1 - t)
	}
	return 0
}
