package prober

import (
	"net/http"
	"strings"
	"testing"
)

// TestProbeModelNotServedSaidOnce: probes of a module whose model the
// server (the simulator, serving sim-model) does not serve: each probe's
// debug output says so, naming the model and the models served, and the
// exporter's log says it once at warning level over all the probes' refused
// requests (its other lines of a probe are debug lines).
func TestProbeModelNotServedSaidOnce(t *testing.T) {
	const yml = `targets:
  - name: sim
    url: {{URL}}
    model: sim-model
modules:
  wrong:
    model: wrong-model
    requests: 2
    prompt:
      output_tokens: {dist: fixed, mean: 4}
`
	const said = `the server does not serve model \"wrong-model\"; it serves: sim-model`
	url, _, _ := startSim(t, instantSim())
	e := newEnv(t, loadConfig(t, yml, url), nil)
	const probes = 3
	for i := range probes {
		code, body := e.scrape(t, "wrong", url, "10", true)
		if code != http.StatusOK {
			t.Fatalf("probe %d: status %d: %s", i, code, body)
		}
		if !strings.Contains(body, said) {
			t.Errorf("probe %d: the debug output does not say why its requests were refused:\n%s", i, body)
		}
	}
	warned := 0
	for line := range strings.Lines(e.logs.String()) {
		if strings.Contains(line, said) && strings.Contains(line, "level=WARN") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the exporter's log warned %d times over %d probes of 2 refused requests, want once:\n%s", warned, probes, e.logs.String())
	}
}
