package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// Engine names: which inference server the simulator impersonates. Every
// engine is the same continuous-batching model with the same ground truth;
// the engine decides the native generation API, the info endpoints, the
// tokenizer endpoint's format and the names under which /metrics exposes
// the engine's state.
const (
	EngineVLLM        = "vllm"         // vLLM 0.10 and later (V1 metric names)
	EngineVLLMLegacy  = "vllm-legacy"  // vLLM before 0.10 (vllm:gpu_cache_usage_perc, vllm:gpu_prefix_cache_*)
	EngineSGLang      = "sglang"       // SGLang: POST /generate, sglang:* metrics
	EngineTGI         = "tgi"          // Text Generation Inference: POST /generate_stream, tgi_* metrics
	EngineLlamaCpp    = "llamacpp"     // llama.cpp server: POST /completion, llamacpp:* metrics
	EngineOllama      = "ollama"       // Ollama: POST /api/generate and /api/chat (NDJSON), no /metrics
	EngineTriton      = "triton"       // Triton with TensorRT-LLM: POST /v2/models/<model>/generate_stream, nv_trt_llm_* metrics
	EngineTRTLLMServe = "trtllm-serve" // trtllm-serve: the OpenAI API, trtllm_* metrics
)

// Engines lists the engine names, in a stable order.
func Engines() []string {
	return []string{EngineVLLM, EngineVLLMLegacy, EngineSGLang, EngineTGI, EngineLlamaCpp, EngineOllama, EngineTriton, EngineTRTLLMServe}
}

func validEngine(e string) bool {
	for _, n := range Engines() {
		if e == n {
			return true
		}
	}
	return false
}

// servesOpenAI reports whether the real engine serves the OpenAI-compatible
// API (/v1/completions, /v1/chat/completions, /v1/models). Triton's HTTP
// front end does not.
func servesOpenAI(engine string) bool { return engine != EngineTriton }

// engineRenames maps, per engine, the simulator's vLLM v1 metric names to
// the engine's own. Families not listed are not exposed by that engine.
// The values are the same engine state: only the names (and, for engines
// whose metrics carry no labels, the model_name label) change.
var engineRenames = map[string]map[string]string{
	EngineVLLMLegacy: {
		"vllm:num_requests_running":        "vllm:num_requests_running",
		"vllm:num_requests_waiting":        "vllm:num_requests_waiting",
		"vllm:kv_cache_usage_perc":         "vllm:gpu_cache_usage_perc",
		"vllm:prefix_cache_queries_total":  "vllm:gpu_prefix_cache_queries_total",
		"vllm:prefix_cache_hits_total":     "vllm:gpu_prefix_cache_hits_total",
		"vllm:num_preemptions_total":       "vllm:num_preemptions_total",
		"vllm:prompt_tokens_total":         "vllm:prompt_tokens_total",
		"vllm:generation_tokens_total":     "vllm:generation_tokens_total",
		"vllm:request_success_total":       "vllm:request_success_total",
		"vllm:time_to_first_token_seconds": "vllm:time_to_first_token_seconds",
		// Before V1, vLLM called the gap between tokens "time per output
		// token".
		"vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
		"vllm:e2e_request_latency_seconds": "vllm:e2e_request_latency_seconds",
		// The request-phase and length histograms, the same names in V0.
		"vllm:request_queue_time_seconds":   "vllm:request_queue_time_seconds",
		"vllm:request_prefill_time_seconds": "vllm:request_prefill_time_seconds",
		"vllm:request_decode_time_seconds":  "vllm:request_decode_time_seconds",
		"vllm:request_prompt_tokens":        "vllm:request_prompt_tokens",
		"vllm:request_generation_tokens":    "vllm:request_generation_tokens",
		// The Python server's process collector, as in V1 (load.go).
		"process_start_time_seconds": "process_start_time_seconds",
		// The cache's description, the same name and labels in V0
		// (vllm/engine/metrics.py).
		"vllm:cache_config_info": "vllm:cache_config_info",
		// The LoRA gauge, the same name in V0 (vLLM's metrics design
		// document lists it among the V0 metrics).
		"vllm:lora_requests_info": "vllm:lora_requests_info",
	},
	EngineSGLang: {
		"vllm:num_requests_running":        "sglang:num_running_reqs",
		"vllm:num_requests_waiting":        "sglang:num_queue_reqs",
		"vllm:kv_cache_usage_perc":         "sglang:token_usage",
		"vllm:prefix_cache_hits_total":     "sglang:cached_tokens_total",
		"vllm:prompt_tokens_total":         "sglang:prompt_tokens_total",
		"vllm:generation_tokens_total":     "sglang:generation_tokens_total",
		"vllm:num_preemptions_total":       "sglang:num_retracted_requests_total",
		"vllm:time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
		"vllm:inter_token_latency_seconds": "sglang:inter_token_latency_seconds",
		"vllm:e2e_request_latency_seconds": "sglang:e2e_request_latency_seconds",
		// sglang/srt/metrics/collector.py; the length histograms are
		// SGLang's with --collect-tokens-histogram.
		"vllm:request_queue_time_seconds": "sglang:queue_time_seconds",
		"vllm:request_prompt_tokens":      "sglang:prompt_tokens_histogram",
		"vllm:request_generation_tokens":  "sglang:generation_tokens_histogram",
	},
	EngineTGI: {
		"vllm:num_requests_running": "tgi_batch_current_size",
		"vllm:num_requests_waiting": "tgi_queue_size",
		// TGI's docs (reference/metrics).
		"vllm:request_queue_time_seconds": "tgi_request_queue_duration",
		"vllm:request_prompt_tokens":      "tgi_request_input_length",
		"vllm:request_generation_tokens":  "tgi_request_generated_tokens",
	},
	EngineLlamaCpp: {
		"vllm:num_requests_running":    "llamacpp:requests_processing",
		"vllm:num_requests_waiting":    "llamacpp:requests_deferred",
		"vllm:kv_cache_usage_perc":     "llamacpp:kv_cache_usage_ratio",
		"vllm:prompt_tokens_total":     "llamacpp:prompt_tokens_total",
		"vllm:generation_tokens_total": "llamacpp:tokens_predicted_total",
	},
	EngineTRTLLMServe: {
		"vllm:num_requests_running":        "trtllm_num_requests_running",
		"vllm:num_requests_waiting":        "trtllm_num_requests_waiting",
		"vllm:kv_cache_usage_perc":         "trtllm_kv_cache_utilization",
		"vllm:time_to_first_token_seconds": "trtllm_time_to_first_token_seconds",
		"vllm:e2e_request_latency_seconds": "trtllm_e2e_request_latency_seconds",
	},
}

// engineUnlabelled lists the engines whose metrics carry no model label.
var engineUnlabelled = map[string]bool{EngineTGI: true, EngineLlamaCpp: true}

// metricsHandler serves /metrics in the engine's names. vLLM's is the
// registry itself; Ollama has no /metrics (it is not routed).
func (s *Simulator) metricsHandler() http.Handler {
	if s.cfg.Engine == EngineVLLM {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := s.registry.Gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out := s.engineFamilies(mfs)
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, mf := range out {
			if err := enc.Encode(mf); err != nil {
				return
			}
		}
	})
}

// engineFamilies renders the gathered vLLM families in the engine's names.
func (s *Simulator) engineFamilies(mfs []*dto.MetricFamily) []*dto.MetricFamily {
	if s.cfg.Engine == EngineTriton {
		return s.tritonFamilies(mfs)
	}
	renames := engineRenames[s.cfg.Engine]
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		to, ok := renames[mf.GetName()]
		if !ok {
			continue
		}
		c := proto.Clone(mf).(*dto.MetricFamily)
		c.Name = proto.String(to)
		if engineUnlabelled[s.cfg.Engine] {
			for _, m := range c.Metric {
				m.Label = nil
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// tritonFamilies renders the TensorRT-LLM backend's gauges, whose kind is a
// label: nv_trt_llm_request_metrics{request_type="scheduled"|"waiting"|"max"}
// and nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"|
// "max"|"tokens_per"}.
func (s *Simulator) tritonFamilies(mfs []*dto.MetricFamily) []*dto.MetricFamily {
	value := map[string]float64{}
	for _, mf := range mfs {
		if len(mf.Metric) == 1 {
			m := mf.Metric[0]
			switch {
			case m.Gauge != nil:
				value[mf.GetName()] = m.Gauge.GetValue()
			case m.Counter != nil:
				value[mf.GetName()] = m.Counter.GetValue()
			}
		}
	}
	gauge := func(name, help, kindLabel string, kinds []string, vals []float64) *dto.MetricFamily {
		mf := &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
		for i, k := range kinds {
			mf.Metric = append(mf.Metric, &dto.Metric{
				Label: []*dto.LabelPair{
					{Name: proto.String(kindLabel), Value: proto.String(k)},
					{Name: proto.String("model"), Value: proto.String(s.cfg.Model)},
					{Name: proto.String("version"), Value: proto.String("1")},
				},
				Gauge: &dto.Gauge{Value: proto.Float64(vals[i])},
			})
		}
		return mf
	}
	// The backend's per-response token histograms (tensorrtllm_backend's
	// custom_metrics_reporter.cc): the simulator's length histograms, its
	// buckets, labelled as the backend labels them.
	tokens := func(name, from, kind string) *dto.MetricFamily {
		for _, mf := range mfs {
			if mf.GetName() == from && len(mf.Metric) == 1 && mf.Metric[0].Histogram != nil {
				return &dto.MetricFamily{Name: proto.String(name), Help: proto.String("TRT LLM response metrics"),
					Type: dto.MetricType_HISTOGRAM.Enum(), Metric: []*dto.Metric{{
						Label: []*dto.LabelPair{
							{Name: proto.String("model"), Value: proto.String(s.cfg.Model)},
							{Name: proto.String("response_metric_type"), Value: proto.String(kind)},
							{Name: proto.String("version"), Value: proto.String("1")},
						},
						Histogram: proto.Clone(mf.Metric[0].Histogram).(*dto.Histogram),
					}}}
			}
		}
		return nil
	}
	out := []*dto.MetricFamily{
		gauge("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics", "kv_cache_block_type",
			[]string{"fraction", "max", "tokens_per"},
			[]float64{value["vllm:kv_cache_usage_perc"], float64(s.cfg.KVBlocks), float64(s.cfg.BlockSize)}),
		gauge("nv_trt_llm_request_metrics", "TRT LLM request metrics", "request_type",
			[]string{"max", "scheduled", "waiting"},
			[]float64{float64(s.cfg.MaxNumSeqs), value["vllm:num_requests_running"], value["vllm:num_requests_waiting"]}),
	}
	for _, mf := range []*dto.MetricFamily{
		tokens("nv_llm_input_token_len", "vllm:request_prompt_tokens", "total_input_tokens"),
		tokens("nv_llm_output_token_len", "vllm:request_generation_tokens", "total_output_tokens"),
	} {
		if mf != nil {
			out = append(out, mf)
		}
	}
	return out
}

// engineVersion is what the info endpoints report as the engine's version.
func engineVersion(engine string) string {
	return Version
}

// Info endpoints, one set per engine, in each engine's own shapes.

func (s *Simulator) handleTGIInfo(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]any{
		"model_id":                 s.cfg.Model,
		"model_sha":                nil,
		"model_dtype":              "torch.float16",
		"model_device_type":        "cuda",
		"max_concurrent_requests":  s.cfg.MaxNumSeqs,
		"max_input_tokens":         s.cfg.MaxModelLen - 1,
		"max_total_tokens":         s.cfg.MaxModelLen,
		"max_batch_total_tokens":   s.cfg.KVBlocks * s.cfg.BlockSize,
		"validation_workers":       2,
		"router":                   "text-generation-router",
		"version":                  engineVersion(EngineTGI),
		"sha":                      nil,
		"docker_label":             nil,
		"max_best_of":              2,
		"max_stop_sequences":       4,
		"max_waiting_tokens":       20,
		"waiting_served_ratio":     0.3,
		"max_batch_prefill_tokens": s.cfg.MaxBatchedTokens,
	})
}

func (s *Simulator) handleLlamaCppProps(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]any{
		"default_generation_settings": map[string]any{
			"id": 0, "id_task": -1, "n_ctx": s.cfg.MaxModelLen, "speculative": false, "is_processing": false,
		},
		"total_slots": s.cfg.MaxNumSeqs,
		"model_path":  s.cfg.Model,
		"modalities":  map[string]bool{"vision": false},
		"build_info":  "b0-" + engineVersion(EngineLlamaCpp),
	})
}

func (s *Simulator) handleOllamaVersion(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]string{"version": engineVersion(EngineOllama)})
}

// ollamaModel is one model as /api/ps and /api/tags list it.
func (s *Simulator) ollamaModel(running bool) map[string]any {
	m := map[string]any{
		"name": s.cfg.Model, "model": s.cfg.Model, "size": 0, "digest": "",
		"details": map[string]any{"format": "gguf", "family": "sim", "parameter_size": "0", "quantization_level": "none"},
	}
	if running {
		m["expires_at"] = time.Unix(s.created, 0).Add(24 * time.Hour).UTC().Format(time.RFC3339Nano)
		m["size_vram"] = 0
		m["context_length"] = s.cfg.MaxModelLen
	} else {
		m["modified_at"] = time.Unix(s.created, 0).UTC().Format(time.RFC3339Nano)
	}
	return m
}

func (s *Simulator) handleOllamaPS(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]any{"models": []any{s.ollamaModel(true)}})
}

func (s *Simulator) handleOllamaTags(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]any{"models": []any{s.ollamaModel(false)}})
}

func (s *Simulator) handleTritonServer(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]any{"name": "triton", "version": engineVersion(EngineTriton),
		"extensions": []string{"classification", "sequence", "model_repository", "schedule_policy", "model_configuration", "statistics", "trace", "logging", "generate"}})
}

func (s *Simulator) handleTritonModel(w http.ResponseWriter, r *http.Request, _ time.Time) {
	if r.PathValue("model") != s.cfg.Model {
		writeTritonError(w, http.StatusBadRequest, fmt.Sprintf("Request for unknown model: '%s' is not found", r.PathValue("model")))
		return
	}
	writeJSON(w, map[string]any{"name": s.cfg.Model, "versions": []string{"1"}, "platform": "ensemble",
		"inputs":  []map[string]any{{"name": "text_input", "datatype": "BYTES", "shape": []int{-1}}},
		"outputs": []map[string]any{{"name": "text_output", "datatype": "BYTES", "shape": []int{-1}}}})
}

func (s *Simulator) handleSGLangModelInfo(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]any{"model_path": s.cfg.Model, "tokenizer_path": s.cfg.Model, "is_generation": true})
}

func (s *Simulator) handleSGLangServerInfo(w http.ResponseWriter, _ *http.Request, _ time.Time) {
	writeJSON(w, map[string]any{"model_path": s.cfg.Model, "served_model_name": s.cfg.Model,
		"context_length": s.cfg.MaxModelLen, "max_running_requests": s.cfg.MaxNumSeqs,
		"version": engineVersion(EngineSGLang)})
}

// handleTGITokenize is TGI's POST /tokenize: {"inputs": "..."} gives the
// array of tokens with their byte offsets.
func (s *Simulator) handleTGITokenize(w http.ResponseWriter, r *http.Request, _ time.Time) {
	var req struct {
		Inputs *string `json:"inputs"`
	}
	if err := decodeBody(w, r, &req); err != nil || req.Inputs == nil {
		writeTGIError(w, http.StatusUnprocessableEntity, "Input validation error: `inputs` is required")
		return
	}
	type token struct {
		ID    int    `json:"id"`
		Text  string `json:"text"`
		Start int    `json:"start"`
		Stop  int    `json:"stop"`
	}
	toks := []token{}
	text := *req.Inputs
	for i := 0; i < len(text); {
		j := i
		for j < len(text) && !isSpaceByte(text[j]) {
			j++
		}
		if j > i {
			toks = append(toks, token{ID: TokenID(text[i:j]), Text: text[i:j], Start: i, Stop: j})
		}
		i = j + 1
	}
	// The byte scan above splits at ASCII white space; the tokenizer's
	// definition is strings.Fields (Unicode white space). They agree on the
	// ASCII prompts this endpoint is used with; fall back to the definition
	// otherwise, without offsets.
	if len(toks) != CountTokens(text) {
		toks = toks[:0]
		for _, f := range strings.Fields(text) {
			toks = append(toks, token{ID: TokenID(f), Text: f})
		}
	}
	writeJSON(w, toks)
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// handleLlamaCppTokenize is llama.cpp's POST /tokenize: {"content": "..."}
// gives {"tokens": [ids]}. The simulated model has no BOS token, so
// add_special adds nothing.
func (s *Simulator) handleLlamaCppTokenize(w http.ResponseWriter, r *http.Request, _ time.Time) {
	var req struct {
		Content *string `json:"content"`
	}
	if err := decodeBody(w, r, &req); err != nil || req.Content == nil {
		writeError(w, http.StatusBadRequest, "\"content\" must be provided")
		return
	}
	ids := AppendTokenIDs([]int{}, *req.Content)
	writeJSON(w, map[string]any{"tokens": ids})
}

// writeTGIError writes TGI's error body {"error": ..., "error_type": ...}.
func writeTGIError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]string{"error": message, "error_type": "validation"})
	w.Write(body)
}

// writeTritonError and writeOllamaError write {"error": "..."}.
func writeTritonError(w http.ResponseWriter, status int, message string) {
	writePlainError(w, status, message)
}

func writeOllamaError(w http.ResponseWriter, status int, message string) {
	writePlainError(w, status, message)
}

func writePlainError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]string{"error": message})
	w.Write(body)
}
