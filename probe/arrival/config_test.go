package arrival

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

func TestValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	sec := time.Second
	for _, tc := range []struct {
		name  string
		cfg   config.Arrival
		field string // "" means valid
	}{
		{"constant", config.Arrival{Process: config.ProcessConstant, Rate: 5}, ""},
		{"poisson", config.Arrival{Process: config.ProcessPoisson, Rate: 5, MaxRate: 10}, ""},
		{"gamma", config.Arrival{Process: config.ProcessGamma, Burstiness: 0.05, Rate: 5, MaxRate: 10}, ""},
		{"ramp from zero", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{To: 3, Over: sec}}, ""},
		{"stages with zero", config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{{Duration: sec}, {Duration: sec, Rate: 2, RampTo: ptr(0)}}}, ""},
		{"max rate at the limit", config.Arrival{Process: config.ProcessPoisson, Rate: 5, MaxRate: config.MaxRateLimit}, ""},

		{"no process", config.Arrival{Rate: 5}, "process"},
		{"unknown process", config.Arrival{Process: "Poisson", Rate: 5, MaxRate: 10}, "process"},
		{"burstiness without gamma", config.Arrival{Process: config.ProcessPoisson, Burstiness: 1, Rate: 5, MaxRate: 10}, "burstiness"},
		{"gamma without burstiness", config.Arrival{Process: config.ProcessGamma, Rate: 5, MaxRate: 10}, "burstiness"},
		{"negative burstiness", config.Arrival{Process: config.ProcessGamma, Burstiness: -1, Rate: 5, MaxRate: 10}, "burstiness"},
		{"NaN burstiness", config.Arrival{Process: config.ProcessGamma, Burstiness: nan, Rate: 5, MaxRate: 10}, "burstiness"},
		{"infinite burstiness", config.Arrival{Process: config.ProcessGamma, Burstiness: inf, Rate: 5, MaxRate: 10}, "burstiness"},

		{"nothing set", config.Arrival{Process: config.ProcessConstant}, "rate"},
		{"negative rate", config.Arrival{Process: config.ProcessConstant, Rate: -1}, "rate"},
		{"NaN rate", config.Arrival{Process: config.ProcessConstant, Rate: nan}, "rate"},
		{"infinite rate", config.Arrival{Process: config.ProcessConstant, Rate: inf}, "rate"},
		{"rate over the limit", config.Arrival{Process: config.ProcessConstant, Rate: 2e9}, "rate"},
		{"rate and ramp", config.Arrival{Process: config.ProcessConstant, Rate: 1, Ramp: &config.Ramp{To: 3, Over: sec}}, "rate"},
		{"ramp and stages", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{To: 3, Over: sec}, Stages: []config.Stage{{Duration: sec, Rate: 1}}}, "rate"},

		{"negative ramp from", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{From: -1, To: 3, Over: sec}}, "ramp.from"},
		{"NaN ramp to", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{From: 1, To: nan, Over: sec}}, "ramp.to"},
		{"zero ramp over", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{From: 1, To: 3}}, "ramp.over"},
		{"negative ramp over", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{From: 1, To: 3, Over: -sec}}, "ramp.over"},
		{"ramp all zero", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{Over: sec}}, "rate"},

		{"empty stages", config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{}}, "stages"},
		{"zero stage duration", config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{{Duration: sec, Rate: 1}, {Rate: 1}}}, "stages[1].duration"},
		{"negative stage rate", config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{{Duration: sec, Rate: -1}}}, "stages[0].rate"},
		{"negative stage ramp_to", config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{{Duration: sec, Rate: 1}, {Duration: sec, Rate: 1}, {Duration: sec, Rate: 1, RampTo: ptr(-2)}}}, "stages[2].ramp_to"},
		{"stages overflow", config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{{Duration: math.MaxInt64 - 5, Rate: 1}, {Duration: 10, Rate: 1}}}, "stages[1].duration"},
		{"stages all zero", config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{{Duration: sec}, {Duration: sec, RampTo: ptr(0)}}}, "rate"},

		{"max rate below peak", config.Arrival{Process: config.ProcessConstant, Ramp: &config.Ramp{From: 1, To: 30, Over: sec}, MaxRate: 20}, "max_rate"},
		{"negative max rate", config.Arrival{Process: config.ProcessConstant, Rate: 1, MaxRate: -1}, "max_rate"},
		{"NaN max rate", config.Arrival{Process: config.ProcessConstant, Rate: 1, MaxRate: nan}, "max_rate"},
		{"max rate over the limit", config.Arrival{Process: config.ProcessPoisson, Rate: 1, MaxRate: 2e9}, "max_rate"},
		{"poisson without max rate", config.Arrival{Process: config.ProcessPoisson, Rate: 5}, "max_rate"},
		{"poisson max rate at the mean", config.Arrival{Process: config.ProcessPoisson, Rate: 5, MaxRate: 5}, "max_rate"},
		{"gamma max rate below a stage", config.Arrival{Process: config.ProcessGamma, Burstiness: 2, Stages: []config.Stage{{Duration: sec, Rate: 1}, {Duration: sec, Rate: 9}}, MaxRate: 8}, "max_rate"},
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
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v (%T), want a *config.FieldError for %q", err, err, tc.field)
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
	s, err := New(config.Arrival{Process: config.ProcessConstant, Stages: []config.Stage{{Duration: time.Second, Rate: 4, RampTo: ptr(12)}, {Duration: time.Second, Rate: 6}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.MaxRate(); got != 12 {
		t.Errorf("MaxRate() = %v, want the peak 12", got)
	}
}
