package coldstart

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// The phases of a cold start: the phase label. Ready and first_token count
// from the start; first_request_ttft is the TTFT of the request that gave
// first_token, from its scheduled send (Start.FirstRequestTTFTSeconds).
const (
	PhaseReady            = "ready"
	PhaseFirstToken       = "first_token"
	PhaseFirstRequestTTFT = "first_request_ttft"
)

// Phases lists the phase label's values.
var Phases = []string{PhaseReady, PhaseFirstToken, PhaseFirstRequestTTFT}

// histogramBuckets span cold starts from a small model's second to a large
// one's hour of download and load, about three to a decade: the series
// exist from a target's first poll (so that increase() sees its first
// start), 3 phases a target, and 16 buckets made them 80 kB of a 17-target
// page; the dashboards read their sums and counts.
var histogramBuckets = []float64{1, 5, 15, 30, 60, 180, 600, 3600}

func newHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "infer_server_cold_start_seconds",
		Help:    "Seconds from each server start seen to its readiness (ready), first served token (first_token), and that token's request's TTFT (first_request_ttft).",
		Buckets: histogramBuckets,
	}, []string{"target", "phase"})
}

type descs struct {
	starts, lastStart, lastCold *prometheus.Desc
	ready                       *prometheus.Desc
}

func newDescs() descs {
	return descs{
		starts: prometheus.NewDesc("infer_server_starts_total",
			"Server starts the exporter saw behind the target (a new process start, or serving again after refusing).",
			[]string{"target"}, nil),
		lastStart: prometheus.NewDesc("infer_server_last_start_time_seconds",
			"Unix time of the latest server start seen; from says whose clock: process_start, first_refusal or first_unready.",
			[]string{"target", "from"}, nil),
		lastCold: prometheus.NewDesc("infer_server_last_cold_start_seconds",
			"The latest server start's seconds to its readiness (ready), first served token (first_token), and that token's request's TTFT (first_request_ttft).",
			[]string{"target", "phase", "from"}, nil),
		ready: prometheus.NewDesc("infer_probe_target_ready",
			"1 while the target's server is ready and its workloads send; 0 before its first readiness and while it restarts (arrivals skipped).",
			[]string{"target"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (t *Tracker) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.descs.starts
	ch <- t.descs.lastStart
	ch <- t.descs.lastCold
	ch <- t.descs.ready
	t.hist.Describe(ch)
}

// Collect implements prometheus.Collector: for every polled target, its
// starts counter and its histogram (from 0, so that increase() sees the
// first start), and for its latest start the start time and each phase
// reached so far (a phase not yet reached, or without a health endpoint the
// ready phase, is absent).
func (t *Tracker) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.targets))
	for name, s := range t.targets {
		if s.polled {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	d := t.descs
	for _, name := range names {
		s := t.targets[name]
		ch <- prometheus.MustNewConstMetric(d.starts, prometheus.CounterValue, float64(s.starts), name)
		ready := 0.0
		if s.ready {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(d.ready, prometheus.GaugeValue, ready, name)
		c := s.cur
		if c == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(d.lastStart, prometheus.GaugeValue, float64(c.At.UnixNano())/1e9, name, c.From)
		if v, ok := c.ReadySeconds(); ok {
			ch <- prometheus.MustNewConstMetric(d.lastCold, prometheus.GaugeValue, v, name, PhaseReady, c.From)
		}
		if v, ok := c.FirstTokenSeconds(); ok {
			ch <- prometheus.MustNewConstMetric(d.lastCold, prometheus.GaugeValue, v, name, PhaseFirstToken, c.From)
		}
		if v, ok := c.FirstRequestTTFTSeconds(); ok {
			ch <- prometheus.MustNewConstMetric(d.lastCold, prometheus.GaugeValue, v, name, PhaseFirstRequestTTFT, c.From)
		}
	}
	t.hist.Collect(ch)
}
