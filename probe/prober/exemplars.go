package prober

import (
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// A probe's latencies as histograms whose buckets carry, as exemplars, the
// trace and span ids of the traceparent one of its requests was sent
// with. The summaries above are what a probe's figures are read from;
// OpenMetrics lets no exemplar on a summary or a gauge, only on a
// histogram's buckets (and a counter), so these histograms exist to carry
// them: present only when the probe's requests were traced (a trace context each,
// prober.Options.Spans), and only for a figure that has values.
var (
	descTTFTTraced = prometheus.NewDesc("probe_time_to_first_token_histogram_seconds", "Time to first token of the probe's requests; a bucket's exemplar is one request's trace_id and span_id. Present when traced.", nil, nil)
	descTPOTTraced = prometheus.NewDesc("probe_time_per_output_token_histogram_seconds", "Time per output token of the successful requests; a bucket's exemplar is one request's trace_id and span_id. Present when traced.", nil, nil)
	descITLTraced  = prometheus.NewDesc("probe_inter_token_latency_histogram_seconds", "Gaps between content events of every request; a bucket's exemplar is one request's trace_id and span_id. Present when traced.", nil, nil)
	descE2ETraced  = prometheus.NewDesc("probe_e2e_latency_histogram_seconds", "End-to-end latency of the successful requests; a bucket's exemplar is one request's trace_id and span_id. Present when traced.", nil, nil)
)

// The classic buckets of those histograms: the continuous probe's layouts
// (probe/live/metrics.go; TestTracedBucketsAreTheLiveOnes), so that a
// probe's le values are its series'.
var (
	latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .075, .1, .15, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120}
	tokenBuckets   = []float64{.001, .002, .003, .005, .0075, .01, .0125, .015, .02, .025, .03, .04, .05, .075, .1, .15, .2, .3, .5, 1, 2.5, 5, 10, 30, 120}
)

// Exemplar label names, as on /metrics.
const (
	exemplarTraceID = "trace_id"
	exemplarSpanID  = "span_id"
)

// tracedFigure gathers one figure of a probe's requests into classic
// buckets, keeping for each bucket the exemplar of the last traced value
// it took (in request order): one a bucket, as client_golang keeps.
type tracedFigure struct {
	bounds    []float64
	counts    []uint64        // per bucket, not cumulative; +Inf last
	exemplars []*dto.Exemplar // per bucket; +Inf last
	sum       float64
	n         uint64
	traced    bool
}

func newTracedFigure(bounds []float64) *tracedFigure {
	return &tracedFigure{bounds: bounds, counts: make([]uint64, len(bounds)+1), exemplars: make([]*dto.Exemplar, len(bounds)+1)}
}

// add counts v, measured at the instant at of a request sent with the
// trace context t (zero: untraced).
func (f *tracedFigure) add(v float64, at time.Time, t observation.Trace) {
	i := sort.SearchFloat64s(f.bounds, v) // the first bound not below v
	f.counts[i]++
	f.sum += v
	f.n++
	if t.Valid() {
		f.traced = true
		f.exemplars[i] = exemplarOf(v, at, t)
	}
}

// exemplarOf is v's exemplar: t's ids, trace_id first, at the instant v
// was measured.
func exemplarOf(v float64, at time.Time, t observation.Trace) *dto.Exemplar {
	traceID, spanID := t.IDs()
	names := [2]string{exemplarTraceID, exemplarSpanID}
	return &dto.Exemplar{
		Label: []*dto.LabelPair{
			{Name: &names[0], Value: &traceID},
			{Name: &names[1], Value: &spanID},
		},
		Value:     &v,
		Timestamp: timestamppb.New(at),
	}
}

// send sends f's histogram, when its requests were traced.
func (f *tracedFigure) send(ch chan<- prometheus.Metric, d *prometheus.Desc) {
	if !f.traced {
		return
	}
	buckets := make(map[float64]uint64, len(f.bounds))
	var cum uint64
	for i, b := range f.bounds {
		cum += f.counts[i]
		buckets[b] = cum
	}
	ch <- withExemplars{prometheus.MustNewConstHistogram(d, f.n, f.sum, buckets), f}
}

// withExemplars is a probe's histogram with its buckets' exemplars.
type withExemplars struct {
	prometheus.Metric
	f *tracedFigure
}

// Write implements prometheus.Metric. A const histogram's buckets are its
// bounds in order, without +Inf, which is added, as client_golang adds it,
// when it has an exemplar.
func (m withExemplars) Write(out *dto.Metric) error {
	if err := m.Metric.Write(out); err != nil {
		return err
	}
	h := out.GetHistogram()
	for i, b := range h.GetBucket() {
		b.Exemplar = m.f.exemplars[i]
	}
	if e := m.f.exemplars[len(m.f.bounds)]; e != nil {
		inf, n := math.Inf(1), m.f.n
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: &inf, CumulativeCount: &n, Exemplar: e})
	}
	return nil
}
