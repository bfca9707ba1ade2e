package bench

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/render"
)

// TestPrecision: a percentile's interval covers the true one at about the
// stated 95% over seeded samples of known latencies (exponential, so the
// true p50 and p99 are known), its width grows with the serial
// correlation's factor, and a p99 with fewer than 5 effective requests
// beyond it is too few.
func TestPrecision(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		inflation float64
		p99Few    bool
	}{
		{"2000 independent", 2000, 1, false},
		{"2000, correlated x5", 2000, 5, true},
		{"300 independent", 300, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			covered50, covered99 := 0, 0
			const seeds = 400
			var width float64
			for seed := range uint64(seeds) {
				rng := rand.New(rand.NewPCG(seed, 9))
				e2e := make([]float64, tc.n)
				for i := range e2e {
					e2e[i] = rng.ExpFloat64()
				}
				smp := &sample{}
				smp.lat[latE2E] = newSortedIndex(e2e)
				pr := precisionOf(smp, tc.n, tc.inflation)
				f50, f99 := pr.Figures["e2e_p50"], pr.Figures["e2e_p99"]
				if f99.TooFew != tc.p99Few || f50.TooFew {
					t.Fatalf("too few: p50 %v, p99 %v; want false, %v", f50.TooFew, f99.TooFew, tc.p99Few)
				}
				if float64(f50.Low) <= math.Ln2 && math.Ln2 <= float64(f50.High) {
					covered50++
				}
				if p99 := math.Log(100); float64(f99.Low) <= p99 && p99 <= float64(f99.High) {
					covered99++
				}
				width += float64(f50.Margin)
			}
			t.Logf("p50 covered %d/%d, p99 %d/%d, p50 margin %.1f%%", covered50, seeds, covered99, seeds, 100*width/seeds)
			// Independent samples: about 95% (a binomial's 3 SD: 91-99%);
			// an inflated interval is wider, so covers more.
			if covered50 < seeds*91/100 {
				t.Errorf("p50 interval covered the true p50 in %d of %d", covered50, seeds)
			}
			if !tc.p99Few && covered99 < seeds*91/100 {
				t.Errorf("p99 interval covered the true p99 in %d of %d", covered99, seeds)
			}
		})
	}
	if note := render.PrecisionNote(precisionOf(func() *sample {
		s := &sample{}
		s.lat[latE2E] = newSortedIndex([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
		return s
	}(), 100, 2)); note != "precision: 50 effective requests (e2e p50 ±23%, at 95%); e2e p99: too few requests beyond them (fewer than 5 effective), indicative only" {
		t.Errorf("note %q", note)
	}
}
