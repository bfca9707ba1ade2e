package workload

import (
	"context"
	"math"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SchedulingLatency watches how long this process's goroutines wait to run
// once they are runnable (the Go runtime's /sched/latencies:seconds). A
// client whose CPU is saturated reads its token events late even when it
// sends on time: the schedule lag stays small while every timestamp grows
// a delay of its own. That delay is this latency, so its p99 over a window
// is the second sign that the measurement is degraded.
type SchedulingLatency struct {
	window time.Duration
	gauge  prometheus.Gauge

	mu      sync.Mutex
	history []schedSnapshot // one per second, oldest first
	p99     float64
}

type schedSnapshot struct {
	at     time.Time
	counts []uint64
}

const schedMetric = "/sched/latencies:seconds"

// NewSchedulingLatency registers infer_exporter_scheduling_latency_p99_seconds
// with reg; reg nil registers nothing (bench reads P99 directly).
func NewSchedulingLatency(reg prometheus.Registerer, window time.Duration) *SchedulingLatency {
	s := &SchedulingLatency{
		window: window,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "infer_exporter_scheduling_latency_p99_seconds",
			Help: "p99 over --probe.degraded-window of how long the exporter's goroutines waited for a CPU once runnable (high: CPU-saturated).",
		}),
	}
	if reg != nil {
		reg.MustRegister(s.gauge)
	}
	return s
}

// Run samples once a second until ctx is done.
func (s *SchedulingLatency) Run(ctx context.Context) {
	sample := []metrics.Sample{{Name: schedMetric}}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var buckets []float64
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return // not provided by this runtime
		}
		h := sample[0].Value.Float64Histogram()
		buckets = h.Buckets
		s.add(time.Now(), h.Counts, buckets)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *SchedulingLatency) add(now time.Time, counts []uint64, buckets []float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = append(s.history, schedSnapshot{at: now, counts: append([]uint64(nil), counts...)})
	for len(s.history) > 1 && now.Sub(s.history[0].at) > s.window {
		s.history = s.history[1:]
	}
	oldest, newest := s.history[0].counts, s.history[len(s.history)-1].counts
	s.p99 = histogramQuantile(oldest, newest, buckets, 0.99)
	s.gauge.Set(s.p99)
}

// P99 is the latest window's p99 in seconds (0 before two samples).
func (s *SchedulingLatency) P99() float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p99
}

// histogramQuantile returns the upper bound of the bucket holding the q
// quantile of the observations between two cumulative snapshots. buckets
// holds len(counts)+1 boundaries.
func histogramQuantile(before, after []uint64, buckets []float64, q float64) float64 {
	var total uint64
	for i := range after {
		total += after[i] - before[i]
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i := range after {
		seen += after[i] - before[i]
		if seen >= rank {
			upper := buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = buckets[i]
			}
			return upper
		}
	}
	return buckets[len(buckets)-1]
}
