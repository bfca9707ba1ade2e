package live

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// histMean is a histogram series' mean and count.
func histMean(t *testing.T, h *exemplarHistogram) (float64, uint64) {
	t.Helper()
	var m dto.Metric
	if err := h.Histogram.Write(&m); err != nil {
		t.Fatal(err)
	}
	hg := m.GetHistogram()
	if hg.GetSampleCount() == 0 {
		return 0, 0
	}
	return hg.GetSampleSum() / float64(hg.GetSampleCount()), hg.GetSampleCount()
}

// within2 fails unless got is within 2% of want.
func within2(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.02*want {
		t.Errorf("%s mean %.6f s, want %.6f s within 2%%", name, got, want)
	}
}

// timedServer answers each request with its first token firstAfter after
// it arrived (real sleeps), two more 5 ms apart, then its last frame,
// which carries the engine's timings as last renders them.
func timedServer(t *testing.T, firstAfter time.Duration, frame func(string) string, last string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrival := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		time.Sleep(firstAfter - time.Since(arrival))
		for _, tok := range []string{"a", " b", " c"} {
			io.WriteString(w, frame(tok))
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
		io.WriteString(w, last)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// observeTimed sends n requests one after the other to target and gives
// each to s; it returns the client's overhead of each.
func observeTimed(t *testing.T, s *Series, target *client.Target, n int) []time.Duration {
	t.Helper()
	c := client.New(client.Options{})
	t.Cleanup(c.Close)
	var overheads []time.Duration
	for range n {
		obs := observation.Request{Scheduled: time.Now()}
		c.Do(context.Background(), target, &client.Request{Prompt: "p", MaxTokens: 16}, &obs)
		if obs.Outcome != observation.Success {
			t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
		}
		s.FirstToken(&obs)
		s.Observe(&obs)
		d, ok := obs.ClientOverhead()
		if !ok {
			t.Fatalf("request not decomposed: %+v", obs.Server)
		}
		overheads = append(overheads, d)
	}
	return overheads
}

// TestServerTimingsFromServers: a server answering as vLLM does with
// --enable-per-request-metrics (queue 90 ms, TTFT from scheduling 55 ms,
// its first token 150 ms after the request arrived) and one answering as
// llama.cpp's /completion does (prompt_ms 120, its first token 125 ms
// after arrival): each histogram's mean is what the server reported
// (within 2%), every request is decomposed, and the client's overhead is
// the 5 ms the servers left out, and loopback's and the client's time:
// at least 5 ms by the sleeps, under 30 ms.
func TestServerTimingsFromServers(t *testing.T) {
	const n = 8
	vllm := timedServer(t, 150*time.Millisecond,
		func(tok string) string {
			return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + tok + `"},"finish_reason":null}]}` + "\n\n"
		},
		`data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6},`+
			`"metrics":{"time_to_first_token_ms":55.0,"generation_time_ms":10.0,"queue_time_ms":90.0,"mean_itl_ms":5.0,"tokens_per_second":46.2}}`+"\n\ndata: [DONE]\n\n")
	llama := timedServer(t, 125*time.Millisecond,
		func(tok string) string { return `data: {"content":"` + tok + `","stop":false}` + "\n\n" },
		`data: {"content":"","stop":true,"tokens_predicted":3,"tokens_evaluated":3,"timings":{"cache_n":0,"prompt_n":3,"prompt_ms":120.0,"predicted_n":3,"predicted_ms":10.0}}`+"\n\n")
	for _, tc := range []struct {
		name                       string
		target                     *client.Target
		queue, ttft, gen, engineFT float64
	}{
		{"vllm", &client.Target{BaseURL: vllm.URL, Flavor: client.OpenAIChat}, 0.090, 0.055, 0.010, 0.145},
		{"llama.cpp", &client.Target{BaseURL: llama.URL, Flavor: client.LlamaCpp}, 0, 0.120, 0.010, 0.120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			s := NewMetrics(reg).Series("t", "m", "w", config.SLO{})
			overheads := observeTimed(t, s, tc.target, n)
			if tc.queue > 0 {
				m, _ := histMean(t, s.server.queue)
				within2(t, "server_queue_seconds", m, tc.queue)
			} else if _, count := histMean(t, s.server.queue); count != 0 {
				t.Errorf("server_queue_seconds has %d observations of a server that reports no queue", count)
			}
			m, _ := histMean(t, s.server.ttft)
			within2(t, "server_time_to_first_token_seconds", m, tc.ttft)
			m, _ = histMean(t, s.server.generation)
			within2(t, "server_generation_seconds", m, tc.gen)
			// The overhead's mean is the client's TTFT's less the
			// engine's share, to the histograms' float sums.
			ttft, _ := histMean(t, s.ttft)
			overhead, count := histMean(t, s.server.overhead)
			if count != n || math.Abs(overhead-(ttft-tc.engineFT)) > 1e-6 {
				t.Errorf("client_overhead_seconds: mean %.6f of %d, want TTFT %.6f less %.3f of %d", overhead, count, ttft, tc.engineFT, n)
			}
			slices.Sort(overheads)
			q, _ := histMean(t, s.server.queue)
			tt, _ := histMean(t, s.server.ttft)
			g, _ := histMean(t, s.server.generation)
			t.Logf("means: queue %.3f ms, engine TTFT %.3f ms, generation %.3f ms, client TTFT %.3f ms; overhead mean %.3f ms, p50 %v, max %v",
				q*1e3, tt*1e3, g*1e3, ttft*1e3, overhead*1e3, overheads[n/2], overheads[n-1])
			if overheads[0] < 5*time.Millisecond || overhead >= 0.030 {
				t.Errorf("overhead min %v mean %.3f ms, want at least 5 ms (the sleeps) and a mean under 30 ms", overheads[0], overhead*1e3)
			}
			if got := testutil.ToFloat64(s.server.results[observation.TimingsDecomposed]); got != n {
				t.Errorf("server_timings_total{result=decomposed} = %v, want %d", got, n)
			}
		})
	}
}

// simFormats are the simulator's formats of its engines' own timings, each
// with the flavor that reads it.
var simFormats = []struct {
	name   string
	engine string
	flavor client.Flavor
}{
	{"vllm chat", simulator.EngineVLLM, client.OpenAIChat},
	{"vllm completions", simulator.EngineVLLM, client.OpenAICompletions},
	{"vllm responses", simulator.EngineVLLM, client.OpenAIResponses},
	{"llama.cpp native", simulator.EngineLlamaCpp, client.LlamaCpp},
	{"llama.cpp chat", simulator.EngineLlamaCpp, client.OpenAIChat},
	{"ollama generate", simulator.EngineOllama, client.OllamaGenerate},
	{"ollama chat", simulator.EngineOllama, client.OllamaChat},
}

// simOverheads sends n requests one after the other to a simulator of
// engine answering with its request metrics, through flavor, and returns
// the series and each request's overhead.
func simOverheads(t *testing.T, cfg simulator.Config, engine string, flavor client.Flavor, n int) (*Series, []time.Duration) {
	t.Helper()
	cfg.Engine, cfg.RequestMetrics = engine, true
	baseURL, _ := simulatortest.StartTest(t, cfg)
	s := NewMetrics(prometheus.NewRegistry()).Series("sim", cfg.Model, "w", config.SLO{})
	return s, observeTimed(t, s, &client.Target{BaseURL: baseURL, Model: cfg.Model, Flavor: flavor}, n)
}

// TestServerTimingsSimulator: the simulator answers with its engine's own
// timings in each format when asked, and every request is decomposed.
func TestServerTimingsSimulator(t *testing.T) {
	const n = 5
	for _, f := range simFormats {
		t.Run(f.name, func(t *testing.T) {
			s, _ := simOverheads(t, simulatortest.InstantConfig(), f.engine, f.flavor, n)
			if got := testutil.ToFloat64(s.server.results[observation.TimingsDecomposed]); got != n {
				t.Errorf("decomposed = %v of %d (partial %v, absent %v)", got, n,
					testutil.ToFloat64(s.server.results[observation.TimingsPartial]), testutil.ToFloat64(s.server.results[observation.TimingsAbsent]))
			}
		})
	}
}

// TestServerTimingsSimulatorAccuracy: on loopback, with the simulator's
// real-time steps, the client's overhead (the client's TTFT less the
// simulator's true queue and prefill) has its median under 1 ms in each
// format.
func TestServerTimingsSimulatorAccuracy(t *testing.T) {
	testenv.Timing(t)
	const n = 21
	for _, f := range simFormats {
		t.Run(f.name, func(t *testing.T) {
			_, overheads := simOverheads(t, simulator.DefaultConfig(), f.engine, f.flavor, n)
			slices.Sort(overheads)
			p50 := overheads[n/2]
			t.Logf("overhead p50 %v (min %v, max %v)", p50, overheads[0], overheads[n-1])
			if p50 >= time.Millisecond || p50 < 0 {
				t.Errorf("overhead p50 %v, want in [0, 1 ms)", p50)
			}
		})
	}
}
