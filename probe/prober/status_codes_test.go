package prober

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestProbeHTTPErrorsEveryFlavor (issue 25): a /probe of every flavor's
// native engine, whose every request the simulator answers with an
// injected 429 or 503, counts them under their code in probe_http_errors.
func TestProbeHTTPErrorsEveryFlavor(t *testing.T) {
	engines := map[string]string{
		"openai-chat": simulator.EngineVLLM, "openai-completions": simulator.EngineVLLM, "openai-responses": simulator.EngineVLLM,
		"tgi": simulator.EngineTGI, "llamacpp": simulator.EngineLlamaCpp,
		"ollama-generate": simulator.EngineOllama, "ollama-chat": simulator.EngineOllama,
		"triton": simulator.EngineTriton, "sglang": simulator.EngineSGLang,
	}
	const yml = `targets:
  - name: sim
    url: {{URL}}
    model: %s
    flavor: %s
modules:
  three:
    requests: 3
    prompt:
      output_tokens: {dist: fixed, mean: 4}
    sampling: {ignore_eos: true}
`
	for _, name := range client.FlavorNames() {
		engine, ok := engines[name]
		if !ok {
			t.Fatalf("flavor %s has no simulated engine in this test", name)
		}
		for _, status := range []int{429, 503} {
			t.Run(name+"/"+strconv.Itoa(status), func(t *testing.T) {
				cfg := instantSim()
				cfg.Engine = engine
				cfg.Faults.ErrorRate, cfg.Faults.ErrorStatus = 1, status
				url, _, _ := startSim(t, cfg)
				e := newEnv(t, loadConfig(t, fmt.Sprintf(yml, cfg.Model, name), url), nil)
				code, body := e.scrape(t, "three", url, "10", false)
				if code != http.StatusOK {
					t.Fatalf("status %d: %s", code, body)
				}
				m := parseMetrics(t, body)
				want := observation.StatusCode(status)
				for _, c := range observation.StatusCodes {
					w := 0.0
					if c == want {
						w = 3
					}
					if got := m.must(t, fmt.Sprintf("probe_http_errors{code=%q}", c)); got != w {
						t.Errorf("probe_http_errors{code=%q} = %v, want %v", c, got, w)
					}
				}
				if got := m.must(t, "probe_http_status_code"); got != float64(status) {
					t.Errorf("probe_http_status_code = %v, want %d", got, status)
				}
				if t.Failed() {
					t.Logf("%s", strings.TrimSpace(body))
				}
			})
		}
	}
}
