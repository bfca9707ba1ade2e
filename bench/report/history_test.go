package report

import (
	"math"
	"testing"
	"time"
)

// TestHistoryVerdict: `bench compare`'s verdicts are the gate's rule
// applied to the change and to its opposite.
func TestHistoryVerdict(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name           string
		lo, hi         float64
		higherIsBetter bool
		want           string
	}{
		{"latency up beyond the threshold", 0.4, 0.6, false, HistoryWorse},
		{"latency down beyond the threshold", -0.4, -0.2, false, HistoryBetter},
		{"latency within the threshold", -0.02, 0.03, false, HistorySame},
		{"latency reaching past the threshold", -0.02, 0.08, false, HistoryInconclusive},
		{"latency reaching below minus the threshold", -0.08, 0.02, false, HistoryInconclusive},
		{"latency at the threshold is not within it", -0.01, 0.05, false, HistoryInconclusive},
		{"no interval", nan, nan, false, HistoryInconclusive},
		{"throughput down beyond the threshold", -0.4, -0.2, true, HistoryWorse},
		{"throughput up beyond the threshold", 0.2, 0.4, true, HistoryBetter},
		{"throughput within the threshold", -0.01, 0.01, true, HistorySame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HistoryVerdict(tc.lo, tc.hi, 0.05, tc.higherIsBetter); got != tc.want {
				t.Errorf("HistoryVerdict(%v, %v, 0.05, %v) = %s, want %s", tc.lo, tc.hi, tc.higherIsBetter, got, tc.want)
			}
			// Worse is exactly the gate's regression.
			if gate := GateVerdict(tc.lo, tc.hi, 0.05, tc.higherIsBetter); (gate == VerdictRegressed) != (tc.want == HistoryWorse) {
				t.Errorf("the gate says %s, the comparison %s", gate, tc.want)
			}
		})
	}
}

func TestRunID(t *testing.T) {
	r := &Report{Environment: Environment{Started: time.Date(2025, 3, 4, 2, 0, 5, 700e6, time.FixedZone("X", 3600))}}
	if got, want := RunID(r), "2025-03-04T01:00:05Z"; got != want {
		t.Errorf("RunID = %q, want %q", got, want)
	}
}
