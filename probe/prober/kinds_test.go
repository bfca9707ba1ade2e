package prober

import (
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/plan"
)

const kindsConfig = `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
    bearer_token_file: token
modules:
  json_schema:
    target: sim
    requests: 4
    prompt:
      output_tokens: {dist: fixed, mean: 12}
    response_format:
      type: json_schema
      schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
  tools:
    target: sim
    requests: 4
    tools:
      - name: get_weather
        parameters: {type: object, properties: {city: {type: string}}, required: [city]}
`

// TestProbeValidity: a /probe of a json_schema module (and of a tools
// module) succeeds on valid answers and fails on an invalid one, with the
// reason invalid_answer and, in its debug output, why.
func TestProbeValidity(t *testing.T) {
	url, sim, _ := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, kindsConfig, url), nil)
	for _, module := range []string{"json_schema", "tools"} {
		if err := sim.SetFaults(simulator.NoFaults()); err != nil {
			t.Fatal(err)
		}
		_, body := e.scrape(t, module, url, "10", true)
		if !strings.Contains(body, "probe_success 1") {
			t.Errorf("%s: valid answers did not succeed:\n%s", module, body)
		}
		// Every answer cut: the probe fails, and says why.
		f := simulator.NoFaults()
		f.InvalidStructured = 1
		if err := sim.SetFaults(f); err != nil {
			t.Fatal(err)
		}
		_, body = e.scrape(t, module, url, "10", true)
		if !strings.Contains(body, "probe_success 0") || !strings.Contains(body, `probe_failed_due_to{reason="invalid_answer"} 1`) {
			t.Errorf("%s: invalid answers did not fail the probe:\n%s", module, body)
		}
		line := regexp.MustCompile(`msg="Answer not valid" .*(structured|tool_call)=invalid_json .*why=".*(unexpected EOF|EOF)`)
		if !line.MatchString(body) {
			t.Errorf("%s: the debug output does not say why:\n%s", module, body)
		}
	}
}

// TestModuleKindsBuiltOnce: a module's kinds (its images encoded) are
// built at its first probe and shared by every later probe of the same
// configuration, however many run at once; a new configuration builds its
// own. Built per probe, each probe held its own copy of the images.
func TestModuleKindsBuiltOnce(t *testing.T) {
	const images = `  vision:
    target: sim
    requests: 2
    images: {count: 2, width: 64, height: 64}
`
	url, _, _ := startSim(t, instantSim())
	cfg := loadConfig(t, kindsConfig+images, url)
	e := newEnv(t, cfg, nil)
	for range 3 {
		if _, body := e.scrape(t, "vision", url, "10", false); !strings.Contains(body, "probe_success 1") {
			t.Fatalf("probe failed:\n%s", body)
		}
	}
	if n := strings.Count(e.logs.String(), "Building the module's request kinds"); n != 1 {
		t.Errorf("3 probes built the module's kinds %d times, want once:\n%s", n, e.logs.String())
	}
	m, ok := cfg.Module("vision")
	if !ok {
		t.Fatal("no module vision")
	}
	logger := slog.New(slog.DiscardHandler)
	first, err := e.h.kindsFor(cfg, "vision", m, logger)
	if err != nil || first == nil {
		t.Fatalf("kinds %v, %v", first, err)
	}
	var wg sync.WaitGroup
	got := make([]*plan.Kinds, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = e.h.kindsFor(cfg, "vision", m, logger)
		}()
	}
	wg.Wait()
	for i, k := range got {
		if k != first {
			t.Fatalf("call %d built the module's kinds again", i)
		}
	}
	reloaded := loadConfig(t, kindsConfig+images, url)
	m2, _ := reloaded.Module("vision")
	if k, _ := e.h.kindsFor(reloaded, "vision", m2, logger); k == first || k == nil {
		t.Errorf("a new configuration's module kept the old kinds (%p, the old %p)", k, first)
	}
}
