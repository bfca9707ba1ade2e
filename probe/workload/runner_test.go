package workload

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestLagWindowQuantile(t *testing.T) {
	w := newLagWindow(10*time.Second, 10)
	now := time.Unix(1000, 0)
	for i := 0; i < 990; i++ {
		w.observe(now, 100*time.Microsecond)
	}
	for i := 0; i < 10; i++ {
		w.observe(now, 50*time.Millisecond)
	}
	p99, n := w.quantile(now, 0.99)
	if n != 1000 {
		t.Fatalf("n = %d", n)
	}
	// Buckets are 12% wide: the p99 is the 990th lag, 100µs.
	if p99 < 99e-6 || p99 > 113e-6 {
		t.Errorf("p99 = %g, want about 100µs", p99)
	}
	if p, _ := w.quantile(now, 0.999); p < 49e-3 || p > 57e-3 {
		t.Errorf("p99.9 = %g, want about 50ms", p)
	}
	// Eleven seconds later the window has forgotten them.
	if _, n := w.quantile(now.Add(11*time.Second), 0.99); n != 0 {
		t.Errorf("old lags still counted: %d", n)
	}
}

func TestHistogramQuantile(t *testing.T) {
	buckets := []float64{0, 1e-6, 1e-5, 1e-4, 1e-3, math.Inf(1)}
	before := []uint64{0, 10, 0, 0, 0}
	after := []uint64{0, 10 + 98, 1, 1, 0}
	// 100 new observations: 98 in (1e-6, 1e-5], one in (1e-5, 1e-4], one
	// in (1e-4, 1e-3]. The 99th is the one in (1e-5, 1e-4].
	if got := histogramQuantile(before, after, buckets, 0.99); got != 1e-4 {
		t.Errorf("p99 = %g, want 1e-4", got)
	}
	if got := histogramQuantile(before, before, buckets, 0.99); got != 0 {
		t.Errorf("empty window p99 = %g, want 0", got)
	}
	s := &SchedulingLatency{window: 3 * time.Second, gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "x", Help: "x"})}
	t0 := time.Unix(0, 0)
	s.add(t0, before, buckets)
	s.add(t0.Add(time.Second), after, buckets)
	if s.P99() != 1e-4 {
		t.Errorf("P99 = %g", s.P99())
	}
	// Five seconds on, with nothing new, the window holds no observations.
	s.add(t0.Add(5*time.Second), after, buckets)
	s.add(t0.Add(6*time.Second), after, buckets)
	if s.P99() != 0 {
		t.Errorf("P99 after the window passed = %g", s.P99())
	}
}
