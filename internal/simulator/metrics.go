package simulator

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Finish reasons, as vLLM's finished_reason label spells them.
const (
	finishStop   = "stop"
	finishLength = "length"
	finishAbort  = "abort"
)

// metrics are the vLLM v1 series the simulator exposes. They live in a
// registry of their own, so several simulators can run in one process.
type metrics struct {
	running, waiting, kvUsage      prometheus.Gauge
	prefixQueries, prefixHits      prometheus.Counter
	preemptions                    prometheus.Counter
	promptTokens, generationTokens prometheus.Counter
	success                        map[string]prometheus.Counter
	ttft, itl, e2e                 prometheus.Histogram
	// Observed when a request finishes (not when it is aborted), as
	// vLLM's finished-request stats: queue = first admission - arrival,
	// prefill = first token - first admission, decode = last token -
	// first token; the prompt's and the output's tokens.
	queue, prefill, decode         prometheus.Histogram
	promptLength, generationLength prometheus.Histogram
}

// Bucket boundaries follow vLLM's, so that quantiles computed from the
// simulator's histograms have the same resolution as a real server's.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// tokenBuckets are vLLM's buckets of the per-request token histograms
// (build_1_2_5_buckets): 1, 2, 5, 10, 20, 50, ... up to the context
// length.
func tokenBuckets(maxModelLen int) []float64 {
	var out []float64
	for m := 1; ; m *= 10 {
		for _, k := range []int{1, 2, 5} {
			if k*m > maxModelLen {
				return out
			}
			out = append(out, float64(k*m))
		}
	}
}

func newMetrics(reg prometheus.Registerer, model string, maxModelLen int) *metrics {
	labels := prometheus.Labels{"model_name": model}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	m := &metrics{
		running:          gauge("vllm:num_requests_running", "Number of requests in the running batch (including paused ones)."),
		waiting:          gauge("vllm:num_requests_waiting", "Number of requests waiting to be admitted (including preempted ones)."),
		kvUsage:          gauge("vllm:kv_cache_usage_perc", "Fraction of KV-cache blocks in use, 0..1 (1 = full)."),
		prefixQueries:    counter("vllm:prefix_cache_queries_total", "Tokens looked up in the prefix cache at admission."),
		prefixHits:       counter("vllm:prefix_cache_hits_total", "Tokens found in the prefix cache at admission."),
		preemptions:      counter("vllm:num_preemptions_total", "Sequences preempted (recompute) because the KV cache was full."),
		promptTokens:     counter("vllm:prompt_tokens_total", "Prompt tokens of requests that produced their first token."),
		generationTokens: counter("vllm:generation_tokens_total", "Generated tokens."),
		ttft:             histogram("vllm:time_to_first_token_seconds", "Wall time from arrival to the step that sampled the first token, in seconds.", ttftBuckets),
		itl:              histogram("vllm:inter_token_latency_seconds", "Wall time between consecutive tokens of a request, in seconds.", itlBuckets),
		e2e:              histogram("vllm:e2e_request_latency_seconds", "Wall time from arrival to the step that sampled the last token, in seconds.", e2eBuckets),
		// vLLM's request-phase histograms share the e2e buckets.
		queue:            histogram("vllm:request_queue_time_seconds", "Wall time from arrival to the request's first admission (WAITING), in seconds.", e2eBuckets),
		prefill:          histogram("vllm:request_prefill_time_seconds", "Wall time from the first admission to the step that sampled the first token (PREFILL), in seconds.", e2eBuckets),
		decode:           histogram("vllm:request_decode_time_seconds", "Wall time from the first token's step to the last token's (DECODE), in seconds.", e2eBuckets),
		promptLength:     histogram("vllm:request_prompt_tokens", "Prompt tokens of each finished request.", tokenBuckets(maxModelLen)),
		generationLength: histogram("vllm:request_generation_tokens", "Generated tokens of each finished request.", tokenBuckets(maxModelLen)),
		success:          make(map[string]prometheus.Counter),
	}
	sv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "vllm:request_success_total",
		Help:        "Finished requests, by finish reason (abort = the client went away).",
		ConstLabels: labels,
	}, []string{"finished_reason"})
	reg.MustRegister(sv)
	for _, r := range []string{finishStop, finishLength, finishAbort} {
		m.success[r] = sv.WithLabelValues(r)
	}
	return m
}

// registerCacheConfig registers vLLM's description of its KV cache,
// vllm:cache_config_info: an info gauge, always 1, whose labels are the
// engine's CacheConfig fields as strings (vllm/v1/metrics/loggers.py,
// log_metrics_info, which also adds the engine index). The simulator
// gives the fields a client reads, the capacity among them: block_size
// and num_gpu_blocks, the cache KVBlocks blocks of BlockSize tokens.
func registerCacheConfig(reg prometheus.Registerer, blockSize, kvBlocks int) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info",
		Help: "Information of the LLMEngine CacheConfig",
		ConstLabels: prometheus.Labels{
			"block_size":            strconv.Itoa(blockSize),
			"num_gpu_blocks":        strconv.Itoa(kvBlocks),
			"num_cpu_blocks":        "0",
			"cache_dtype":           "auto",
			"enable_prefix_caching": "True",
			"engine":                "0",
		},
	})
	g.Set(1)
	reg.MustRegister(g)
}

// maxLoRASeries bounds the label sets loraInfo keeps: vLLM keeps every
// one it ever set; the simulator forgets the oldest beyond this many.
const maxLoRASeries = 64

// loraInfo is vLLM's LoRA gauge (docs/design/metrics.md, "LoRA Metrics"),
// vllm:lora_requests_info{max_lora, running_lora_adapters,
// waiting_lora_adapters}, as vLLM with --enable-lora sets it: the adapters
// with requests running and waiting, each list comma-joined, and the
// value the wall-clock time it was last set. As vLLM does, a change of the
// adapters sets a new series and the old ones stay, so the state now is
// the series of the highest value; the simulator also sets the current
// series to the time of each scrape, and keeps at most maxLoRASeries
// series (the oldest go). Values only grow: a series set later is never
// below one set before.
type loraInfo struct {
	desc *prometheus.Desc
	max  string
	now  func() time.Time

	mu      sync.Mutex
	running string // the current state
	waiting string
	series  map[[2]string]float64 // running, waiting -> value
	last    float64               // the highest value given
}

func newLoRAInfo(maxLoRA int, now func() time.Time) *loraInfo {
	return &loraInfo{
		desc: prometheus.NewDesc("vllm:lora_requests_info", "Running stats on lora requests.",
			[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, nil),
		max:    strconv.Itoa(maxLoRA),
		now:    now,
		series: map[[2]string]float64{},
	}
}

// setLocked sets the current series to the time now, above every value
// given before.
func (l *loraInfo) setLocked() {
	v := float64(l.now().UnixNano()) / 1e9
	if v <= l.last {
		v = math.Nextafter(l.last, math.Inf(1))
	}
	l.last = v
	key := [2]string{l.running, l.waiting}
	if _, ok := l.series[key]; !ok && len(l.series) >= maxLoRASeries {
		var oldest [2]string
		first := true
		for k, t := range l.series {
			if first || t < l.series[oldest] {
				oldest, first = k, false
			}
		}
		delete(l.series, oldest)
	}
	l.series[key] = v
}

// set records the adapters now running and waiting, comma-joined.
func (l *loraInfo) set(running, waiting string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if running == l.running && waiting == l.waiting && len(l.series) > 0 {
		return
	}
	l.running, l.waiting = running, waiting
	l.setLocked()
}

func (l *loraInfo) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

func (l *loraInfo) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked()
	for k, v := range l.series {
		ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, v, l.max, k[0], k[1])
	}
}
