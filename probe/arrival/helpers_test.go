package arrival

import (
	"math"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// collect returns up to n offsets of the schedule for cfg and seed, fewer if
// the process ends first, and the schedule itself.
func collect(t testing.TB, cfg config.Arrival, seed int64, n int) ([]time.Duration, *Schedule) {
	t.Helper()
	s, err := New(cfg, seed)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	out := make([]time.Duration, 0, min(n, 1<<16))
	for len(out) < n {
		d, ok := s.Next()
		if !ok {
			break
		}
		out = append(out, d)
	}
	return out, s
}

// gapsNs returns the gaps between consecutive offsets, the first measured from
// 0, in nanoseconds.
func gapsNs(offsets []time.Duration) []float64 {
	g := make([]float64, len(offsets))
	prev := time.Duration(0)
	for i, d := range offsets {
		g[i] = float64(d - prev)
		prev = d
	}
	return g
}

// meanSD returns the sample mean and standard deviation.
func meanSD(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / float64(len(x)-1))
}

// countsPerWindow counts offsets in consecutive windows (k·w, (k+1)·w] that
// end before the last offset.
func countsPerWindow(offsets []time.Duration, w time.Duration) []float64 {
	last := offsets[len(offsets)-1]
	m := int(last / w)
	c := make([]float64, m)
	for _, d := range offsets {
		k := int((d - 1) / w) // (k·w, (k+1)·w]
		if d > 0 && k < m {
			c[k]++
		}
	}
	return c
}

func ptr(v float64) *float64 { return &v }
