package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/memwatch"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestBenchNestedAnswers: a bench cell against a server whose every
// answer is nested 9,990 deep (20 KB, [[[...0...]]]), with a recursive
// response format. The bench ran out of memory in 14 s and wrote no
// report; now it writes its report, in which every successful answer is
// checked and invalid_json (config.MaxAnswerDepth), and the heap stays
// far below what one check took before (821 MB). A logic test: counts,
// and a memory bound that holds whatever the machine's speed.
func TestBenchNestedAnswers(t *testing.T) {
	testenv.Slow(t, "runs a bench of a 2-second cell in real time")
	t.Parallel()
	const deep = 9990
	chunk, err := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": strings.Repeat("[", deep) + "0" + strings.Repeat("]", deep)}, "finish_reason": nil}}})
	if err != nil {
		t.Fatal(err)
	}
	// Hand-written frames, in the shape of vLLM's chat completion chunks.
	end := `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", chunk, end)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	yml := fmt.Sprintf(`targets:
  - {name: nested, url: %s, model: m, timeout: 30s, metrics: {engine: none}}
bench:
  matrix:
    process: constant
    rates: [20]
    shapes:
      - name: nested
        input_tokens: 8
        output_tokens: 4
        response_format: {type: json_schema, schema: {type: array, items: {$ref: "#"}}}
  warmup: 0s
  duration: 2s
  repeats: 1
  stability: {enabled: false}
  prompt_set_size: 50
`, srv.URL)
	// Past the bound, the run is stopped (as SIGTERM would), so that
	// broken code fails the test rather than the machine.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := memwatch.Start(128<<20, cancel)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, ctx, "bench", "--config.file="+writeTestFile(t, dir, "b.yml", yml), "--output.dir="+out)
	peak, over := w.Stop()
	t.Logf("heap growth peak %d MB", peak>>20)
	if over {
		t.Fatalf("the bench grew the heap by %d MB", peak>>20)
	}
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)
	if len(r.Cells) != 1 {
		t.Fatalf("%d cells", len(r.Cells))
	}
	c := &r.Cells[0]
	checked := 0
	for i := range c.Repeats {
		for res, n := range c.Repeats[i].Stats.StructuredChecks {
			if res != observation.InvalidJSON {
				t.Errorf("%d answers %s", n, res)
			}
			checked += n
		}
	}
	if s := c.Summary.Successes; s < 10 || checked != s {
		t.Errorf("%d answers checked invalid_json of %d successes: want every one of at least 10", checked, s)
	}
}
