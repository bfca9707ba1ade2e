package prober

import (
	"regexp"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
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
      schema: {type: object, properties: {n: {type: integer}}, required: [n]}
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
