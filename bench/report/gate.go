package report

import "math"

// Verdict is the regression gate's outcome for one figure of one cell, and
// for a run (the worst of its figures'): Comparison.Verdict,
// CellComparison.Verdict.
type Verdict string

const (
	// VerdictOK: the change's interval stays below the threshold: the run
	// could have seen a regression of the threshold and did not.
	VerdictOK Verdict = "ok"
	// VerdictInconclusive: the interval reaches past the threshold without
	// lying wholly beyond it (or there is no interval): the run cannot tell
	// a regression of the threshold from noise.
	VerdictInconclusive Verdict = "inconclusive"
	// VerdictRegressed: the whole interval is beyond the threshold: a
	// regression larger than the threshold, beyond noise.
	VerdictRegressed Verdict = "regressed"
)

// GateVerdict is the gate's rule, the one place it lives (bench's
// --baseline and any later comparison call it). lo and hi are the ends of
// the interval of the relative change new/old - 1; threshold is the
// relative worsening that counts as a regression (0.05). For a figure that
// is better lower (latencies) the worsening is the change; for one that is
// better higher (throughput, ratios) it is the change's opposite, so its
// interval is [-hi, -lo]. Then:
//
//	regressed      the worsening's lower end > threshold
//	ok             the worsening's upper end < threshold
//	inconclusive   otherwise, or without an interval (lo or hi NaN)
//
// A point estimate beyond the threshold with an interval that reaches
// below it is inconclusive, not ok: a run too short to resolve a change of
// the threshold's size says so instead of passing it.
func GateVerdict(lo, hi, threshold float64, higherIsBetter bool) Verdict {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsNaN(threshold) {
		return VerdictInconclusive
	}
	worseLo, worseHi := lo, hi
	if higherIsBetter {
		worseLo, worseHi = -hi, -lo
	}
	switch {
	case worseLo > threshold:
		return VerdictRegressed
	case worseHi < threshold:
		return VerdictOK
	}
	return VerdictInconclusive
}

// HigherIsBetter says whether a figure (a key of CellResult.CI) is better
// higher: the throughputs and the ratios; the latencies are better lower.
func HigherIsBetter(figure string) bool {
	switch figure {
	case "output_tokens_per_second", "goodput_ratio", "success_ratio":
		return true
	}
	return false
}

// Worse is the worse of two verdicts: regressed, then inconclusive, then
// ok, then "" (no figure judged yet).
func (v Verdict) Worse(w Verdict) Verdict {
	rank := func(v Verdict) int {
		switch v {
		case VerdictRegressed:
			return 3
		case VerdictInconclusive:
			return 2
		case VerdictOK:
			return 1
		}
		return 0
	}
	if rank(w) > rank(v) {
		return w
	}
	return v
}
