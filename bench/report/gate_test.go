package report

import (
	"math"
	"testing"
)

// TestGateVerdict is the gate's rule on known intervals at a threshold of
// 5%: regressed only when the whole interval is worse than 5%, ok only
// when the whole interval is better than a worsening of 5%, inconclusive
// otherwise; mirrored for a figure that is better higher.
func TestGateVerdict(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name           string
		lo, hi         float64
		higherIsBetter bool
		want           Verdict
	}{
		// Lower is better (latencies): the worsening is the change.
		{"slower beyond the threshold and noise", 0.06, 0.10, false, VerdictRegressed},
		{"the observed defect: +11.7%, interval -11%..+41%", -0.11, 0.41, false, VerdictInconclusive},
		{"beyond noise, not beyond the threshold", 0.01, 0.09, false, VerdictInconclusive},
		{"lower end at the threshold", 0.05, 0.10, false, VerdictInconclusive},
		{"upper end at the threshold", -0.02, 0.05, false, VerdictInconclusive},
		{"within the threshold", -0.02, 0.04, false, VerdictOK},
		{"faster", -0.30, -0.10, false, VerdictOK},
		{"no interval", nan, nan, false, VerdictInconclusive},
		// Higher is better (throughput, ratios): the worsening is the
		// change's opposite.
		{"throughput fell beyond the threshold and noise", -0.10, -0.06, true, VerdictRegressed},
		{"throughput, a wide interval", -0.41, 0.11, true, VerdictInconclusive},
		{"throughput fell, not beyond the threshold", -0.06, -0.04, true, VerdictInconclusive},
		{"throughput within the threshold", -0.04, 0.02, true, VerdictOK},
		{"throughput rose", 0.06, 0.10, true, VerdictOK},
		{"a fall is no regression of a lower-is-better figure", -0.10, -0.06, false, VerdictOK},
		{"throughput, no interval", nan, 0.1, true, VerdictInconclusive},
	} {
		if got := GateVerdict(tc.lo, tc.hi, 0.05, tc.higherIsBetter); got != tc.want {
			t.Errorf("%s: GateVerdict(%v, %v, 0.05, %v) = %s, want %s", tc.name, tc.lo, tc.hi, tc.higherIsBetter, got, tc.want)
		}
	}
}

// TestVerdictWorse: a run's verdict is the worst of its figures',
// regressed > inconclusive > ok, whatever the order.
func TestVerdictWorse(t *testing.T) {
	for _, tc := range []struct {
		a, b, want Verdict
	}{
		{"", VerdictOK, VerdictOK},
		{VerdictOK, VerdictOK, VerdictOK},
		{VerdictOK, VerdictInconclusive, VerdictInconclusive},
		{VerdictInconclusive, VerdictOK, VerdictInconclusive},
		{VerdictInconclusive, VerdictRegressed, VerdictRegressed},
		{VerdictRegressed, VerdictInconclusive, VerdictRegressed},
		{VerdictRegressed, VerdictOK, VerdictRegressed},
	} {
		if got := tc.a.Worse(tc.b); got != tc.want {
			t.Errorf("%q.Worse(%q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestHigherIsBetter: the throughputs and ratios are better higher, every
// latency lower.
func TestHigherIsBetter(t *testing.T) {
	for f, want := range map[string]bool{
		"output_tokens_per_second": true, "goodput_ratio": true, "success_ratio": true,
		"ttft_p50": false, "ttft_p99": false, "tpot_p50": false, "tpot_p99": false, "e2e_p50": false, "e2e_p99": false,
	} {
		if got := HigherIsBetter(f); got != want {
			t.Errorf("HigherIsBetter(%s) = %v, want %v", f, got, want)
		}
	}
}
