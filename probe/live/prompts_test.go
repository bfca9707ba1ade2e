package live

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

func TestPromptMetricsCalibrates(t *testing.T) {
	for _, tc := range []struct {
		engine, flavor, tokenizer string
		in                        float64
		wantErr                   string
	}{
		{simulator.EngineVLLM, "openai-chat", "server", 100, ""},
		{simulator.EngineVLLM, "openai-responses", "server", 100, ""},
		{simulator.EngineOllama, "ollama-generate", "estimate", 100, ""},
		// A chat prompt of 3 tokens: the template alone is 4.
		{simulator.EngineVLLM, "openai-chat", "", 3, "template"},
	} {
		cfg := simulatortest.InstantConfig()
		cfg.Engine = tc.engine
		url, _ := simulatortest.StartTest(t, cfg)
		reg := prometheus.NewRegistry()
		pm := NewCalibrator(NewPromptMetrics(reg))
		tg := &config.Target{Name: "t", URL: url, Model: cfg.Model, Flavor: config.Flavor(tc.flavor)}
		w := &config.Workload{Name: "w", Prompt: config.Prompt{Seed: 1,
			InputTokens: config.Distribution{Dist: "fixed", Mean: tc.in}, OutputTokens: config.Distribution{Dist: "fixed", Mean: 8}}}
		ps, err := pm.Prompts(t.Context(), tg, w, nil, nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.engine, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		p := ps.Next()
		if tc.tokenizer == "server" && p.Tokens != 100 {
			t.Errorf("calibrated prompt has %d tokens", p.Tokens)
		}
		out, _ := reg.Gather()
		if n := testutil.CollectAndCount(pm.metrics.info); n != 1 || !strings.Contains(gatherText(out), `value:"`+tc.tokenizer+`"`) {
			t.Errorf("%s: info metric %s", tc.engine, gatherText(out))
		}
	}
}

func gatherText(mfs []*dto.MetricFamily) string {
	var b strings.Builder
	for _, mf := range mfs {
		b.WriteString(mf.String())
	}
	return b.String()
}

// TestPromptsRefusedOverContextLength: a workload whose requests exceed the
// context length the target's /tokenize states is refused at calibration,
// with the figures in the error.
func TestPromptsRefusedOverContextLength(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.MaxModelLen = 1024
	url, _ := simulatortest.StartTest(t, cfg)
	for _, tc := range []struct {
		in, out float64
		wantErr bool
	}{
		{in: 512, out: 256, wantErr: false},
		{in: 1000, out: 100, wantErr: true},
	} {
		c, err := config.Parse([]byte(fmt.Sprintf(`targets:
  - {name: t, url: %q, model: sim-model}
workloads:
  - name: w
    target: t
    arrival: {process: constant, rate: 1}
    prompt: {input_tokens: {dist: fixed, mean: %v}, output_tokens: {dist: fixed, mean: %v}}
`, url, tc.in, tc.out)), "c.yml")
		if err != nil {
			t.Fatal(err)
		}
		pm := NewCalibrator(NewPromptMetrics(prometheus.NewRegistry()))
		_, err = pm.Prompts(t.Context(), &c.Targets[0], &c.Workloads[0], nil, nil)
		if (err != nil) != tc.wantErr {
			t.Errorf("in %v out %v: err %v, want error %v", tc.in, tc.out, err, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "context length of 1024") {
			t.Errorf("error does not state the context length: %v", err)
		}
	}
}
