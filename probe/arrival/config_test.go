package arrival

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	sec := time.Second
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string // "" means valid
	}{
		{"constant", Config{Process: ProcessConstant, Rate: 5}, ""},
		{"poisson", Config{Process: ProcessPoisson, Rate: 5, MaxRate: 10}, ""},
		{"gamma", Config{Process: ProcessGamma, Burstiness: 0.05, Rate: 5, MaxRate: 10}, ""},
		{"ramp from zero", Config{Process: ProcessConstant, Ramp: &Ramp{To: 3, Over: sec}}, ""},
		{"stages with zero", Config{Process: ProcessConstant, Stages: []Stage{{Duration: sec}, {Duration: sec, Rate: 2, RampTo: ptr(0)}}}, ""},
		{"max rate at the limit", Config{Process: ProcessPoisson, Rate: 5, MaxRate: MaxRateLimit}, ""},

		{"no process", Config{Rate: 5}, "process"},
		{"unknown process", Config{Process: "Poisson", Rate: 5, MaxRate: 10}, "process"},
		{"burstiness without gamma", Config{Process: ProcessPoisson, Burstiness: 1, Rate: 5, MaxRate: 10}, "burstiness"},
		{"gamma without burstiness", Config{Process: ProcessGamma, Rate: 5, MaxRate: 10}, "burstiness"},
		{"negative burstiness", Config{Process: ProcessGamma, Burstiness: -1, Rate: 5, MaxRate: 10}, "burstiness"},
		{"NaN burstiness", Config{Process: ProcessGamma, Burstiness: nan, Rate: 5, MaxRate: 10}, "burstiness"},
		{"infinite burstiness", Config{Process: ProcessGamma, Burstiness: inf, Rate: 5, MaxRate: 10}, "burstiness"},

		{"nothing set", Config{Process: ProcessConstant}, "rate"},
		{"negative rate", Config{Process: ProcessConstant, Rate: -1}, "rate"},
		{"NaN rate", Config{Process: ProcessConstant, Rate: nan}, "rate"},
		{"infinite rate", Config{Process: ProcessConstant, Rate: inf}, "rate"},
		{"rate over the limit", Config{Process: ProcessConstant, Rate: 2e9}, "rate"},
		{"rate and ramp", Config{Process: ProcessConstant, Rate: 1, Ramp: &Ramp{To: 3, Over: sec}}, "rate"},
		{"ramp and stages", Config{Process: ProcessConstant, Ramp: &Ramp{To: 3, Over: sec}, Stages: []Stage{{Duration: sec, Rate: 1}}}, "rate"},

		{"negative ramp from", Config{Process: ProcessConstant, Ramp: &Ramp{From: -1, To: 3, Over: sec}}, "ramp.from"},
		{"NaN ramp to", Config{Process: ProcessConstant, Ramp: &Ramp{From: 1, To: nan, Over: sec}}, "ramp.to"},
		{"zero ramp over", Config{Process: ProcessConstant, Ramp: &Ramp{From: 1, To: 3}}, "ramp.over"},
		{"negative ramp over", Config{Process: ProcessConstant, Ramp: &Ramp{From: 1, To: 3, Over: -sec}}, "ramp.over"},
		{"ramp all zero", Config{Process: ProcessConstant, Ramp: &Ramp{Over: sec}}, "rate"},

		{"empty stages", Config{Process: ProcessConstant, Stages: []Stage{}}, "stages"},
		{"zero stage duration", Config{Process: ProcessConstant, Stages: []Stage{{Duration: sec, Rate: 1}, {Rate: 1}}}, "stages[1].duration"},
		{"negative stage rate", Config{Process: ProcessConstant, Stages: []Stage{{Duration: sec, Rate: -1}}}, "stages[0].rate"},
		{"negative stage ramp_to", Config{Process: ProcessConstant, Stages: []Stage{{Duration: sec, Rate: 1}, {Duration: sec, Rate: 1}, {Duration: sec, Rate: 1, RampTo: ptr(-2)}}}, "stages[2].ramp_to"},
		{"stages overflow", Config{Process: ProcessConstant, Stages: []Stage{{Duration: math.MaxInt64 - 5, Rate: 1}, {Duration: 10, Rate: 1}}}, "stages[1].duration"},
		{"stages all zero", Config{Process: ProcessConstant, Stages: []Stage{{Duration: sec}, {Duration: sec, RampTo: ptr(0)}}}, "rate"},

		{"max rate below peak", Config{Process: ProcessConstant, Ramp: &Ramp{From: 1, To: 30, Over: sec}, MaxRate: 20}, "max_rate"},
		{"negative max rate", Config{Process: ProcessConstant, Rate: 1, MaxRate: -1}, "max_rate"},
		{"NaN max rate", Config{Process: ProcessConstant, Rate: 1, MaxRate: nan}, "max_rate"},
		{"max rate over the limit", Config{Process: ProcessPoisson, Rate: 1, MaxRate: 2e9}, "max_rate"},
		{"poisson without max rate", Config{Process: ProcessPoisson, Rate: 5}, "max_rate"},
		{"poisson max rate at the mean", Config{Process: ProcessPoisson, Rate: 5, MaxRate: 5}, "max_rate"},
		{"gamma max rate below a stage", Config{Process: ProcessGamma, Burstiness: 2, Stages: []Stage{{Duration: sec, Rate: 1}, {Duration: sec, Rate: 9}}, MaxRate: 8}, "max_rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, newErr := New(tc.cfg, 1)
			if (err == nil) != (newErr == nil) {
				t.Fatalf("Validate() = %v but New() = %v", err, newErr)
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v (%T), want a *FieldError for %q", err, err, tc.field)
			}
			if fe.Field != tc.field {
				t.Errorf("error names field %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if fe.Reason == "" {
				t.Error("error gives no reason")
			}
		})
	}
}

func TestMaxRateDefault(t *testing.T) {
	s, err := New(Config{Process: ProcessConstant, Stages: []Stage{{Duration: time.Second, Rate: 4, RampTo: ptr(12)}, {Duration: time.Second, Rate: 6}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.MaxRate(); got != 12 {
		t.Errorf("MaxRate() = %v, want the peak 12", got)
	}
}
