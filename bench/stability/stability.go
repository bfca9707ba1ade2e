package stability

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Request is one successful request of the measured span.
type Request struct {
	// Done is when it ended, as an offset into the measured span [0, span].
	Done time.Duration
	// E2E is its end-to-end latency in seconds (> 0).
	E2E float64
	// InputTokens and OutputTokens are its lengths (0 where unknown: that
	// length then explains nothing and is left out of the fit).
	InputTokens, OutputTokens int
	// Offered is the load offered around it: the arrival rate (requests
	// scheduled per second) over its life and the median E2E before it
	// (0 where unknown: then left out of the fit). Arrivals are the
	// client's schedule, not the server's doing, so a slower server does
	// not raise it: it explains the latency that bunched arrivals (a
	// Poisson process) put on a batching engine, not a drift.
	Offered float64
}

// Spec sets the rule. The zero Spec is the default rule (see Defaults).
type Spec struct {
	// MinRequests is the fewest successful requests a span needs before it
	// is judged at all (default 20).
	MinRequests int
	// MaxGrowth is the effect floor: a drift of the length-normalised
	// latency smaller than this across the span is never "unstable", however
	// significant (default 0.10).
	MaxGrowth float64
	// DetectGrowth is the drift the rule must catch before it may say
	// "stable": a span is judged only when a drift this large would be
	// called unstable with probability Power (default 0.25). It should
	// exceed MaxGrowth well: the floor caps the power near MaxGrowth.
	DetectGrowth float64
	// Alpha is the two-sided false-alarm level of the trend test (default
	// 0.005).
	Alpha float64
	// Power is the probability of catching DetectGrowth (default 0.95).
	Power float64
	// SuggestAlpha is the looser level at which a span too short to be
	// judged is extended, because its drift may be real (default 0.05).
	SuggestAlpha float64
	// Look is how many times this span was judged before, shorter (a
	// cell that runs on while it is not judged looks again): each look
	// tests at Alpha/(Look+1), so that the looks together keep the
	// false-alarm rate near Alpha.
	Look int
	// MaxPoints caps the requests the trend test pairs (default 3000;
	// beyond it an even subsample in time order is tested).
	MaxPoints int
}

// Defaults fills the zero fields of s.
func (s Spec) Defaults() Spec {
	if s.MinRequests <= 0 {
		s.MinRequests = 20
	}
	if s.MaxGrowth <= 0 {
		s.MaxGrowth = 0.10
	}
	if s.DetectGrowth <= 0 {
		s.DetectGrowth = 0.25
	}
	if s.Alpha <= 0 || s.Alpha >= 1 {
		s.Alpha = 0.005
	}
	if s.Power <= 0 || s.Power >= 1 {
		s.Power = 0.95
	}
	if s.SuggestAlpha <= 0 || s.SuggestAlpha >= 1 {
		s.SuggestAlpha = 0.05
	}
	if s.MaxPoints < 3 {
		s.MaxPoints = 3000
	}
	return s
}

// State is a verdict's outcome.
type State string

const (
	Stable    State = "stable"
	Unstable  State = "unstable"
	NotJudged State = "not_judged"
)

// Load is what the caller knows of the span's queue; the zero Load is
// "unknown" and never flags anything.
type Load struct {
	// Sent is the requests sent within the span, Ended those of them or
	// others that ended within it (successes and failures).
	Sent, Ended int
	// InFlightStart and InFlightEnd are the requests in flight at the start
	// and the end of the span.
	InFlightStart, InFlightEnd int
	// Dropped is the arrivals of the span the client could not send because
	// its in-flight cap was full (not those a rate ceiling dropped by
	// design).
	Dropped int
}

// Verdict is the rule's answer for one span.
type Verdict struct {
	State State
	// Growth is the drift of the length-normalised latency across the span
	// (0.25: the end runs 25% slower than the start), with its 1-Alpha
	// interval [GrowthLo, GrowthHi]; NaN when not computed.
	Growth, GrowthLo, GrowthHi float64
	// Z is the Mann-Kendall statistic of the drift in standard units,
	// corrected for serial correlation.
	Z float64
	// Inflation is the factor serial correlation put on the test's
	// variance (1: none found): the requests count as N/Inflation
	// independent ones.
	Inflation float64
	// Sigma is the scatter of the length-normalised log latency (robust SD):
	// what sizes a span (see Need).
	Sigma float64
	// N is the successful requests judged.
	N int
	// Overloaded is the queue's own evidence (see Overload).
	Overloaded bool
	// Reason says why, in words.
	Reason string
	// NeedSeconds, when not judged, is the span this rate would need.
	NeedSeconds float64
	// Step is the largest step of the length-normalised latency within the
	// span (0.3: 30% slower after StepAt than before), StepP its
	// p-value (Pettitt's test, corrected for serial correlation).
	Step   float64
	StepAt time.Duration
	StepP  float64
	// Suggestive: not judged, but the drift is beyond the floor and
	// significant at SuggestAlpha, so more data may make it unstable.
	Suggestive bool
}

// Judge says whether the span was in steady state from its successful
// requests, the span's length and the queue's counts.
//
// The rule: regress log E2E on the requests' lengths (log input, log output
// and its square) to remove what the lengths explain; test the residuals for
// a monotone trend over completion time with the Mann-Kendall test and
// estimate it by the Theil-Sen slope with Sen's interval. Unstable when the
// interval excludes no drift and the drift is at least MaxGrowth; stable when
// not unstable and the interval is narrow enough that a drift of
// DetectGrowth would have been called unstable with probability Power;
// otherwise not judged, with the span it would need. An overloaded queue is
// unstable whatever the latencies say.
func Judge(reqs []Request, span time.Duration, load Load, spec Spec) Verdict {
	spec = spec.Defaults()
	spec.Alpha /= float64(spec.Look + 1)
	v := Verdict{Growth: math.NaN(), GrowthLo: math.NaN(), GrowthHi: math.NaN(), Sigma: math.NaN(), Inflation: math.NaN()}
	var over string
	v.Overloaded, over = Overload(load)

	rs := make([]Request, 0, len(reqs))
	for _, r := range reqs {
		if r.E2E > 0 && !math.IsInf(r.E2E, 0) && r.Done >= 0 {
			rs = append(rs, r)
		}
	}
	v.N = len(rs)
	sec := span.Seconds()
	if v.N < spec.MinRequests || !(sec > 0) {
		tooFew(&v, over, sec, spec)
		return v
	}

	slices.SortStableFunc(rs, func(a, b Request) int { return cmp.Compare(a.Done, b.Done) })
	t, res := residuals(rs, sec)
	dev := make([]float64, len(res))
	m := median(slices.Clone(res))
	for i, e := range res {
		dev[i] = math.Abs(e - m)
	}
	v.Sigma = 1.4826 * median(dev)

	tt, rr := t, res
	if n := len(rs); n > spec.MaxPoints {
		tt, rr = make([]float64, spec.MaxPoints), make([]float64, spec.MaxPoints)
		for i := range tt {
			j := i * n / spec.MaxPoints
			tt[i], rr[i] = t[j], res[j]
		}
	}
	// The trend, its variance inflated for the serial correlation of the
	// detrended residuals; and the likeliest step, at the same inflation.
	// When that step is beyond the floor and suggestive even so, the
	// correlation is measured again with the step taken out (a step's
	// sawtooth is not correlation), and the smaller factor serves both
	// tests: a step the full factor would hide is found, and a wander
	// that no step explains keeps its factor (the gate at SuggestAlpha).
	edge := max(5, len(rr)/10)
	lag := serialLags(rs, sec, len(tt))
	tr := theilSen(tt, rr, spec.Alpha, lag)
	cp := pettitt(rr, tr.Inflation, edge)
	if !math.IsNaN(tr.Slope) && cp.At > 0 && math.Abs(cp.Step) >= math.Log1p(spec.MaxGrowth) && cp.P < spec.SuggestAlpha {
		if infl := stepInflation(tt, rr, cp, lag); infl < tr.Inflation {
			tr = tr.inflated(infl, spec.Alpha)
			cp = pettitt(rr, infl, edge)
		}
	}
	if cp.At > 0 {
		v.Step, v.StepAt, v.StepP = math.Expm1(cp.Step), time.Duration(tt[cp.At-1]*sec*float64(time.Second)), cp.P
	}
	if math.IsNaN(tr.Slope) {
		v.State, v.Reason = NotJudged, "not judged: every request ended at the same instant"
		if v.Overloaded {
			v.State, v.Reason = Unstable, over
		}
		return v
	}
	v.Growth, v.GrowthLo, v.GrowthHi = math.Expm1(tr.Slope), math.Expm1(tr.Lo), math.Expm1(tr.Hi)
	v.Z, v.Inflation = tr.Z, tr.Inflation
	decide(&v, tr, cp, len(rs), sec, spec, over)
	return v
}

// tooFew is the verdict on a span with fewer successful requests than
// the rule needs, or no length: unstable when the queue was overloaded,
// else not judged, with the span this rate would need.
func tooFew(v *Verdict, over string, sec float64, spec Spec) {
	if v.Overloaded {
		v.State, v.Reason = Unstable, over
		return
	}
	v.State = NotJudged
	switch {
	case !(sec > 0):
		v.Reason = "not judged: the span has no length"
	case v.N == 0:
		v.Reason = "not judged: no successful requests in the span"
	default:
		v.NeedSeconds = sec * float64(spec.MinRequests) / float64(v.N)
		v.Reason = fmt.Sprintf("not judged: %d successful requests in %.0f s, fewer than the %d needed; at this rate that takes %.0f s",
			v.N, sec, spec.MinRequests, v.NeedSeconds)
	}
}

// residuals are the requests' completion instants, as fractions of the
// span, and their log E2E less what their lengths explain (log input, log
// output and its square) and the load offered around them (log Offered,
// where every request has one): the length-normalised latency the trend
// is tested on. rs is in completion order.
func residuals(rs []Request, sec float64) (t, res []float64) {
	n := len(rs)
	y := make([]float64, n)
	t = make([]float64, n)
	lin := make([]float64, n)
	lout := make([]float64, n)
	lout2 := make([]float64, n)
	load := make([]float64, n)
	for i, r := range rs {
		y[i] = math.Log(r.E2E)
		t[i] = r.Done.Seconds() / sec
		lin[i] = math.Log(float64(max(r.InputTokens, 1)))
		lout[i] = math.Log(float64(max(r.OutputTokens, 1)))
		lout2[i] = lout[i] * lout[i]
		if r.Offered > 0 {
			load[i] = math.Log(r.Offered)
		} else {
			load = nil
		}
	}
	cols := [][]float64{lin, lout, lout2}
	if load != nil {
		cols = append(cols, load)
	}
	return t, lengthFit(y, cols)
}

// serialLags is how many lags of serial correlation the trend test allows
// for among points of the rs: requests that overlap in the server share
// its state, so it allows for the completions of two median E2E (the
// requests in flight with one, twice: L = rate × E2E by Little's law),
// at least points^(1/3) lags.
func serialLags(rs []Request, sec float64, points int) int {
	n := len(rs)
	e2e := make([]float64, n)
	for i, r := range rs {
		e2e[i] = r.E2E
	}
	lag := int(math.Ceil(2 * float64(n) / sec * median(e2e) * float64(points) / float64(n)))
	return max(lag, int(math.Ceil(math.Cbrt(float64(points)))))
}

// decide gives the verdict on n requests over sec seconds from their
// trend tr: unstable when overloaded, or when the drift is at least the
// floor and its interval excludes none; stable when the interval is
// narrow enough to have caught DetectGrowth; else not judged, with the
// span it would need and whether the drift is suggestive.
func decide(v *Verdict, tr trend, cp changePoint, n int, sec float64, spec Spec, over string) {
	floor := math.Log1p(spec.MaxGrowth)
	delta := math.Log1p(spec.DetectGrowth)
	za := zQuantile(1 - spec.Alpha/2)
	zb := zQuantile(spec.Power)
	se := (tr.Hi - tr.Lo) / (2 * za)
	big := math.Abs(tr.Slope) >= floor
	drift := fmt.Sprintf("%+.1f%% across the span (%+.1f%% to %+.1f%% at %.1f%%), %d requests, Mann-Kendall z %.2f",
		100*v.Growth, 100*v.GrowthLo, 100*v.GrowthHi, 100*(1-spec.Alpha), n, tr.Z)
	if tr.Inflation > 1.05 {
		drift += fmt.Sprintf(" (its variance ×%.1f for serial correlation)", tr.Inflation)
	}

	switch {
	case v.Overloaded:
		v.State, v.Reason = Unstable, over+"; length-normalised latency "+drift
	case big && (tr.Lo > 0 || tr.Hi < 0):
		v.State = Unstable
		if tr.Slope > 0 {
			v.Reason = "unstable: length-normalised latency grew " + drift
		} else {
			v.Reason = "unstable: length-normalised latency fell " + drift + " (a backlog draining, or a warm-up too short)"
		}
	case cp.At > 0 && cp.P < spec.Alpha && math.Abs(cp.Step) >= floor:
		v.State = Unstable
		v.Reason = fmt.Sprintf("unstable: length-normalised latency stepped %+.1f%% at %.1f s into the span (change point p = %.2g), %d requests",
			100*math.Expm1(cp.Step), v.StepAt.Seconds(), cp.P, n)
	case se*(za+zb) <= delta && math.Max(math.Abs(tr.Lo), math.Abs(tr.Hi)) < delta:
		v.State = Stable
		v.Reason = fmt.Sprintf("stable: drift %s; a drift of %.0f%% would have been caught",
			drift, 100*spec.DetectGrowth)
	default:
		v.State = NotJudged
		// The span needed: Need's planning formula at the scatter measured,
		// its variance inflated by the serial correlation found (steadier
		// than the interval's own width at small n); the interval's width
		// scaled by 1/√n where the formula would call this span enough.
		v.NeedSeconds = Need(float64(n)/sec, v.Sigma*math.Sqrt(tr.Inflation), spec).Seconds()
		if v.NeedSeconds <= sec {
			k := se * (za + zb) / delta
			v.NeedSeconds = sec * k * k
		}
		v.Suggestive = big && math.Abs(tr.Z) >= zQuantile(1-spec.SuggestAlpha/2)
		v.Reason = fmt.Sprintf("not judged: drift %s; the length-normalised latency scatters by %.2f (log), too much for %d requests to catch a %.0f%% drift; at this rate that takes %.0f s",
			drift, v.Sigma, n, 100*spec.DetectGrowth, v.NeedSeconds)
	}
}

// Extend says whether a span judged v should run on, and to what length:
// a span not judged runs on until it is judged, to the span the rule says
// it needs (at least step more), at most maxSpan. The caller judges it
// again there with Spec.Look one higher, so that the looks together keep
// the false-alarm rate near Alpha.
func Extend(v Verdict, span, step, maxSpan time.Duration) (time.Duration, bool) {
	if v.State != NotJudged || span >= maxSpan {
		return span, false
	}
	need := span + max(step, time.Millisecond)
	if v.NeedSeconds > 0 {
		need = max(need, time.Duration(math.Ceil(v.NeedSeconds*float64(time.Second))))
	}
	return min(need, maxSpan), true
}

// Need is the span a cell at rate successful requests per second needs for
// the rule to judge it, when its length-normalised log latency scatters by
// sigma (Verdict.Sigma of an earlier cell, or a guess: about 0.1 to 0.3 on
// real engines). It assumes completions spread evenly over the span and
// the Theil-Sen slope's efficiency under normal errors (9/π² of least
// squares, Kendall's against Pearson's), and is never below MinRequests'
// worth.
func Need(rate, sigma float64, spec Spec) time.Duration {
	spec = spec.Defaults()
	if !(rate > 0) || !(sigma >= 0) {
		return 0
	}
	za := zQuantile(1 - spec.Alpha/2)
	zb := zQuantile(spec.Power)
	delta := math.Log1p(spec.DetectGrowth)
	// Slope SE over a span of n evenly spread completions: sigma*sqrt(12/n),
	// inflated by 1/sqrt(9/π²).
	k := (za + zb) * sigma / delta
	n := 12 * k * k * math.Pi * math.Pi / 9
	n = max(n, float64(spec.MinRequests))
	return time.Duration(math.Ceil(n / rate * float64(time.Second)))
}

// Overload is the queue's evidence that the server fell behind: the
// bench's steady-state rule (fewer than 90% of what was sent ended, at
// least 10 sent, and the count in flight grew by more than 3·√(2L)+2 with
// L the smaller of the two counts), or the client's in-flight cap
// dropping at least 10 arrivals and over 5% of those offered.
func Overload(l Load) (bool, string) {
	if l.Dropped >= 10 && float64(l.Dropped) > 0.05*float64(l.Sent+l.Dropped) {
		return true, fmt.Sprintf("overloaded: the in-flight cap dropped %d of %d arrivals", l.Dropped, l.Sent+l.Dropped)
	}
	if l.Sent < 10 {
		return false, ""
	}
	L := float64(max(min(l.InFlightStart, l.InFlightEnd), 1))
	noise := 3*math.Sqrt(2*L) + 2
	if float64(l.Ended) < 0.9*float64(l.Sent) && float64(l.InFlightEnd-l.InFlightStart) > noise {
		return true, fmt.Sprintf("overloaded: %d of %d sent ended and the requests in flight grew from %d to %d",
			l.Ended, l.Sent, l.InFlightStart, l.InFlightEnd)
	}
	return false, ""
}
