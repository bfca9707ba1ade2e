package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// TestLandingWrongModelSaysWhatIsServed: a workload whose target names a
// model the server does not serve shows, as its last error, the sentence
// the log says (the model, and what the server serves), not the server's
// raw 404 body; and the table has TPOT and SLO met columns.
func TestLandingWrongModelSaysWhatIsServed(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.05
	simURL, _ := simulatortest.StartTest(t, cfg)
	file := writeConfig(t, fmt.Sprintf(`targets:
  - {name: wrong, url: %[1]q, model: meta-llama/Llama-3.1-8B-Instruct, timeout: 30s}
workloads:
  - name: wrong
    target: wrong
    arrival: {process: constant, rate: 5}
    prompt: {input_tokens: {dist: fixed, mean: 16}, output_tokens: {dist: fixed, mean: 4}}
`, simURL))
	base := startExporter(t, "--config.file="+file)
	var page string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page = string(b)
		if strings.Contains(page, "it serves: sim-model") {
			break
		}
	}
	if !strings.Contains(page, "the server does not serve model &#34;meta-llama/Llama-3.1-8B-Instruct&#34;; it serves: sim-model") {
		t.Fatalf("the landing page does not say what the server serves:\n%s", page)
	}
	if strings.Contains(page, "NotFoundError") || strings.Contains(page, "does not exist") {
		t.Errorf("the landing page shows the raw 404 body:\n%s", page)
	}
	for _, col := range []string{"<th>TPOT p50 / p99</th>", "<th>SLO met</th>"} {
		if !strings.Contains(page, col) {
			t.Errorf("the workloads table has no %s column", col)
		}
	}
}
