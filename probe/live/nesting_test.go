package live

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/memwatch"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// nestedAnswerServer is an OpenAI chat server whose every answer is the
// issue's: [[[...0...]]] nested 9,990 deep (20 KB, what a model stuck in a
// loop can emit), as content, or as the arguments of a call to f under
// "a". Hand-written frames, in the shape of vLLM's chat completion chunks.
func nestedAnswerServer(t *testing.T, asCall bool) string {
	t.Helper()
	const deep = 9990
	answer := strings.Repeat("[", deep) + "0" + strings.Repeat("]", deep)
	delta := map[string]any{"content": answer}
	if asCall {
		delta = map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_0", "type": "function",
			"function": map[string]any{"name": "f", "arguments": `{"a":` + answer + `}`}}}}
	}
	chunk, err := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}})
	if err != nil {
		t.Fatal(err)
	}
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
	return srv.URL
}

// TestNestedAnswersChecked: the live exporter's workloads against a
// server whose every answer is nested 9,990 deep, checked against a
// recursive schema (a response format, a tool's parameters), at 40 answers
// a second. Every successful answer is counted as checked, invalid_json
// (config.MaxAnswerDepth), and the heap stays far below what the checks
// took before: each allocated 821 MB, and the exporter died out of memory
// in seconds at 4 answers a second. A logic test: counts, and a memory
// bound that holds whatever the machine's speed.
func TestNestedAnswersChecked(t *testing.T) {
	for _, tc := range []struct {
		name, kinds string
		asCall      bool
	}{
		{"response format", `    response_format: {type: json_schema, schema: {type: array, items: {$ref: "#"}}}
`, false},
		{"tool call", `    tools:
      - name: f
        parameters: {type: object, properties: {a: {$ref: "#/$defs/list"}}, $defs: {list: {type: array, items: {$ref: "#/$defs/list"}}}}
    tool_choice: required
`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := nestedAnswerServer(t, tc.asCall)
			c, err := config.Parse([]byte(fmt.Sprintf(`
targets:
  - {name: t, url: %q, model: m, timeout: 10s}
workloads:
  - name: w
    target: t
    duration: 500ms
    arrival: {process: constant, rate: 40}
%s`, url, tc.kinds)), filepath.Join(t.TempDir(), "c.yml"))
			if err != nil {
				t.Fatal(err)
			}
			runners, clients, err := Build(context.Background(), c, NewMetrics(prometheus.NewRegistry()), Options{DegradedLag: time.Second}, slog.New(slog.DiscardHandler))
			t.Cleanup(func() {
				for _, cl := range clients {
					cl.Close()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			r := runners[0]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			w := memwatch.Start(64<<20, cancel)
			r.Run(ctx)
			peak, over := w.Stop()
			t.Logf("heap growth peak %d KB", peak>>10)
			if over {
				t.Fatalf("the run grew the heap by %d MB", peak>>20)
			}
			m := liveSeries(r).m
			successes := testutil.ToFloat64(m.requests.WithLabelValues("t", "m", "w", string(observation.Success)))
			checks := m.validity.structured
			if tc.asCall {
				checks = m.validity.toolCalls
			}
			invalid := testutil.ToFloat64(checks.WithLabelValues("t", "m", "w", observation.InvalidJSON))
			if successes < 5 || invalid != successes {
				t.Errorf("%v answers succeeded, %v checked invalid_json: want every one of at least 5", successes, invalid)
			}
			for _, res := range observation.ValidityResults {
				if n := testutil.ToFloat64(checks.WithLabelValues("t", "m", "w", res)); res != observation.InvalidJSON && n != 0 {
					t.Errorf("%v answers %s", n, res)
				}
			}
		})
	}
}
