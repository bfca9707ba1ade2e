package prober

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// The engine's own timings of the probe's successful requests, as their
// answers reported them (observation.ServerTimings), beside the client's:
// the continuous probe's infer_probe_server_* and
// infer_probe_client_overhead_seconds in the probe's summaries.
var (
	descServerQueue      = prometheus.NewDesc("probe_server_queue_seconds", "The engine's own queue time over the probe's successful requests whose answers reported it (exact quantiles; 1 is the maximum).", nil, nil)
	descServerTTFT       = prometheus.NewDesc("probe_server_time_to_first_token_seconds", "The engine's own TTFT over the probe's successful requests that reported it: vLLM's from scheduling, llama.cpp's prompt_ms, Ollama's.", nil, nil)
	descServerGeneration = prometheus.NewDesc("probe_server_generation_seconds", "The engine's own time from first to last token over the probe's successful requests whose answers reported it.", nil, nil)
	descClientOverhead   = prometheus.NewDesc("probe_client_overhead_seconds", "Client TTFT less the engine's queue and own TTFT, over the probe's decomposed requests: network, gateway, server front end and client.", nil, nil)
	descAcceptLength     = prometheus.NewDesc("probe_server_spec_decode_acceptance_length", "Speculative decoding's mean tokens per verification step over the probe's successful requests whose answers reported it.", nil, nil)
	descAcceptRate       = prometheus.NewDesc("probe_server_spec_decode_acceptance_rate", "Speculative decoding's share of draft tokens accepted over the probe's successful requests whose answers reported it.", nil, nil)
	descServerTimings    = prometheus.NewDesc("probe_server_timings", "The probe's successful requests by what the engine's answer said of their time: decomposed (its TTFT), partial (some timings), absent.", []string{"result"}, nil)
)

// collectServerTimings sends the timings' summaries (none where no answer
// reported one) and the successful requests by timings result.
func collectServerTimings(ch chan<- prometheus.Metric, requests []observation.Request) {
	var queue, ttft, generation, overhead, length, rate []float64
	results := map[string]int{}
	for i := range requests {
		o := &requests[i]
		if o.Outcome != observation.Success {
			continue
		}
		results[o.TimingsResult()]++
		t := &o.Server
		if t.Queue.OK {
			queue = append(queue, t.Queue.D.Seconds())
		}
		if t.TTFT.OK {
			ttft = append(ttft, t.TTFT.D.Seconds())
		}
		if t.Generation.OK {
			generation = append(generation, t.Generation.D.Seconds())
		}
		if d, ok := o.ClientOverhead(); ok {
			overhead = append(overhead, d.Seconds())
		}
		if t.AcceptanceLength.OK {
			length = append(length, t.AcceptanceLength.V)
		}
		if t.AcceptanceRate.OK {
			rate = append(rate, t.AcceptanceRate.V)
		}
	}
	for _, r := range observation.TimingsResults {
		ch <- prometheus.MustNewConstMetric(descServerTimings, prometheus.GaugeValue, float64(results[r]), r)
	}
	summary(ch, descServerQueue, queue)
	summary(ch, descServerTTFT, ttft)
	summary(ch, descServerGeneration, generation)
	summary(ch, descClientOverhead, overhead)
	summary(ch, descAcceptLength, length)
	summary(ch, descAcceptRate, rate)
}
