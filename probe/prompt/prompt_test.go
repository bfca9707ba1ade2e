package prompt

import (
	"math"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

func TestExactLengthsAndDeterminism(t *testing.T) {
	in := config.Distribution{Dist: "uniform", Min: 1, Max: 300}
	out := config.Distribution{Dist: "fixed", Mean: 64}
	a, b := New(in, out, 42), New(in, out, 42)
	for i := 0; i < 500; i++ {
		p, q := a.Next(), b.Next()
		if p != q {
			t.Fatalf("prompt %d differs between generators with the same seed", i)
		}
		if got := len(strings.Fields(p.Text)); got != p.InputTokens {
			t.Fatalf("prompt %d has %d words, want %d", i, got, p.InputTokens)
		}
		if p.InputTokens < 1 || p.InputTokens > 300 || p.OutputTokens != 64 {
			t.Fatalf("prompt %d lengths %d/%d out of spec", i, p.InputTokens, p.OutputTokens)
		}
	}
	if New(in, out, 43).Next() == New(in, out, 42).Next() {
		t.Error("different seeds gave the same first prompt")
	}
}

func TestDistributions(t *testing.T) {
	const n = 20000
	for _, tc := range []struct {
		d        config.Distribution
		mean, sd float64
		tolMean  float64 // relative
		lo, hi   int
	}{
		{config.Distribution{Dist: "fixed", Mean: 100}, 100, 0, 0, 100, 100},
		{config.Distribution{Dist: "uniform", Min: 10, Max: 30}, 20, math.Sqrt((21*21 - 1) / 12.0), 0.01, 10, 30},
		{config.Distribution{Dist: "normal", Mean: 500, Stddev: 50}, 500, 50, 0.01, 1, 1 << 30},
		{config.Distribution{Dist: "lognormal", Mean: 500, Stddev: 200}, 500, 200, 0.02, 1, 1 << 30},
		{config.Distribution{Dist: "normal", Mean: 100, Stddev: 50, Min: 80, Max: 120}, 0, 0, 0, 80, 120},
	} {
		t.Run(tc.d.Dist, func(t *testing.T) {
			g := New(tc.d, config.Distribution{Dist: "fixed", Mean: 1}, 1)
			var sum, sq float64
			for i := 0; i < n; i++ {
				x := g.sample(tc.d)
				if x < tc.lo || x > tc.hi {
					t.Fatalf("sample %d outside [%d, %d]", x, tc.lo, tc.hi)
				}
				sum += float64(x)
				sq += float64(x) * float64(x)
			}
			if tc.mean == 0 {
				return
			}
			m := sum / n
			sd := math.Sqrt(sq/n - m*m)
			// Tolerances are several standard errors wide (sd/sqrt(n) is 0.35
			// for the normal case) and the seed is fixed.
			if math.Abs(m-tc.mean) > tc.tolMean*tc.mean+1e-9 {
				t.Errorf("mean = %.2f, want %.2f", m, tc.mean)
			}
			if math.Abs(sd-tc.sd) > 0.05*tc.sd+0.01 {
				t.Errorf("stddev = %.2f, want %.2f", sd, tc.sd)
			}
		})
	}
}

func BenchmarkNext(b *testing.B) {
	g := New(config.Distribution{Dist: "fixed", Mean: 512}, config.Distribution{Dist: "fixed", Mean: 64}, 1)
	b.ReportAllocs()
	for b.Loop() {
		g.Next()
	}
}

// TestLengthsBoundedInCode: a distribution built in code, past the
// configuration's validation, still never yields a prompt above
// config.MaxTokens (1e15 once panicked in makeslice, or ran out of memory).
func TestLengthsBoundedInCode(t *testing.T) {
	for _, d := range []config.Distribution{
		{Dist: "fixed", Mean: 1e15},
		{Dist: "fixed", Mean: math.Inf(1)},
		{Dist: "fixed", Mean: math.NaN()},
		{Dist: "lognormal", Mean: 1e12, Stddev: 1e12},
	} {
		p := New(d, config.Distribution{Dist: "fixed", Mean: 1e18}, 1).Next()
		if p.InputTokens < 1 || p.InputTokens > config.MaxTokens || p.OutputTokens > config.MaxTokens {
			t.Errorf("%+v: %d input, %d output tokens, want within [1, %d]", d, p.InputTokens, p.OutputTokens, config.MaxTokens)
		}
	}
}
