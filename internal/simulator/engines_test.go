package simulator_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

func postJSON(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// frames splits a streamed body into its JSON frames (SSE data payloads or
// NDJSON lines), dropping "[DONE]".
func frames(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "data:"); ok {
			line = strings.TrimSpace(rest)
		}
		if line == "[DONE]" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("frame %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestNativeEndpoints sends one request through each engine's native API
// and checks the frames: one per token, each stamped with its emit time,
// the server's counts where the engine reports them, and the end marker.
func TestNativeEndpoints(t *testing.T) {
	const prompt = "a b c d e"
	cases := []struct {
		engine, path, body, ctype string
		// tokenFrames is the number of frames that carry a token; final
		// frames after them carry counts.
		check func(t *testing.T, fr []map[string]any, raw []byte)
	}{
		{simulator.EngineTGI, "/generate_stream", `{"inputs":"a b c d e","parameters":{"max_new_tokens":4,"details":true}}`, "text/event-stream",
			func(t *testing.T, fr []map[string]any, _ []byte) {
				last := fr[len(fr)-1]
				if last["generated_text"] == nil || last["details"].(map[string]any)["generated_tokens"].(float64) != float64(len(fr)) {
					t.Errorf("last frame %v", last)
				}
			}},
		{simulator.EngineLlamaCpp, "/completion", `{"prompt":"a b c d e","n_predict":4,"stream":true}`, "text/event-stream",
			func(t *testing.T, fr []map[string]any, _ []byte) {
				last := fr[len(fr)-1]
				if last["stop"] != true || last["tokens_predicted"].(float64) != float64(len(fr)-1) || last["tokens_evaluated"].(float64) != 5 {
					t.Errorf("last frame %v", last)
				}
			}},
		{simulator.EngineOllama, "/api/generate", `{"model":"sim-model","prompt":"a b c d e","options":{"num_predict":4}}`, "application/x-ndjson",
			func(t *testing.T, fr []map[string]any, _ []byte) {
				last := fr[len(fr)-1]
				if last["done"] != true || last["eval_count"].(float64) != float64(len(fr)-1) || last["prompt_eval_count"].(float64) != 5 {
					t.Errorf("last frame %v", last)
				}
			}},
		{simulator.EngineOllama, "/api/chat", `{"model":"sim-model","messages":[{"role":"user","content":"a b c d e"}],"options":{"num_predict":4}}`, "application/x-ndjson",
			func(t *testing.T, fr []map[string]any, _ []byte) {
				if c := fr[0]["message"].(map[string]any)["content"]; c == "" {
					t.Errorf("first chat line has no content: %v", fr[0])
				}
				if last := fr[len(fr)-1]; last["prompt_eval_count"].(float64) != 5+simulator.ChatTokensPerMessage+simulator.ChatGenerationPromptTokens {
					t.Errorf("last frame %v", last)
				}
			}},
		{simulator.EngineTriton, "/v2/models/sim-model/generate_stream", `{"text_input":"a b c d e","max_tokens":4,"stream":true}`, "text/event-stream",
			func(t *testing.T, fr []map[string]any, _ []byte) {
				for _, f := range fr {
					if f["text_output"] == "" {
						t.Errorf("frame without text_output %v", f)
					}
				}
			}},
		{simulator.EngineSGLang, "/generate", `{"text":"a b c d e","sampling_params":{"max_new_tokens":4},"stream":true}`, "text/event-stream",
			func(t *testing.T, fr []map[string]any, raw []byte) {
				if !bytes.HasSuffix(raw, []byte("data: [DONE]\n\n")) {
					t.Errorf("no [DONE]")
				}
				prev := ""
				for i, f := range fr {
					text := f["text"].(string)
					mi := f["meta_info"].(map[string]any)
					if !strings.HasPrefix(text, prev) || len(text) == len(prev) || mi["completion_tokens"].(float64) != float64(i+1) || mi["prompt_tokens"].(float64) != 5 {
						t.Errorf("frame %d %v does not extend %q", i, f, prev)
					}
					prev = text
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.engine+tc.path, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.Engine = tc.engine
			url, _ := simulatortest.StartTest(t, cfg)
			resp := postJSON(t, url+tc.path, tc.body)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) {
				t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			}
			fr := frames(t, raw)
			if len(fr) == 0 {
				t.Fatalf("no frames: %s", raw)
			}
			for i, f := range fr {
				if _, ok := f["sim_emit_unix_nano"].(float64); !ok {
					t.Errorf("frame %d has no sim_emit_unix_nano: %v", i, f)
				}
			}
			tc.check(t, fr, raw)
		})
	}
}

// TestEngineMetricNames checks that each engine's /metrics carries its own
// names, and not vLLM's, for the same engine state.
func TestEngineMetricNames(t *testing.T) {
	for _, tc := range []struct {
		engine     string
		want, gone []string
	}{
		{simulator.EngineVLLM, []string{"vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits_total", "vllm:num_requests_running"}, nil},
		{simulator.EngineVLLMLegacy, []string{"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total", "vllm:num_preemptions_total"},
			[]string{"vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits_total"}},
		{simulator.EngineSGLang, []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:cached_tokens_total", "sglang:prompt_tokens_total", "sglang:num_retracted_requests_total"}, []string{"vllm:num_requests_running"}},
		{simulator.EngineTGI, []string{"tgi_queue_size", "tgi_batch_current_size"}, []string{"vllm:num_requests_running"}},
		{simulator.EngineLlamaCpp, []string{"llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:kv_cache_usage_ratio"}, []string{"vllm:num_requests_running"}},
		{simulator.EngineTriton, []string{"nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics"}, []string{"vllm:num_requests_running"}},
		{simulator.EngineTRTLLMServe, []string{"trtllm_num_requests_running", "trtllm_num_requests_waiting", "trtllm_kv_cache_utilization"}, []string{"vllm:num_requests_running"}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.Engine = tc.engine
			url, _ := simulatortest.StartTest(t, cfg)
			resp, err := http.Get(url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			p := expfmt.NewTextParser(model.UTF8Validation)
			mfs, err := p.TextToMetricFamilies(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.want {
				if mfs[n] == nil {
					t.Errorf("%s missing", n)
				}
			}
			for _, n := range tc.gone {
				if mfs[n] != nil {
					t.Errorf("%s present", n)
				}
			}
		})
	}
	cfg := simulatortest.InstantConfig()
	cfg.Engine = simulator.EngineOllama
	url, _ := simulatortest.StartTest(t, cfg)
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("ollama /metrics: %d, want 404", resp.StatusCode)
	}
}

func TestNativeRefusals(t *testing.T) {
	for _, tc := range []struct {
		engine, path, body string
		status             int
	}{
		{simulator.EngineOllama, "/api/generate", `{"model":"nope","prompt":"a"}`, 404},
		{simulator.EngineOllama, "/api/generate", `{"model":"sim-model","prompt":"a","stream":false}`, 400},
		{simulator.EngineLlamaCpp, "/completion", `{"prompt":"a"}`, 400},
		{simulator.EngineTriton, "/v2/models/other/generate_stream", `{"text_input":"a"}`, 400},
		{simulator.EngineTGI, "/generate_stream", `{"parameters":{}}`, 422},
		{simulator.EngineSGLang, "/generate", `{"text":"a","stream":true,"sampling_params":{"max_new_tokens":99999}}`, 400},
	} {
		cfg := simulatortest.InstantConfig()
		cfg.Engine = tc.engine
		url, _ := simulatortest.StartTest(t, cfg)
		resp := postJSON(t, url+tc.path, tc.body)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.engine, tc.body, resp.StatusCode, body, tc.status)
		}
	}
}
