package live

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// chunkEvery is the series' clock step per streamed chunk in the
// benchmarks below: 62,379 chunks/s, what one client core holds
// (docs/benchmarks.md), so that anything the series does per interval of
// real time is charged at the rate a busy workload would meet it.
const chunkEvery = 16 * time.Microsecond

// BenchmarkSeriesToken is the live series' cost per streamed chunk of a
// traced request: the streamed-token counter and the inter-token gap. The
// gaps cycle through 0.5 to 25 ms, so that they fall in many buckets.
func BenchmarkSeriesToken(b *testing.B) {
	s := NewMetrics(prometheus.NewRegistry()).Series("t", "m", "w", config.SLO{})
	o := &observation.Request{
		Trace:      observation.Trace{TraceID: [16]byte{1}, SpanID: [8]byte{1}, Sampled: true},
		TokenTimes: make([]time.Time, 2),
	}
	now := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		now = now.Add(chunkEvery)
		gap := time.Duration((i*7)%50+1) * 500 * time.Microsecond
		o.TokenTimes[0], o.TokenTimes[1] = now.Add(-gap), now
		o.ContentEvents = 2 + i%64
		s.Token(o)
	}
}

// BenchmarkSeriesRequest is the live series' cost per traced request of
// 32 tokens at its ends: its first token (TTFT) and its end (E2E, TPOT,
// the counters), without the chunks between (BenchmarkSeriesToken).
func BenchmarkSeriesRequest(b *testing.B) {
	s := NewMetrics(prometheus.NewRegistry()).Series("t", "m", "w", config.SLO{})
	o := &observation.Request{
		Trace:   observation.Trace{TraceID: [16]byte{1}, SpanID: [8]byte{1}, Sampled: true},
		Outcome: observation.Success, OutputTokens: 32, ContentEvents: 32, PromptTokens: 100,
		TokenSource: observation.TokensFromUsage,
	}
	now := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		// One request's 32 chunks of the series' clock: 512 µs.
		now = now.Add(32 * chunkEvery)
		ttft := time.Duration(i%200+1) * time.Millisecond
		o.Scheduled = now.Add(-ttft - 320*time.Millisecond)
		o.Sent = o.Scheduled.Add(50 * time.Microsecond)
		o.FirstToken = now.Add(-320 * time.Millisecond)
		o.End = now
		s.FirstToken(o)
		s.Done(o)
	}
}

// BenchmarkExemplarObserve is what exemplarEvery saves: one of our
// histograms' series observed plainly, and with an exemplar at every call
// (client_golang's ObserveWithExemplar, the exemplar's protobuf built and
// the native histogram's exemplars kept under a lock each time).
func BenchmarkExemplarObserve(b *testing.B) {
	h := histogram("x_seconds", "x", tokenBuckets).WithLabelValues("t", "m", "w")
	traceID, spanID := observation.Trace{TraceID: [16]byte{1}, SpanID: [8]byte{1}}.IDs()
	labels := prometheus.Labels{exemplarTraceID: traceID, exemplarSpanID: spanID}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			h.Observe(float64(i%100) * 0.001)
		}
	})
	b.Run("exemplar", func(b *testing.B) {
		b.ReportAllocs()
		eo := h.(prometheus.ExemplarObserver)
		for i := range b.N {
			eo.ObserveWithExemplar(float64(i%100)*0.001, labels)
		}
	})
}
