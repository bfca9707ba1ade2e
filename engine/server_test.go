package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

func parseFile(t *testing.T, name string) map[string]*dto.MetricFamily {
	t.Helper()
	b, err := os.ReadFile("testdata/server/" + name)
	if err != nil {
		t.Fatal(err)
	}
	fams, err := parseMetrics(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return fams
}

// want lists expected quantities; absent ones must be absent.
type want map[quantity]float64

func checkValues(t *testing.T, got values, w want) {
	t.Helper()
	names := []string{"running", "waiting", "kv_usage", "prefix_hits", "prefix_queries", "preemptions", "prompt_tokens", "generation_tokens"}
	for q := quantity(0); q < numQuantities; q++ {
		wv, wantHas := w[q]
		switch {
		case wantHas != got.has[q]:
			t.Errorf("%s: present=%v, want present=%v", names[q], got.has[q], wantHas)
		case wantHas && got.v[q] != wv:
			t.Errorf("%s = %v, want %v", names[q], got.v[q], wv)
		}
	}
}

// TestRecordedMetrics: every recorded scrape is detected as its engine and
// normalised to the values it holds.
func TestRecordedMetrics(t *testing.T) {
	for _, tc := range []struct {
		file, engine, model string
		want                want
	}{
		{"metrics_vllm_v1.txt", engineVLLM, "facebook/opt-125m",
			want{qRunning: 0, qWaiting: 0, qKVUsage: 0, qPrefixHits: 64, qPrefixQueries: 117, qPreemptions: 0,
				qPromptTokens: 5, qGenerationTokens: 7}},
		{"metrics_vllm_legacy_excerpt.txt", engineVLLM, "facebook/opt-125m",
			want{qRunning: 0, qWaiting: 0, qKVUsage: 0, qPreemptions: 0}},
		// Older SGLang: a hit rate gauge but no cached-token counter, so
		// no prefix-cache pair; no retraction counter.
		{"metrics_sglang.txt", engineSGLang, "meta-llama/Llama-3.1-8B-Instruct",
			want{qRunning: 162, qWaiting: 2826, qKVUsage: 0.28, qPromptTokens: 8128902, qGenerationTokens: 7557572}},
		// TGI's prompt tokens are the sum of its input-length histogram;
		// the recorded scrape has no generated-length histogram (none
		// succeeded through the router's generate path when it was taken),
		// so no generation counter.
		{"metrics_tgi.txt", engineTGI, "", want{qRunning: 0, qWaiting: 0, qPromptTokens: 662}},
		// The model label is tensorrt_llm while the target's model (the
		// path's) is the ensemble: every series counts.
		{"metrics_triton_trtllm.txt", engineTriton, "ensemble", want{qRunning: 1, qWaiting: 1, qKVUsage: 0.4875}},
		{"metrics_triton_trtllm_base_nv_inference.txt", engineTriton, "ensemble", want{qWaiting: 0}},
		{"metrics_dcgm.txt", "", "", want{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			fams := parseFile(t, tc.file)
			if got := detectEngine(fams); got != tc.engine {
				t.Fatalf("detected %q, want %q", got, tc.engine)
			}
			checkValues(t, normalize(tc.engine, fams, tc.model), tc.want)
		})
	}
}

func TestNormalizeAggregation(t *testing.T) {
	text := `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="a",tp_rank="0",dp_rank="0"} 3
sglang:num_running_reqs{model_name="a",tp_rank="1",dp_rank="0"} 3
sglang:num_running_reqs{model_name="a",tp_rank="0",dp_rank="1"} 4
sglang:num_running_reqs{model_name="b",tp_rank="0",dp_rank="0"} 100
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="a",tp_rank="0",dp_rank="0"} 0.2
sglang:token_usage{model_name="a",tp_rank="0",dp_rank="1"} 0.4
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="a"} 10
`
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	// Rank 1 of TP is a copy; DP ranks add up; model b is another model;
	// the KV ratio is the mean of the DP ranks; hits without queries are
	// not exposed.
	vs := normalize(engineSGLang, fams, "a")
	checkValues(t, vs, want{qRunning: 7, qKVUsage: 0.30000000000000004})
}

// TestMappingCoversConfigEngines: every engine the configuration accepts
// has a mapping.
func TestMappingCoversConfigEngines(t *testing.T) {
	for _, e := range config.ServerEngines {
		if mappingFor(e) == nil {
			t.Errorf("config engine %q has no mapping", e)
		}
	}
}

// gatherServer collects sm and returns the samples by "name{labels}".
func gatherServer(t *testing.T, sm *Scraper) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(sm)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, lp := range m.Label {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			v, _ := sampleValue(mf, m)
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// waitScrapes waits until every target has finished n background scrapes'
// worth of snapshots (the first one is enough for static servers).
func waitSnapshot(t *testing.T, sm *Scraper, target string) *serverSnapshot {
	t.Helper()
	deadline := testDeadline(t)
	for time.Now().Before(deadline) {
		sm.mu.Lock()
		sc := sm.scrapers[target]
		sm.mu.Unlock()
		if sc != nil {
			if s := sc.snap.Load(); s != nil {
				return s
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no scrape of %s", target)
	return nil
}

func serveFiles(routes map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		file, ok := routes[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile("testdata/server/" + file)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if strings.HasSuffix(file, ".json") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		}
		w.Write(b)
	})
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestServerMetricsRecordedServers runs the collector against servers that
// answer with the recorded files, for the engines detected through their
// info endpoints too.
func TestServerMetricsRecordedServers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cases := []struct {
		name, model string
		routes      map[string]string
		engine      string
		wantUp      float64
		want        map[string]float64 // metric{labels} -> value, beyond up
	}{
		{"vllm", "facebook/opt-125m", map[string]string{"/metrics": "metrics_vllm_v1.txt", "/version": "version_vllm.json"}, "vllm", 1,
			map[string]float64{
				"infer_server_prefix_cache_hits_total{engine=vllm,model=facebook/opt-125m,target=vllm}":                          64,
				"infer_server_prefix_cache_queries_total{engine=vllm,model=facebook/opt-125m,target=vllm}":                       117,
				"infer_server_info{engine=vllm,max_context_length=,max_lora=,model=facebook/opt-125m,target=vllm,version=0.4.3}": 1,
				"infer_server_prompt_tokens_total{engine=vllm,model=facebook/opt-125m,target=vllm}":                              5,
				"infer_server_generation_tokens_total{engine=vllm,model=facebook/opt-125m,target=vllm}":                          7,
			}},
		{"ollama", "tiny", map[string]string{"/api/version": "ollama_api_version.json", "/api/ps": "ollama_api_ps.json"}, "ollama", 1,
			map[string]float64{
				"infer_server_info{engine=ollama,max_context_length=2048,max_lora=,model=tiny:latest,target=ollama,version=0.0.0}": 1,
				"infer_server_loaded_model_bytes{engine=ollama,loaded_model=tiny:latest,memory=total,target=ollama}":               22293504,
				"infer_server_loaded_model_bytes{engine=ollama,loaded_model=tiny:latest,memory=vram,target=ollama}":                0,
			}},
		// llama.cpp with metrics disabled: detected from /props, running
		// from /slots (both slots processing); these slots carry no prompt
		// length, so no KV usage.
		{"llamacpp", "m", map[string]string{"/props": "props_llamacpp.json", "/slots": "slots_llamacpp.json", "/v1/models": "v1_models_llamacpp.json"}, "llamacpp", 0,
			map[string]float64{
				"infer_server_requests_running{engine=llamacpp,model=m,target=llamacpp}": 2,
				"infer_server_info{engine=llamacpp,max_context_length=1024,max_lora=,model=../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf,target=llamacpp,version=b(build number)-(build commit hash)}": 1,
			}},
		{"triton", "ensemble", map[string]string{"/metrics": "metrics_triton_trtllm.txt", "/v2": "server_metadata_triton_v2.json"}, "triton", 1,
			map[string]float64{
				"infer_server_kv_cache_usage_ratio{engine=triton,model=ensemble,target=triton}":                              0.4875,
				"infer_server_info{engine=triton,max_context_length=,max_lora=,model=ensemble,target=triton,version=2.38.0}": 1,
			}},
		{"dcgm", "m", map[string]string{"/metrics": "metrics_dcgm.txt"}, "unknown", 1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(serveFiles(tc.routes))
			defer srv.Close()
			var logs logBuffer
			sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
			defer sm.Close()
			c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - name: %s\n    url: %s\n    model: %q\n", tc.name, srv.URL, tc.model)), "c.yml")
			if err != nil {
				t.Fatal(err)
			}
			if err := sm.ApplyConfig(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			waitSnapshot(t, sm, tc.name)
			got := gatherServer(t, sm)
			up := fmt.Sprintf("infer_server_up{engine=%s,model=%s,target=%s}", tc.engine, tc.model, tc.name)
			if v, ok := got[up]; !ok || v != tc.wantUp {
				t.Errorf("%s = %v (present %v), want %v; got %v", up, v, ok, tc.wantUp, got)
			}
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
				}
			}
			if tc.engine == "unknown" {
				for k := range got {
					if !strings.HasPrefix(k, "infer_server_up") && !strings.HasPrefix(k, "infer_server_scrape_") {
						t.Errorf("unknown engine exposes %s", k)
					}
				}
				if n := strings.Count(logs.String(), "engine not recognised"); n != 1 {
					t.Errorf("%d log lines about the unknown engine, want 1:\n%s", n, logs.String())
				}
			}
		})
	}
}

// TestServerMetricsSimulator scrapes the simulator's emulation of each
// engine after some traffic and checks that the normalised values equal the
// simulator's own engine state.
func TestServerMetricsSimulator(t *testing.T) {
	for _, engine := range simulator.Engines() {
		t.Run(engine, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.Engine = engine
			cfg.BlockSize = 4
			url, sim := simulatortest.StartTest(t, cfg)
			// Two identical prompts: the second hits the prefix cache.
			for range 2 {
				body := `{"model":"sim-model","prompt":"` + strings.Repeat("w ", 40) + `","max_tokens":3}`
				path := "/v1/completions"
				switch engine {
				case simulator.EngineTriton:
					path, body = "/v2/models/sim-model/generate_stream", `{"text_input":"`+strings.Repeat("w ", 40)+`","max_tokens":3}`
				case simulator.EngineOllama:
					path, body = "/api/generate", `{"model":"sim-model","prompt":"`+strings.Repeat("w ", 40)+`","options":{"num_predict":3}}`
				}
				resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				// Read the stream to its end: the snapshot below is compared
				// with the simulator's state once every request finished.
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %d", path, resp.StatusCode)
				}
			}
			// The simulator retires a request just after its last byte:
			// wait until none runs, so that the scrape and the state read
			// below see the same quiet server.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				running := -1.0
				mfs, _ := sim.Registry().Gather()
				for _, mf := range mfs {
					if mf.GetName() == "vllm:num_requests_running" && len(mf.Metric) == 1 {
						running, _ = sampleValue(mf, mf.Metric[0])
					}
				}
				if running == 0 {
					break
				}
			}
			sm := NewScraper(nil)
			defer sm.Close()
			c, err := config.Parse([]byte("targets:\n  - name: sim\n    url: "+url+"\n    model: sim-model\n"), "c.yml")
			if err != nil {
				t.Fatal(err)
			}
			if err := sm.ApplyConfig(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			snap := waitSnapshot(t, sm, "sim")
			wantEngine := engine
			if engine == simulator.EngineVLLMLegacy {
				wantEngine = engineVLLM
			}
			if snap.engine != wantEngine {
				t.Fatalf("engine %q, want %q", snap.engine, wantEngine)
			}
			if !snap.up {
				t.Fatalf("not up")
			}
			// The simulator's own state, in its vLLM names.
			state := map[string]float64{}
			mfs, _ := sim.Registry().Gather()
			for _, mf := range mfs {
				if len(mf.Metric) == 1 {
					v, _ := sampleValue(mf, mf.Metric[0])
					state[mf.GetName()] = v
				}
			}
			w := want{}
			m := mappingFor(wantEngine)
			src := map[quantity]string{qRunning: "vllm:num_requests_running", qWaiting: "vllm:num_requests_waiting",
				qKVUsage: "vllm:kv_cache_usage_perc", qPrefixHits: "vllm:prefix_cache_hits_total",
				qPrefixQueries: "vllm:prefix_cache_queries_total", qPreemptions: "vllm:num_preemptions_total",
				qPromptTokens: "vllm:prompt_tokens_total", qGenerationTokens: "vllm:generation_tokens_total"}
			if wantEngine == engineSGLang {
				src[qPrefixQueries] = "vllm:prompt_tokens_total" // SGLang counts prompt tokens per request
			}
			for q := quantity(0); q < numQuantities; q++ {
				if m != nil && len(m.sources[q]) > 0 {
					w[q] = state[src[q]]
				}
			}
			if engine == simulator.EngineTriton {
				delete(w, qPrefixHits)
				delete(w, qPrefixQueries)
			}
			checkValues(t, snap.values, w)
			// Every engine that counts tokens counted the two requests'
			// 3 output tokens each, whether from a counter or a length
			// histogram's sum (TGI, Triton).
			if snap.values.has[qGenerationTokens] && snap.values.v[qGenerationTokens] != 6 {
				t.Errorf("generation tokens %v, want 6", snap.values.v[qGenerationTokens])
			}
			// The histograms the engine has, equal to the simulator's own
			// (in its vLLM names); the others absent.
			simHist := map[string]*dto.Histogram{}
			for _, mf := range mfs {
				if len(mf.Metric) == 1 && mf.Metric[0].Histogram != nil {
					simHist[mf.GetName()] = mf.Metric[0].Histogram
				}
			}
			histSrc := [numHistQuantities]string{hTTFT: "vllm:time_to_first_token_seconds", hQueueTime: "vllm:request_queue_time_seconds",
				hPrefillTime: "vllm:request_prefill_time_seconds", hDecodeTime: "vllm:request_decode_time_seconds",
				hPromptTokens: "vllm:request_prompt_tokens", hGenerationTokens: "vllm:request_generation_tokens"}
			wh := map[histQuantity]wantHist{}
			for h := histQuantity(0); h < numHistQuantities; h++ {
				if m == nil || len(m.histograms[h]) == 0 || engine == simulator.EngineTRTLLMServe {
					continue
				}
				sh := simHist[histSrc[h]]
				if sh == nil {
					t.Fatalf("the simulator has no %s", histSrc[h])
				}
				wh[h] = wantHist{count: sh.GetSampleCount(), sum: sh.GetSampleSum(), buckets: len(sh.GetBucket())}
			}
			checkHistograms(t, snap.values, wh)
			if snap.values.hist[hGenerationTokens].OK && snap.values.hist[hGenerationTokens].Sum != 6 {
				t.Errorf("generated tokens %v, want 6", snap.values.hist[hGenerationTokens].Sum)
			}
			if wantEngine == engineVLLM {
				checkFinished(t, snap.values, map[string]float64{"stop": 0, "length": 2, "abort": 0})
			} else {
				checkFinished(t, snap.values, nil)
			}
			if snap.values.has[qPrefixHits] && snap.values.v[qPrefixHits] == 0 {
				t.Errorf("no prefix-cache hits after a repeated prompt")
			}
			// vLLM's LoRA gauge: the simulator's --max-loras (1 by
			// default), no adapter serving.
			if wantEngine == engineVLLM && (!snap.values.hasLoRA || snap.values.maxLoRA != 1 || snap.values.loraRunning != 0) {
				t.Errorf("LoRA %v max %d running %d, want true 1 0", snap.values.hasLoRA, snap.values.maxLoRA, snap.values.loraRunning)
			}
			// vLLM's description of its cache: the simulator's blocks of
			// 4 tokens; no other engine describes one.
			wantKV := KVCache{}
			if wantEngine == engineVLLM {
				wantKV = KVCache{BlockSize: 4, Blocks: cfg.KVBlocks}
			}
			if snap.values.kvCache != wantKV {
				t.Errorf("KV cache %+v, want %+v", snap.values.kvCache, wantKV)
			}
			if snap.info == nil {
				t.Fatalf("no info")
			}
			if snap.info.version != simulator.Version && !strings.Contains(snap.info.version, simulator.Version) && engine != simulator.EngineTRTLLMServe {
				t.Errorf("info version %q", snap.info.version)
			}
		})
	}
}

// TestServerMetricsOllamaUpEveryScrape: Ollama serves no /metrics, so its
// up comes from its info endpoint, read on every scrape: it must not fall
// to 0 between the scrapes that refresh the info.
func TestServerMetricsOllamaUpEveryScrape(t *testing.T) {
	srv := httptest.NewServer(serveFiles(map[string]string{"/api/version": "ollama_api_version.json", "/api/ps": "ollama_api_ps.json"}))
	defer srv.Close()
	sm := NewScraper(slog.New(slog.DiscardHandler))
	defer sm.Close()
	c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - name: o\n    url: %s\n    model: tiny\n", srv.URL)), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.ApplyConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, sm, "o")
	sm.mu.Lock()
	sc := sm.scrapers["o"]
	sm.mu.Unlock()
	// The test scrapes by itself from here: the goroutine's next scrape,
	// due 15 s on, ran beside the test's on a busy machine.
	sc.stop()
	for i := 0; i < 2*infoRefresh+3; i++ {
		sc.scrape(context.Background())
		if s := sc.snap.Load(); !s.up {
			t.Fatalf("scrape %d: up = false while the server answers", i)
		}
	}
	srv.Close()
	sc.scrape(context.Background())
	if s := sc.snap.Load(); s.up {
		t.Fatal("up = true after the server went away")
	}
}
