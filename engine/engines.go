package engine

import (
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// This file is the mapping from each engine's own metric names to the
// normalised infer_server_* series. Every source was checked against the
// engine's documentation or source (docs/metrics.md "Server metrics" lists them with
// their units). Each ratio below is already 0..1 at the source, whatever its
// name says ("perc", "usage", "utilization"): vLLM's kv_cache_usage_perc and
// gpu_cache_usage_perc ("1 means 100 percent usage"), SGLang's token_usage
// (used / total KV tokens), llama.cpp's kv_cache_usage_ratio, TensorRT-LLM's
// kv_cache_block_metrics{kv_cache_block_type="fraction"}, trtllm-serve's
// trtllm_kv_cache_utilization and NIM's gpu_cache_usage_perc. None is
// rescaled, so a value is never bent into range: what the engine says is
// what is exposed.

// Engine names as the engine label carries them.
const (
	engineVLLM        = "vllm"
	engineSGLang      = "sglang"
	engineTGI         = "tgi"
	engineLlamaCpp    = "llamacpp"
	engineOllama      = "ollama"
	engineTriton      = "triton"
	engineTRTLLMServe = "trtllm-serve"
	engineNIM         = "nim"
	engineUnknown     = "unknown"
)

// quantity is one normalised series.
type quantity int

const (
	qRunning quantity = iota
	qWaiting
	qKVUsage
	qPrefixHits
	qPrefixQueries
	qPreemptions
	qPromptTokens
	qGenerationTokens
	numQuantities
)

// histQuantity is one normalised histogram: the engine's buckets passed
// through (docs/metrics.md gives each source's clock and unit).
type histQuantity int

const (
	hTTFT histQuantity = iota
	hQueueTime
	hPrefillTime
	hDecodeTime
	hPromptTokens
	hGenerationTokens
	numHistQuantities
)

// reasons are the normalised values of infer_server_requests_finished_total's
// reason label, in the order the series are exposed: a fixed set, so that
// an engine's new or misspelt reason never grows the label's values (it is
// counted as "other").
var reasons = [numReasons]string{"stop", "length", "abort", "error", "other"}

const (
	numReasons  = 5
	reasonOther = numReasons - 1
)

// Reasons returns the normalised finish reasons, in the order of
// Info.Finished.
func Reasons() [numReasons]string { return reasons }

// reasonIndex is the index in Reasons of a normalised reason.
func reasonIndex(r string) int {
	for i, n := range reasons {
		if n == r {
			return i
		}
	}
	return reasonOther
}

// reasonSource is a counter of finished requests whose label says why each
// finished: reasons maps the engine's values to the normalised ones; a
// value it does not list, or a series without the label, is "other".
type reasonSource struct {
	family  string
	label   string
	reasons map[string]string
}

// source is one engine series that gives a quantity: a family, optionally
// restricted to the series whose labels match. histSum reads the sum of a
// histogram family instead of a sample's value: a token counter that an
// engine keeps only as the sum of a per-request length histogram (TGI,
// Triton's TensorRT-LLM backend).
type source struct {
	family  string
	match   map[string]string
	histSum bool
}

// loraSource is vLLM's LoRA info gauge: one series per combination of its
// labels, the value the wall-clock time vLLM last set it, so the latest
// series (the highest value) is the state now; the running and waiting
// labels list adapter names, comma-separated; max the static limit.
type loraSource struct {
	family, running, waiting, max string
}

// engineMapping says where an engine keeps each quantity. Each quantity has
// a list of sources, tried in order (names changed across versions): the
// first family present in the scrape wins.
type engineMapping struct {
	name string
	// prefixes of metric names that identify the engine.
	prefixes []string
	// modelLabel is the label that names the model, when the engine has one.
	modelLabel string
	// health is the readiness endpoint under the server root: 200 when
	// the server can serve (readiness.go).
	health  string
	sources [numQuantities][]source
	// histograms are tried in order like sources; finished likewise.
	histograms [numHistQuantities][]source
	finished   []reasonSource
	lora       *loraSource
	kvCache    *kvCacheSource
}

// hsum is a source that reads the sum of histogram family's observations.
func hsum(family string, kv ...string) source {
	s := src(family, kv...)
	s.histSum = true
	return s
}

func src(family string, kv ...string) source {
	s := source{family: family}
	if len(kv) > 0 {
		s.match = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			s.match[kv[i]] = kv[i+1]
		}
	}
	return s
}

// engineMappings is the table. Detection tries it in order, so the more
// specific prefixes come first (NIM's unprefixed names last).
var engineMappings = []engineMapping{
	{
		name: engineVLLM, prefixes: []string{"vllm:"}, modelLabel: "model_name", health: "/health",
		sources: [numQuantities][]source{
			qRunning: {src("vllm:num_requests_running")},
			qWaiting: {src("vllm:num_requests_waiting")},
			// v0.10 and later; before, gpu_cache_usage_perc.
			qKVUsage: {src("vllm:kv_cache_usage_perc"), src("vllm:gpu_cache_usage_perc")},
			// Tokens. v0.10 and later; before (V1 engine, 0.8-0.9), gpu_prefix_cache_*.
			qPrefixHits:    {src("vllm:prefix_cache_hits_total"), src("vllm:gpu_prefix_cache_hits_total")},
			qPrefixQueries: {src("vllm:prefix_cache_queries_total"), src("vllm:gpu_prefix_cache_queries_total")},
			qPreemptions:   {src("vllm:num_preemptions_total")},
			// Tokens, the same names in V0 and V1 (the V1 fixture carries
			// them; vllm/v1/metrics/loggers.py "Number of prefill tokens
			// processed." / "Number of generation tokens processed."):
			// counted as the engine computes them, every request's.
			qPromptTokens:     {src("vllm:prompt_tokens_total")},
			qGenerationTokens: {src("vllm:generation_tokens_total")},
		},
		// vLLM's docs/design/metrics.md, "LoRA Metrics": a gauge whose
		// value is the wall-clock time and whose labels
		// running_lora_adapters and waiting_lora_adapters list adapters,
		// comma-separated; max_lora is --max-loras. Only with
		// --enable-lora.
		lora: &loraSource{family: "vllm:lora_requests_info", running: "running_lora_adapters",
			waiting: "waiting_lora_adapters", max: "max_lora"},
		// The same name in V0 and V1 (kvcache.go says what its labels are).
		kvCache: &kvCacheSource{family: "vllm:cache_config_info", blockSize: "block_size", blocks: "num_gpu_blocks"},
		// The same names in V0 and V1 (vLLM's docs/design/metrics.md lists
		// them among the v0 metrics, and the V1 fixture carries them). The
		// request's phases are observed when it finishes: queue = first
		// scheduled - queued, prefill = first token - first scheduled,
		// decode = last token - first token.
		histograms: [numHistQuantities][]source{
			hTTFT:             {src("vllm:time_to_first_token_seconds")},
			hQueueTime:        {src("vllm:request_queue_time_seconds")},
			hPrefillTime:      {src("vllm:request_prefill_time_seconds")},
			hDecodeTime:       {src("vllm:request_decode_time_seconds")},
			hPromptTokens:     {src("vllm:request_prompt_tokens")},
			hGenerationTokens: {src("vllm:request_generation_tokens")},
		},
		// vllm/v1/engine/__init__.py FINISH_REASON_STRINGS: stop, length,
		// abort, error, repetition (the last two in newer versions;
		// repetition, a detected loop, is counted as other).
		finished: []reasonSource{{family: "vllm:request_success_total", label: "finished_reason",
			reasons: map[string]string{"stop": "stop", "length": "length", "abort": "abort", "error": "error"}}},
	},
	{
		name: engineSGLang, prefixes: []string{"sglang:"}, modelLabel: "model_name", health: "/health",
		sources: [numQuantities][]source{
			qRunning: {src("sglang:num_running_reqs")},
			qWaiting: {src("sglang:num_queue_reqs")},
			qKVUsage: {src("sglang:token_usage")},
			// Tokens, counted per finished request: cached prompt tokens
			// out of all prompt tokens.
			qPrefixHits:    {src("sglang:cached_tokens_total")},
			qPrefixQueries: {src("sglang:prompt_tokens_total")},
			// Retraction is SGLang's preemption (the counter; the older
			// sglang:num_retracted_reqs is a gauge of the last interval).
			qPreemptions: {src("sglang:num_retracted_requests_total")},
			// Tokens (the recorded scrape carries both;
			// sglang/srt/metrics/collector.py): counted per finished
			// request, so a request in flight adds its tokens when it
			// ends. SGLang's LoRA metrics (sglang:lora_pool_slots_used,
			// _total) count adapter slots in GPU memory, not adapters by
			// request state: not mapped to infer_server_lora_adapters.
			qPromptTokens:     {src("sglang:prompt_tokens_total")},
			qGenerationTokens: {src("sglang:generation_tokens_total")},
		},
		// sglang/srt/metrics/collector.py: TTFT from the tokenizer
		// manager's receipt of the request; queue_time_seconds from the
		// scheduler; the length histograms only with
		// --collect-tokens-histogram. SGLang counts finished requests
		// without a reason (num_requests_total, num_aborted_requests_total):
		// no finish reasons.
		histograms: [numHistQuantities][]source{
			hTTFT:             {src("sglang:time_to_first_token_seconds")},
			hQueueTime:        {src("sglang:queue_time_seconds")},
			hPromptTokens:     {src("sglang:prompt_tokens_histogram")},
			hGenerationTokens: {src("sglang:generation_tokens_histogram")},
		},
	},
	{
		name: engineTGI, prefixes: []string{"tgi_"}, health: "/health",
		sources: [numQuantities][]source{
			qRunning: {src("tgi_batch_current_size")},
			qWaiting: {src("tgi_queue_size")},
			// TGI keeps no token counter: the sums of its per-request
			// length histograms are one (router/src/server.rs observes
			// tgi_request_generated_tokens when a request succeeds, and
			// router/src/validation.rs tgi_request_input_length when a
			// request is validated), so failed requests' output is not
			// counted. The recorded scrape carries the input length.
			qPromptTokens:     {hsum("tgi_request_input_length")},
			qGenerationTokens: {hsum("tgi_request_generated_tokens")},
		},
		// TGI's docs (reference/metrics): queue time in seconds, input and
		// generated lengths in tokens per request. TGI has no TTFT, no
		// per-request prefill or decode time, and counts successes and
		// failures by error kind, not finish reasons.
		histograms: [numHistQuantities][]source{
			hQueueTime:        {src("tgi_request_queue_duration")},
			hPromptTokens:     {src("tgi_request_input_length")},
			hGenerationTokens: {src("tgi_request_generated_tokens")},
		},
	},
	{
		name: engineLlamaCpp, prefixes: []string{"llamacpp:"}, health: "/health",
		sources: [numQuantities][]source{
			qRunning: {src("llamacpp:requests_processing")},
			qWaiting: {src("llamacpp:requests_deferred")},
			// Removed from newer builds: then read from /slots.
			qKVUsage: {src("llamacpp:kv_cache_usage_ratio")},
			// tools/server/server.cpp's /metrics (--metrics): "Number of
			// prompt tokens processed." and "Number of generation tokens
			// processed.", counted per finished task.
			qPromptTokens:     {src("llamacpp:prompt_tokens_total")},
			qGenerationTokens: {src("llamacpp:tokens_predicted_total")},
		},
	},
	{
		// KServe v2's readiness endpoint.
		name: engineTriton, prefixes: []string{"nv_trt_llm_", "nv_inference_"}, modelLabel: "model", health: "/v2/health/ready",
		sources: [numQuantities][]source{
			qRunning: {src("nv_trt_llm_request_metrics", "request_type", "scheduled")},
			// The TensorRT-LLM backend's queue; without it, Triton's own
			// per-model count of requests awaiting execution.
			qWaiting: {src("nv_trt_llm_request_metrics", "request_type", "waiting"), src("nv_inference_pending_request_count")},
			qKVUsage: {src("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "fraction")},
			// The TensorRT-LLM backend's per-response token histograms
			// (inflight_batcher_llm/src/custom_metrics_reporter/
			// custom_metrics_reporter.cc: nv_llm_output_token_len
			// {response_metric_type="total_output_tokens"} and
			// nv_llm_input_token_len{response_metric_type=
			// "total_input_tokens"}); their sums are the token counters.
			// Not in the recorded scrapes, which predate them.
			qPromptTokens:     {hsum("nv_llm_input_token_len", "response_metric_type", "total_input_tokens")},
			qGenerationTokens: {hsum("nv_llm_output_token_len", "response_metric_type", "total_output_tokens")},
		},
	},
	{
		name: engineTRTLLMServe, prefixes: []string{"trtllm_"}, modelLabel: "model_name", health: "/health",
		sources: [numQuantities][]source{
			qRunning: {src("trtllm_num_requests_running")},
			qWaiting: {src("trtllm_num_requests_waiting")},
			qKVUsage: {src("trtllm_kv_cache_utilization")},
		},
	},
	{
		name: engineNIM, prefixes: []string{"num_requests_running", "gpu_cache_usage_perc"}, modelLabel: "model_name", health: "/v1/health/ready",
		sources: [numQuantities][]source{
			qRunning: {src("num_requests_running")},
			qWaiting: {src("num_requests_waiting")},
			qKVUsage: {src("gpu_cache_usage_perc")},
		},
	},
	// Ollama serves no /metrics; it is detected from /api/version and has
	// only infer_server_up and infer_server_info. Its root answers 200
	// "Ollama is running" once the server is up.
	{name: engineOllama, health: "/"},
}

func mappingFor(engine string) *engineMapping {
	for i := range engineMappings {
		if engineMappings[i].name == engine {
			return &engineMappings[i]
		}
	}
	return nil
}

// engineFamilies lists the metric families the mapping reads for engine,
// each once, in the table's order; none for an engine without metrics.
func engineFamilies(engine string) []string {
	m := mappingFor(engine)
	if m == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, srcs := range m.sources {
		for _, s := range srcs {
			add(s.family)
		}
	}
	for _, srcs := range m.histograms {
		for _, s := range srcs {
			add(s.family)
		}
	}
	for _, r := range m.finished {
		add(r.family)
	}
	if m.lora != nil {
		add(m.lora.family)
	}
	if m.kvCache != nil {
		add(m.kvCache.family)
	}
	return out
}

// detectEngine names the engine whose metric names the scrape carries, or
// "" when none does.
func detectEngine(fams map[string]*dto.MetricFamily) string {
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, m := range engineMappings {
		for _, p := range m.prefixes {
			for _, n := range names {
				if strings.HasPrefix(n, p) {
					return m.name
				}
			}
		}
	}
	return ""
}

// values are the normalised quantities of one scrape; has says which the
// engine reported. A histogram is reported when its OK is true; a finish
// reason when hasFinished says so.
type values struct {
	v   [numQuantities]float64
	has [numQuantities]bool

	hist        [numHistQuantities]Histogram
	finished    [numReasons]float64
	hasFinished [numReasons]bool

	// The LoRA adapters running and waiting (counts), and the engine's
	// max_lora (0: not reported), when hasLoRA.
	hasLoRA                  bool
	loraRunning, loraWaiting int
	maxLoRA                  int

	// kvCache is the engine's description of its KV cache (kvcache.go).
	kvCache KVCache
}

func (vs *values) set(q quantity, v float64) { vs.v[q], vs.has[q] = v, true }

// normalize reads the quantities of engine from a scrape. model is the
// target's model: where the engine labels series by model and one of them
// is this model, only those count. Counts are summed over the series left
// (data-parallel ranks, several models); the KV ratio is averaged. Series
// of a tensor-parallel rank other than 0 are dropped, because every TP rank
// reports the same scheduler state.
func normalize(engine string, fams map[string]*dto.MetricFamily, model string) values {
	var vs values
	m := mappingFor(engine)
	if m == nil {
		return vs
	}
	for q := quantity(0); q < numQuantities; q++ {
		for _, s := range m.sources[q] {
			mf := fams[s.family]
			if mf == nil {
				continue
			}
			if s.histSum {
				if h := aggregateHistogram(mf, pick(mf, s.match, m.modelLabel, model)); h.OK {
					vs.set(q, h.Sum)
				}
				break
			}
			v, ok := aggregate(mf, s.match, m.modelLabel, model, q == qKVUsage)
			if ok {
				vs.set(q, v)
			}
			break
		}
	}
	for h := histQuantity(0); h < numHistQuantities; h++ {
		for _, s := range m.histograms[h] {
			mf := fams[s.family]
			if mf == nil {
				continue
			}
			vs.hist[h] = aggregateHistogram(mf, pick(mf, s.match, m.modelLabel, model))
			break
		}
	}
	for _, r := range m.finished {
		mf := fams[r.family]
		if mf == nil {
			continue
		}
		for _, s := range pick(mf, nil, m.modelLabel, model) {
			v, ok := sampleValue(mf, s)
			if !ok {
				continue
			}
			engineReason, _ := labelValue(s, r.label)
			i := reasonOther
			if n, known := r.reasons[engineReason]; known {
				i = reasonIndex(n)
			}
			vs.finished[i] += v
			vs.hasFinished[i] = true
		}
		break
	}
	if m.lora != nil {
		if mf := fams[m.lora.family]; mf != nil {
			readLoRA(&vs, mf, *m.lora, m.modelLabel, model)
		}
	}
	if m.kvCache != nil {
		if mf := fams[m.kvCache.family]; mf != nil {
			readKVCache(&vs, mf, *m.kvCache, m.modelLabel, model)
		}
	}
	// Hits without queries (or the reverse) give no ratio and would read as
	// one: expose the pair or neither.
	if vs.has[qPrefixHits] != vs.has[qPrefixQueries] {
		vs.has[qPrefixHits], vs.has[qPrefixQueries] = false, false
	}
	return vs
}

func labelValue(m *dto.Metric, name string) (string, bool) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue(), true
		}
	}
	return "", false
}

func sampleValue(mf *dto.MetricFamily, m *dto.Metric) (float64, bool) {
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), m.Counter != nil
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), m.Gauge != nil
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), m.Untyped != nil
	}
	return 0, false
}

func aggregate(mf *dto.MetricFamily, match map[string]string, modelLabel, model string, mean bool) (float64, bool) {
	var sum float64
	n := 0
	for _, m := range pick(mf, match, modelLabel, model) {
		if v, ok := sampleValue(mf, m); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	if mean {
		return sum / float64(n), true
	}
	return sum, true
}

// pick returns the series of mf that count: those whose labels match,
// tensor-parallel rank 0 only (or no rank), and, where the engine labels
// series by model and some are of the target's model, only those.
func pick(mf *dto.MetricFamily, match map[string]string, modelLabel, model string) []*dto.Metric {
	var picked []*dto.Metric
series:
	for _, m := range mf.GetMetric() {
		for k, want := range match {
			if v, _ := labelValue(m, k); v != want {
				continue series
			}
		}
		if tp, ok := labelValue(m, "tp_rank"); ok && tp != "0" {
			continue
		}
		picked = append(picked, m)
	}
	if modelLabel != "" && model != "" {
		var same []*dto.Metric
		for _, m := range picked {
			if v, _ := labelValue(m, modelLabel); v == model {
				same = append(same, m)
			}
		}
		if len(same) > 0 {
			picked = same
		}
	}
	return picked
}

// maxMaxLoRA bounds the max_lora label of infer_server_info: vLLM's
// --max-loras is a small count of adapter slots in a batch; a value that is
// not a whole number from 1 to this is not believed and left out.
const maxMaxLoRA = 65536

// readLoRA reads vLLM's LoRA info gauge. vLLM sets a new series (new label
// values) to the current time whenever the adapters change and keeps the
// old ones, so the state now is the series of the highest value; with
// data-parallel ranks (an engine label) each rank's latest series counts,
// and an adapter running on two ranks is one adapter. The counts are of
// distinct non-empty names; the names themselves never become labels.
func readLoRA(vs *values, mf *dto.MetricFamily, ls loraSource, modelLabel, model string) {
	latest := map[string]*dto.Metric{}
	at := map[string]float64{}
	for _, m := range pick(mf, nil, modelLabel, model) {
		v, ok := sampleValue(mf, m)
		if !ok || v != v {
			continue
		}
		rank, _ := labelValue(m, "engine")
		if cur, seen := at[rank]; !seen || v > cur {
			latest[rank], at[rank] = m, v
		}
	}
	if len(latest) == 0 {
		return
	}
	running, waiting := map[string]bool{}, map[string]bool{}
	maxLoRA := 0
	for _, m := range latest {
		for label, set := range map[string]map[string]bool{ls.running: running, ls.waiting: waiting} {
			v, _ := labelValue(m, label)
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					set[name] = true
				}
			}
		}
		if v, ok := labelValue(m, ls.max); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 1 && n <= maxMaxLoRA {
				maxLoRA = max(maxLoRA, n)
			}
		}
	}
	vs.hasLoRA, vs.loraRunning, vs.loraWaiting, vs.maxLoRA = true, len(running), len(waiting), maxLoRA
}
