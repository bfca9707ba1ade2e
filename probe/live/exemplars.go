package live

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// Exemplar label names: the trace and span ids of the traceparent the
// request was sent with, the names Grafana's and Prometheus' exemplar
// links expect by default.
const (
	exemplarTraceID = "trace_id"
	exemplarSpanID  = "span_id"
)

// exemplarEvery is the shortest time, on the requests' clock, between two
// exemplars of one bucket of one series. client_golang keeps the latest
// exemplar of each bucket, and replacing it is expensive: 1.3 µs and 11
// allocations a call against 55 ns and none for a plain observation
// (BenchmarkExemplarObserve on 2 shared cores; the exemplar's protobuf, its
// timestamp and labels, and the native histogram's exemplars kept by
// value under a lock), some 10% of the client's whole CPU per chunk were
// every gap between tokens to carry one. A second is shorter than any
// scrape interval, so that each scrape still finds a bucket's exemplar
// from the last second it was observed in; and it bounds the cost per
// series to one replacement per bucket per second, whatever the load.
const exemplarEvery = time.Second

// exemplarHistogram is one series of a latency histogram whose
// observations carry their request's trace ids as exemplars, at most one
// per classic bucket per exemplarEvery.
type exemplarHistogram struct {
	prometheus.Histogram
	bounds []float64 // the classic buckets' upper bounds, as the vector's
	// last holds, per classic bucket (+Inf last), the instant of the
	// observation whose exemplar it holds, in Unix nanoseconds.
	last []atomic.Int64
}

// newExemplarHistogram wraps the series o of a vector made by histogram
// with bounds.
func newExemplarHistogram(o prometheus.Observer, bounds []float64) *exemplarHistogram {
	return &exemplarHistogram{
		Histogram: o.(prometheus.Histogram),
		bounds:    bounds,
		last:      make([]atomic.Int64, len(bounds)+1),
	}
}

// observe records v, measured at the instant at of a request sent with the
// trace context t: with t's ids as the exemplar of v's bucket when t is
// valid and the bucket's exemplar is exemplarEvery older than at, else
// plainly. Its cost is a plain observation's and a search of the bounds,
// but for one call per bucket per exemplarEvery.
func (h *exemplarHistogram) observe(v float64, at time.Time, t observation.Trace) {
	if !t.Valid() {
		h.Observe(v)
		return
	}
	// The bucket client_golang puts v in: the first upper bound not below
	// it, +Inf past the last.
	last := &h.last[sort.SearchFloat64s(h.bounds, v)]
	now, prev := at.UnixNano(), last.Load()
	// A request that ended earlier than the bucket's exemplar (another
	// request's, told first) finds now-prev negative and leaves it; of two
	// requests due at once, the one whose swap succeeds gives it.
	if prev != 0 && now-prev < int64(exemplarEvery) || !last.CompareAndSwap(prev, now) {
		h.Observe(v)
		return
	}
	traceID, spanID := t.IDs()
	h.Histogram.(prometheus.ExemplarObserver).ObserveWithExemplar(v, prometheus.Labels{exemplarTraceID: traceID, exemplarSpanID: spanID})
}

// exemplarVec is a latency vector as registered: its exemplars are
// written with trace_id first. client_golang takes an exemplar's labels as
// a map and writes them in the map's random order; in the text exposition
// `# {trace_id="...",span_id="..."}` then reads the same on every line, as
// a reader greps it.
type exemplarVec struct{ *prometheus.HistogramVec }

// Collect implements prometheus.Collector.
func (v exemplarVec) Collect(ch chan<- prometheus.Metric) {
	inner := make(chan prometheus.Metric)
	go func() {
		v.HistogramVec.Collect(inner)
		close(inner)
	}()
	for m := range inner {
		ch <- traceFirst{m}
	}
}

// traceFirst is a histogram series whose written exemplars have trace_id
// first.
type traceFirst struct{ prometheus.Metric }

// Write implements prometheus.Metric. The exemplars are the histogram's
// own, shared with its later scrapes: one in the wrong order is replaced
// by a copy, never reordered in place.
func (m traceFirst) Write(out *dto.Metric) error {
	if err := m.Metric.Write(out); err != nil {
		return err
	}
	h := out.GetHistogram()
	for _, b := range h.GetBucket() {
		b.Exemplar = traceIDFirst(b.Exemplar)
	}
	for i, e := range h.GetExemplars() {
		h.Exemplars[i] = traceIDFirst(e)
	}
	return nil
}

// traceIDFirst is e with its trace_id label first.
func traceIDFirst(e *dto.Exemplar) *dto.Exemplar {
	if e == nil || len(e.Label) < 2 || e.Label[0].GetName() == exemplarTraceID {
		return e
	}
	c := &dto.Exemplar{Value: e.Value, Timestamp: e.Timestamp, Label: make([]*dto.LabelPair, 0, len(e.Label))}
	for _, l := range e.Label {
		if l.GetName() == exemplarTraceID {
			c.Label = append(c.Label, l)
		}
	}
	for _, l := range e.Label {
		if l.GetName() != exemplarTraceID {
			c.Label = append(c.Label, l)
		}
	}
	return c
}
