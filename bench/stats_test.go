package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

func TestQuantileSorted(t *testing.T) {
	// Expected values are numpy.percentile's (linear interpolation).
	for _, tc := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{[]float64{1, 2, 3, 4}, 0.5, 2.5},
		{[]float64{1, 2, 3, 4}, 0.99, 3.97},
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 1, 4},
		{[]float64{1, 2, 3, 4}, 0.9, 3.7},
		{[]float64{7}, 0.99, 7},
		{[]float64{0, 10}, 0.25, 2.5},
	} {
		if got := quantileSorted(tc.xs, tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
	if !math.IsNaN(quantileSorted(nil, 0.5)) {
		t.Error("quantile of nothing is not NaN")
	}
	d := summarize([]float64{4, 1, 3, 2})
	if d.Count != 4 || d.Mean != 2.5 || d.Min != 1 || d.Max != 4 || d.P50 != 2.5 || math.Abs(d.P99-3.97) > 1e-12 {
		t.Errorf("summarize: %+v", d)
	}
}

// TestCountQuantiles: the counted quantiles of a resample equal the
// quantiles of the resample written out and sorted.
func TestCountQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(40)
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(rng.IntN(10)) // with ties
		}
		slices.Sort(vals)
		counts := make([]int32, n)
		var expanded []float64
		for i := range counts {
			counts[i] = int32(rng.IntN(3))
			for range counts[i] {
				expanded = append(expanded, vals[i])
			}
		}
		ps := []float64{0.5, 0.9, 0.99}
		got := make([]float64, 3)
		countQuantiles(vals, counts, ps, got)
		for i, p := range ps {
			want := quantileSorted(expanded, p)
			if !(got[i] == want || (math.IsNaN(got[i]) && math.IsNaN(want))) && math.Abs(got[i]-want) > 1e-9 {
				t.Fatalf("trial %d p%v: counted %v, sorted %v (vals %v counts %v)", trial, p, got[i], want, vals, counts)
			}
		}
	}
}

// sampleOf builds a repeat's bootstrap sample from E2E values: every
// request measured, delivering tokens[i] tokens over window seconds.
func sampleOf(e2e []float64, tokens float64, window float64) *sample {
	n := len(e2e)
	nan := make([]float64, n)
	for i := range nan {
		nan[i] = math.NaN()
	}
	s := &sample{window: window, scale: 1, tokens: make([]float64, n), measured: make([]bool, n), goodput: make([]bool, n), success: make([]bool, n)}
	s.lat[latTTFT], s.lat[latTPOT], s.lat[latE2E] = newSortedIndex(nan), newSortedIndex(nan), newSortedIndex(e2e)
	for i := range s.tokens {
		s.tokens[i], s.measured[i], s.goodput[i], s.success[i] = tokens, true, e2e[i] < 1, true
	}
	return s
}

// TestPointEqualsDirect: the bootstrap's point path (every request once)
// gives the same figures as the direct summary.
func TestPointEqualsDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := make([]float64, 101)
	for i := range xs {
		xs[i] = rng.ExpFloat64()
	}
	s := sampleOf(xs, 10, 5)
	f := newResampler(1, 1).figures(s, true)
	d := summarize(append([]float64(nil), xs...))
	if f[figE2EP50] != d.P50 || f[figE2EP90] != d.P90 || f[figE2EP99] != d.P99 {
		t.Errorf("point %v %v %v, direct %v %v %v", f[figE2EP50], f[figE2EP90], f[figE2EP99], d.P50, d.P90, d.P99)
	}
	if f[figThroughput] != 101*10/5.0 {
		t.Errorf("throughput %v", f[figThroughput])
	}
	if !math.IsNaN(f[figTTFTP50]) {
		t.Errorf("a latency without values is %v, want NaN", f[figTTFTP50])
	}
}

// TestBootstrapCoverage is the bootstrap's known answer: the 95% interval
// of the median of 200 draws from Exp(1) covers the true median, ln 2, in
// about 95% of trials. Fixed seeds; accepted range 88..99% over 150 trials
// (the percentile bootstrap of a median is known to under-cover slightly
// at small n; the binomial spread at 150 trials is ±3.6 points).
func TestBootstrapCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const trials, n = 150, 200
	covered := 0
	for trial := 0; trial < trials; trial++ {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = rng.ExpFloat64()
		}
		bs := bootstrapCell([]*sample{sampleOf(xs, 1, 1)}, 500, uint64(trial), 7)
		ci, ok := percentileInterval(bs[figE2EP50], 0.95)
		if ok && ci.Lo <= math.Ln2 && math.Ln2 <= ci.Hi {
			covered++
		}
	}
	if rate := float64(covered) / trials; rate < 0.88 || rate > 0.99 {
		t.Errorf("coverage %.3f, want about 0.95", rate)
	}
}

// rankFromSamples ranks targets whose single cell has the given E2E values,
// bootstrapped as Run does.
func rankFromSamples(names []string, data [][]float64) report.RankingResult {
	in := &rankInput{targets: names, weights: report.Weights{Latency: 1, Throughput: 0}, figure: "e2e_p50",
		confidence: 0.95, resamples: 1000, seed: 1}
	g := rankGroup{}
	for i, xs := range data {
		s := sampleOf(xs, 1, 1)
		point := newResampler(0, 0).figures(s, true)
		// Three repeats of the same requests, as a cell of 3 repeats.
		bs := bootstrapCell([]*sample{s, s, s}, in.resamples, 1, hashString(names[i]))
		g.lat = append(g.lat, point[figE2EP50])
		g.thr = append(g.thr, point[figThroughput])
		g.latRep = append(g.latRep, bs[figE2EP50])
		g.thrRep = append(g.thrRep, bs[figThroughput])
	}
	in.groups = []rankGroup{g}
	return rank(in)
}

func normal(seed uint64, n int, mean, sd float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 9))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = mean + sd*rng.NormFloat64()
	}
	return xs
}

// TestIdenticalTargetsTie is the ranking's known answer: two targets with
// the same requests tie (each rank interval spans 1..2), and a target 10%
// slower than both ranks last on its own.
func TestIdenticalTargetsTie(t *testing.T) {
	same := normal(1, 300, 1.0, 0.05)
	r := rankFromSamples([]string{"a", "b", "slow"}, [][]float64{same, same, normal(2, 300, 1.1, 0.05)})
	e := r.Entries
	if len(e) != 3 {
		t.Fatalf("entries %+v", e)
	}
	if e[0].Rank != 1 || e[1].Rank != 1 || !e[0].Tied || !e[1].Tied {
		t.Errorf("identical targets not tied: %+v / %+v", e[0], e[1])
	}
	for _, x := range e[:2] {
		if x.RankLo != 1 || x.RankHi != 2 {
			t.Errorf("%s: rank interval %d..%d, want 1..2", x.Target, x.RankLo, x.RankHi)
		}
	}
	if e[2].Target != "slow" || e[2].Tied || e[2].Rank != 3 || e[2].RankLo != 3 {
		t.Errorf("slow target: %+v", e[2])
	}
	// Independent draws from one distribution tie too.
	r = rankFromSamples([]string{"x", "y"}, [][]float64{normal(3, 300, 1, 0.05), normal(4, 300, 1, 0.05)})
	if !r.Entries[0].Tied || !r.Entries[1].Tied {
		t.Errorf("two draws of one distribution are not tied: %+v", r.Entries)
	}
}

func TestMedianStats(t *testing.T) {
	a := report.Stats{Requests: 10, Outcomes: map[string]int{"success": 10}, E2E: report.Dist{Count: 10, P50: 1, P99: 3}, OutputTokensPerSecond: 5}
	b := report.Stats{Requests: 12, Outcomes: map[string]int{"success": 11, "timeout": 1}, E2E: report.Dist{Count: 11, P50: 2, P99: 2}, OutputTokensPerSecond: 7}
	c := report.Stats{Requests: 11, Outcomes: map[string]int{"success": 11}, E2E: report.Dist{Count: 11, P50: 1.5, P99: 9}, OutputTokensPerSecond: 6}
	m := medianStats([]report.Stats{a, b, c})
	if m.Requests != 11 || m.E2E.P50 != 1.5 || m.E2E.P99 != 3 || m.OutputTokensPerSecond != 6 || m.Outcomes["timeout"] != 0 || m.Outcomes["success"] != 11 {
		t.Errorf("median %+v", m)
	}
}

// TestRecorderWindows: output and request throughput count exactly what
// was delivered inside the measured windows, warm-up requests' included,
// and latencies only of requests scheduled after the warm-up.
func TestRecorderWindows(t *testing.T) {
	w0 := time.Unix(1000, 0)
	rc := newRecorderAt(w0, time.Second, config.SLO{E2E: 500 * time.Millisecond}, 100, 100, 1)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	req := func(sched float64, tokens ...float64) *observation.Request {
		o := &observation.Request{Scheduled: at(sched), Sent: at(sched), Outcome: observation.Success}
		for _, x := range tokens {
			o.TokenTimes = append(o.TokenTimes, at(x))
		}
		o.FirstToken, o.End = o.TokenTimes[0], o.TokenTimes[len(o.TokenTimes)-1]
		o.ContentEvents = len(tokens)
		o.OutputTokens = 2 * len(tokens) // two tokens per event
		return o
	}
	rc.observe(req(-0.5, -0.4, -0.1, 0.2, 0.3)) // warm-up: 2 events in window 0
	rc.observe(req(0.1, 0.2, 0.4))              // measured, E2E 0.3 s: meets the SLO
	rc.observe(req(1.5, 1.6, 2.4))              // measured, 1 event in window 1, 1 after
	rc.observe(&observation.Request{Scheduled: at(0.5), Outcome: observation.Dropped})
	st, s := rc.finish(2, 0)
	// Events in [0, 2 s): 2 + 2 + 1 = 5, two tokens each, over 2 s.
	if st.OutputTokensPerSecond != 5 {
		t.Errorf("output %v tokens/s, want 5", st.OutputTokensPerSecond)
	}
	if st.Requests != 3 || st.Successes != 2 || st.Outcomes["dropped"] != 1 || st.Goodput != 1 {
		t.Errorf("counts %+v", st)
	}
	// Completed within the windows, by the tokens' rule (warm-up requests
	// included): the requests ending at 0.3 s and 0.4 s; the one ending at
	// 2.4 s is after the windows.
	if st.RequestsPerSecond != 1 {
		t.Errorf("requests/s %v, want 1", st.RequestsPerSecond)
	}
	if st.E2E.Count != 2 || math.Abs(st.E2E.Min-0.3) > 1e-9 || math.Abs(st.E2E.Max-0.9) > 1e-9 {
		t.Errorf("E2E %+v", st.E2E)
	}
	if st.ITL.Count != 2 {
		t.Errorf("ITL of measured requests: %+v", st.ITL)
	}
	point := newResampler(0, 0).figures(s, true)
	if point[figThroughput] != st.OutputTokensPerSecond || point[figGoodputRatio] != st.GoodputRatio {
		t.Errorf("sample point %v %v, stats %v %v", point[figThroughput], point[figGoodputRatio], st.OutputTokensPerSecond, st.GoodputRatio)
	}
	med, cnt := rc.windowMedians(2)
	if cnt[0] != 1 || cnt[1] != 0 || math.Abs(med[0]-0.3) > 1e-9 || !math.IsNaN(med[1]) {
		t.Errorf("windows %v %v", med, cnt)
	}
}

// TestRecorderReservoir: beyond the cap the records are a sample, the
// counts stay exact and the sums are scaled.
func TestRecorderReservoir(t *testing.T) {
	w0 := time.Unix(1000, 0)
	rc := newRecorderAt(w0, time.Second, config.SLO{}, 100, 50, 1)
	for i := 0; i < 1000; i++ {
		s := w0.Add(time.Duration(i) * time.Millisecond)
		rc.observe(&observation.Request{Scheduled: s, Sent: s, FirstToken: s, End: s.Add(time.Millisecond),
			TokenTimes: []time.Time{s, s.Add(time.Millisecond)}, Outcome: observation.Success, OutputTokens: 2, ContentEvents: 2})
	}
	st, smp := rc.finish(1, 0)
	if st.Requests != 1000 || !st.Sampled || smp.n() != 100 || st.E2E.Count != 100 || st.ITL.Count != 50 {
		t.Errorf("stats %+v, sample %d", st, smp.n())
	}
	// The last request's second token lands at 1 s, after the window.
	if st.OutputTokensPerSecond != 1999 {
		t.Errorf("exact throughput %v, want 1999", st.OutputTokensPerSecond)
	}
	if p := newResampler(0, 0).figures(smp, true)[figThroughput]; math.Abs(p-1999)/1999 > 0.05 {
		t.Errorf("scaled sample throughput %v, want 1999 ± 5%%", p)
	}
}

// TestWilsonInterval: the Wilson score interval's known values at 95%
// (0/20: 0 .. 0.1611, as Newcombe 1998 tabulates it; 10/20: 0.5 ±
// 1.96/1.19208·√(0.0125 + 0.0024) = 0.2993 .. 0.7007; 20/20: 20/(20 +
// 1.96²) = 0.8389 .. 1, by hand), and the success ratio's interval widened
// to it where the bootstrap's is a point.
func TestWilsonInterval(t *testing.T) {
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{{0, 20, 0, 0.1611}, {10, 20, 0.2993, 0.7007}, {20, 20, 0.8389, 1}} {
		w := wilsonInterval(tc.k, tc.n, 0.95)
		if math.Abs(w.Lo-tc.lo) > 5e-5 || math.Abs(w.Hi-tc.hi) > 5e-5 {
			t.Errorf("%d/%d: [%.4f, %.4f], want [%.4f, %.4f]", tc.k, tc.n, w.Lo, w.Hi, tc.lo, tc.hi)
		}
	}
	// Every request succeeded in both repeats: the bootstrap's [1, 1]
	// becomes 40/40's Wilson interval; a wider bootstrap interval stays.
	stats := []report.Stats{{Requests: 20, Successes: 20}, {Requests: 20, Successes: 20}}
	ci := map[string]report.Interval{"success_ratio": {Lo: 1, Hi: 1}}
	widenSuccessRatio(ci, stats, 0.95)
	if w := wilsonInterval(40, 40, 0.95); ci["success_ratio"].Lo != w.Lo || ci["success_ratio"].Hi != 1 || w.Lo > 0.92 {
		t.Errorf("widened to %v, want 40/40's Wilson interval %v", ci["success_ratio"], w)
	}
	ci = map[string]report.Interval{"success_ratio": {Lo: 0.5, Hi: 1}}
	widenSuccessRatio(ci, stats, 0.95)
	if ci["success_ratio"].Lo != 0.5 {
		t.Errorf("a wider bootstrap interval narrowed: %v", ci["success_ratio"])
	}
}

// ar1 is n draws of exp(X) where X is a stationary AR(1) process of
// coefficient rho and unit variance: latencies correlated in time whose
// median is exactly 1.
func ar1(rng *rand.Rand, n int, rho float64) []float64 {
	xs := make([]float64, n)
	x := rng.NormFloat64()
	sd := math.Sqrt(1 - rho*rho)
	for i := range xs {
		xs[i] = math.Exp(x)
		x = rho*x + sd*rng.NormFloat64()
	}
	return xs
}

// TestCorrelatedCoverage is the bootstrap's known answer on latencies
// correlated in time: 500 requests whose log latencies follow an AR(1)
// process, 150 seeded trials per correlation. The 95% intervals of the
// median (1: the rank drawn as n/tau requests would, quantileTaus) and of
// the share of requests under 1 s (0.5, the goodput ratio here: a mean,
// resampled in blocks, blockLength) cover the truth about as often as they
// should, where resampling the requests one by one covers it far less
// often (measured here too, so that the test fails should the run's
// correlation stop being used). Measured, median / share:
//
//	rho   with tau and blocks   one by one    tau   block
//	0     0.95 / 0.95           0.95 / 0.95   1.0   1.1
//	0.5   0.93 / 0.94           0.80 / 0.81   2.0   9.5
//	0.9   0.89 / 0.86           0.39 / 0.37   11.5  34
//	0.95  0.91 / 0.86           0.33 / 0.33   21    46
//
// At rho 0.9 and above 500 requests are worth 25 to 40 independent ones,
// and a bootstrap of so few under-covers (blocks twice or three times as
// long covered no better: 0.87 / 0.85 at rho 0.9, 0.83 / 0.83 at 0.95),
// hence the lower floors there.
func TestCorrelatedCoverage(t *testing.T) {
	for _, tc := range []struct {
		rho          float64
		wantAtLeast  float64 // coverage with the run's correlation
		wantIIDBelow float64 // coverage one by one is below this
	}{
		{0, 0.90, 1.01},
		{0.5, 0.88, 0.86},
		{0.9, 0.80, 0.50},
		{0.95, 0.78, 0.50},
	} {
		rng := rand.New(rand.NewPCG(11, uint64(tc.rho*100)))
		const trials, n = 150, 500
		var covered, coveredIID [2]int
		var blocks, taus float64
		for trial := 0; trial < trials; trial++ {
			xs := ar1(rng, n, tc.rho)
			s := sampleOf(xs, 1, 1)
			block := blockLength(xs)
			tau := quantileTaus([numLatencies][]float64{nil, nil, xs})
			blocks += float64(block) / trials
			taus += tau[latE2E][0] / trials
			for _, c := range []struct {
				block int
				tau   float64
				n     *[2]int
			}{{block, tau[latE2E][0], &covered}, {1, 1, &coveredIID}} {
				s.block, s.tau[latE2E][0] = c.block, c.tau
				bs := bootstrapCell([]*sample{s}, 400, uint64(trial), 7)
				for k, f := range []struct {
					fig   int
					truth float64
				}{{figE2EP50, 1}, {figGoodputRatio, 0.5}} {
					if ci, ok := percentileInterval(bs[f.fig], 0.95); ok && ci.Lo <= f.truth && f.truth <= ci.Hi {
						c.n[k]++
					}
				}
			}
		}
		t.Logf("rho %.2f: coverage %.3f / %.3f (median / share under 1 s; tau %.1f, blocks of %.1f on average), one by one %.3f / %.3f",
			tc.rho, float64(covered[0])/trials, float64(covered[1])/trials, taus, blocks, float64(coveredIID[0])/trials, float64(coveredIID[1])/trials)
		for k, what := range []string{"median", "share under 1 s"} {
			rate, iid := float64(covered[k])/trials, float64(coveredIID[k])/trials
			if rate < tc.wantAtLeast || rate > 0.995 {
				t.Errorf("rho %g: the %s's coverage %.3f, want at least %.2f", tc.rho, what, rate, tc.wantAtLeast)
			}
			if iid >= tc.wantIIDBelow {
				t.Errorf("rho %g: the %s's coverage one by one %.3f: the case does not show the correlation (want below %.2f)", tc.rho, what, iid, tc.wantIIDBelow)
			}
		}
		if tc.rho == 0 && (blocks > 1.5 || taus > 1.5) {
			t.Errorf("independent requests: blocks of %.1f and tau %.1f on average, want about 1", blocks, taus)
		}
	}
}
