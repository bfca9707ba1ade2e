package config

import (
	"testing"
	"time"
)

func TestArrivalPeakAndCeiling(t *testing.T) {
	to := 12.0
	for _, tc := range []struct {
		name          string
		a             Arrival
		peak, ceiling float64
		defaulted     float64 // MaxRate after WithDefaults
	}{
		{"constant", Arrival{Process: ProcessConstant, Rate: 5}, 5, 5, 0},
		{"constant with ceiling", Arrival{Process: ProcessConstant, Rate: 5, MaxRate: 8}, 5, 8, 8},
		{"poisson ramp down", Arrival{Process: ProcessPoisson, Ramp: &Ramp{From: 30, To: 3, Over: time.Second}, MaxRate: 40}, 30, 40, 40},
		{"poisson default ceiling", Arrival{Process: ProcessPoisson, Rate: 2}, 2, 0, 20},
		{"gamma stages", Arrival{Process: ProcessGamma, Burstiness: 2, Stages: []Stage{{Duration: time.Second, Rate: 4, RampTo: &to}, {Duration: time.Second, Rate: 6}}, MaxRate: 13}, 12, 13, 13},
		{"huge default ceiling", Arrival{Process: ProcessPoisson, Rate: 5e8}, 5e8, 0, MaxRateLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.PeakRate(); got != tc.peak {
				t.Errorf("PeakRate() = %v, want %v", got, tc.peak)
			}
			if got := tc.a.WithDefaults().MaxRate; got != tc.defaulted {
				t.Errorf("WithDefaults().MaxRate = %v, want %v", got, tc.defaulted)
			}
			got, err := tc.a.Ceiling()
			if tc.ceiling == 0 {
				if err == nil {
					t.Errorf("Ceiling() = %v, want an error (no max_rate)", got)
				}
				return
			}
			if err != nil || got != tc.ceiling {
				t.Errorf("Ceiling() = %v, %v; want %v", got, err, tc.ceiling)
			}
		})
	}
	if got := (Arrival{Process: ProcessConstant}).PeakRate(); got != 0 {
		t.Errorf("PeakRate() of an invalid config = %v, want 0", got)
	}
}

func TestFieldErrorMessage(t *testing.T) {
	err := Arrival{Process: ProcessConstant, Stages: []Stage{{Duration: time.Second, Rate: 1}, {Rate: 1}}}.Validate()
	if want := "arrival: stages[1].duration: must be > 0, got 0s"; err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}
