package sessions

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestSessionDraws: turn counts and think times stay within their bounds
// and have the configured mean (20,000 draws: the standard error of a
// mean is under 1% of it for these spreads).
func TestSessionDraws(t *testing.T) {
	const n = 20000
	for _, tc := range []struct {
		name     string
		d        config.Distribution
		lo, hi   int
		wantMean float64
	}{
		{"fixed", config.Distribution{Dist: "fixed", Mean: 4}, 4, 4, 4},
		{"uniform", config.Distribution{Dist: "uniform", Min: 2, Max: 6}, 2, 6, 4},
		{"normal clamped at 1", config.Distribution{Dist: "normal", Mean: 3, Stddev: 1, Max: 100}, 1, 100, 3},
		{"lognormal", config.Distribution{Dist: "lognormal", Mean: 5, Stddev: 2, Max: 100}, 1, 100, 5},
		{"fixed above the bound", config.Distribution{Dist: "fixed", Mean: 500}, 100, 100, 100},
	} {
		t.Run("turns "+tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			sum := 0.0
			for range n {
				k := drawCount(rng, tc.d, 1, config.MaxSessionTurns)
				if k < tc.lo || k > tc.hi {
					t.Fatalf("drew %d, outside [%d, %d]", k, tc.lo, tc.hi)
				}
				sum += float64(k)
			}
			if mean := sum / n; math.Abs(mean-tc.wantMean) > 0.03*tc.wantMean {
				t.Errorf("mean %v, want %v", mean, tc.wantMean)
			}
		})
	}
	for _, tc := range []struct {
		name     string
		d        config.ThinkTime
		lo, hi   time.Duration
		wantMean time.Duration
	}{
		{"fixed", config.ThinkTime{Dist: "fixed", Mean: 2 * time.Second}, 2 * time.Second, 2 * time.Second, 2 * time.Second},
		{"zero", config.ThinkTime{Dist: "fixed"}, 0, 0, 0},
		{"uniform", config.ThinkTime{Dist: "uniform", Min: time.Second, Max: 3 * time.Second}, time.Second, 3 * time.Second, 2 * time.Second},
		{"exponential", config.ThinkTime{Dist: "exponential", Mean: time.Second, Max: config.MaxThinkTime}, 0, config.MaxThinkTime, time.Second},
		{"lognormal", config.ThinkTime{Dist: "lognormal", Mean: 5 * time.Second, Stddev: 3 * time.Second, Max: config.MaxThinkTime}, 0, config.MaxThinkTime, 5 * time.Second},
		{"exponential clamped", config.ThinkTime{Dist: "exponential", Mean: time.Second, Min: 500 * time.Millisecond, Max: 600 * time.Millisecond}, 500 * time.Millisecond, 600 * time.Millisecond, 0},
	} {
		t.Run("think "+tc.name, func(t *testing.T) {
			s := &Sessions{cfg: config.Sessions{ThinkTime: tc.d}}
			rng := rand.New(rand.NewPCG(3, 4))
			var sum time.Duration
			for range n {
				d := s.think(rng)
				if d < tc.lo || d > tc.hi {
					t.Fatalf("drew %v, outside [%v, %v]", d, tc.lo, tc.hi)
				}
				sum += d
			}
			if tc.wantMean == 0 && tc.hi != 0 {
				return // clamped: the bounds are the test
			}
			if mean := sum / n; math.Abs(float64(mean-tc.wantMean)) > 0.03*float64(tc.wantMean) {
				t.Errorf("mean %v, want %v", mean, tc.wantMean)
			}
		})
	}
}
