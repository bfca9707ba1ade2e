package arrival

import (
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// BenchmarkNext measures the cost of scheduling one arrival. The finite
// configurations are long enough (10^9 arrivals and more) that b.N never
// exhausts them.
func BenchmarkNext(b *testing.B) {
	long := 1_000_000 * time.Second
	for _, bc := range []struct {
		name string
		cfg  config.Arrival
	}{
		{"constant", config.Arrival{Process: config.ProcessConstant, Rate: 1000}},
		{"poisson", config.Arrival{Process: config.ProcessPoisson, Rate: 1000, MaxRate: 2000}},
		{"gamma_b0.5", config.Arrival{Process: config.ProcessGamma, Burstiness: 0.5, Rate: 1000, MaxRate: 2000}},
		{"gamma_b4", config.Arrival{Process: config.ProcessGamma, Burstiness: 4, Rate: 1000, MaxRate: 2000}},
		{"poisson_ramp", config.Arrival{Process: config.ProcessPoisson, Ramp: &config.Ramp{From: 1000, To: 5000, Over: long}, MaxRate: 10000}},
		{"poisson_stages", config.Arrival{Process: config.ProcessPoisson, Stages: []config.Stage{
			{Duration: time.Second, Rate: 1000}, {Duration: time.Second, Rate: 0}, {Duration: long, Rate: 2000, RampTo: ptr(3000)},
		}, MaxRate: 10000}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := New(bc.cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := s.Next(); !ok {
					b.Fatal("the schedule ended")
				}
			}
		})
	}
}
