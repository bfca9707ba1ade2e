package live

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// Buckets of the server's own timings beside the client's.
var (
	// The client's overhead: the client's TTFT less the engine's share,
	// tens of microseconds on loopback to seconds behind a busy gateway,
	// and below zero by a server's rounding (whole milliseconds: TGI).
	overheadBuckets = []float64{-.005, -.001, 0, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// Speculative decoding's mean tokens per verification step, from 1
	// (no draft accepted) to the draft length and one.
	acceptanceLengthBuckets = []float64{1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 8, 10}
	// The share of draft tokens accepted.
	acceptanceRateBuckets = []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9, 1}
)

// serverTimingMetrics are the engine's own timings of each successful
// request, read from its answer (observation.ServerTimings), and the
// client's overhead that joins them to the client's clock.
type serverTimingMetrics struct {
	queue, ttft, generation, overhead *prometheus.HistogramVec
	acceptanceLength, acceptanceRate  *prometheus.HistogramVec
	results                           *prometheus.CounterVec
}

func newServerTimingMetrics(reg prometheus.Registerer) *serverTimingMetrics {
	m := &serverTimingMetrics{
		queue: histogram("server_queue_seconds",
			"The engine's own queue time of each successful request, as its answer reported it (vLLM queue_time_ms, TGI x-queue-time).", latencyBuckets),
		ttft: histogram("server_time_to_first_token_seconds",
			"The engine's own TTFT of each successful request: vLLM's from scheduling, llama.cpp's prompt_ms, Ollama's load and prompt evaluation.", latencyBuckets),
		generation: histogram("server_generation_seconds",
			"The engine's own time from the first to the last token of each successful request, as its answer reported it.", latencyBuckets),
		overhead: histogram("client_overhead_seconds",
			"Client TTFT less the engine's queue and own TTFT: network, gateway, front end, client; below 0 only by the server's clock resolution.", overheadBuckets),
		acceptanceLength: histogram("server_spec_decode_acceptance_length",
			"Speculative decoding's mean tokens per verification step of each successful request, bonus token included, as the engine reported it.", acceptanceLengthBuckets),
		acceptanceRate: histogram("server_spec_decode_acceptance_rate",
			"Speculative decoding's share of draft tokens accepted in each successful request, as the engine reported it.", acceptanceRateBuckets),
		results: counterVec("server_timings_total",
			"Successful requests by the engine's timings in the answer: decomposed (its TTFT given), partial (some timings, no TTFT), absent.", with(labels, "result")),
	}
	reg.MustRegister(exemplarVec{m.queue}, exemplarVec{m.ttft}, exemplarVec{m.generation}, exemplarVec{m.overhead},
		exemplarVec{m.acceptanceLength}, exemplarVec{m.acceptanceRate}, m.results)
	return m
}

func (m *serverTimingMetrics) delete(match prometheus.Labels) {
	deleteMatching(match, m.queue, m.ttft, m.generation, m.overhead, m.acceptanceLength, m.acceptanceRate, m.results)
}

// serverTimingSeries is one workload's series of them.
type serverTimingSeries struct {
	queue, ttft, generation, overhead *exemplarHistogram
	acceptanceLength, acceptanceRate  *exemplarHistogram
	results                           map[string]prometheus.Counter // by observation.TimingsResults
}

// series binds them to a workload's label values lv; every result's
// counter starts at zero.
func (m *serverTimingMetrics) series(lv []string) serverTimingSeries {
	s := serverTimingSeries{
		queue:            newExemplarHistogram(m.queue.WithLabelValues(lv...), latencyBuckets),
		ttft:             newExemplarHistogram(m.ttft.WithLabelValues(lv...), latencyBuckets),
		generation:       newExemplarHistogram(m.generation.WithLabelValues(lv...), latencyBuckets),
		overhead:         newExemplarHistogram(m.overhead.WithLabelValues(lv...), overheadBuckets),
		acceptanceLength: newExemplarHistogram(m.acceptanceLength.WithLabelValues(lv...), acceptanceLengthBuckets),
		acceptanceRate:   newExemplarHistogram(m.acceptanceRate.WithLabelValues(lv...), acceptanceRateBuckets),
		results:          make(map[string]prometheus.Counter, len(observation.TimingsResults)),
	}
	for _, r := range observation.TimingsResults {
		s.results[r] = m.results.WithLabelValues(with(lv, r)...)
	}
	return s
}

// observe records a successful request's timings, each where its server
// reported it, at the request's end (the answer's last frame carries
// them). The overhead is observed as measured, negative included.
func (s *serverTimingSeries) observe(o *observation.Request) {
	s.results[o.TimingsResult()].Inc()
	t := &o.Server
	if t.Queue.OK {
		s.queue.observe(t.Queue.D.Seconds(), o.End, o.Trace)
	}
	if t.TTFT.OK {
		s.ttft.observe(t.TTFT.D.Seconds(), o.End, o.Trace)
	}
	if t.Generation.OK {
		s.generation.observe(t.Generation.D.Seconds(), o.End, o.Trace)
	}
	if d, ok := o.ClientOverhead(); ok {
		s.overhead.observe(d.Seconds(), o.End, o.Trace)
	}
	if t.AcceptanceLength.OK {
		s.acceptanceLength.observe(t.AcceptanceLength.V, o.End, o.Trace)
	}
	if t.AcceptanceRate.OK {
		s.acceptanceRate.observe(t.AcceptanceRate.V, o.End, o.Trace)
	}
}
