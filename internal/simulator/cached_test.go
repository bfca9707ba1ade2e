package simulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// cachedTokensRE finds every cached-token count of an answer: usage's
// prompt_tokens_details and input_tokens_details, SGLang's meta_info.
var cachedTokensRE = regexp.MustCompile(`"cached_tokens":(\d+)`)

// lastCachedTokens sends body to url with X-Request-Id id and returns the
// last cached-token count its answer carried (-1: none).
func lastCachedTokens(t *testing.T, client *http.Client, url, id string, body map[string]any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(simulator.RequestIDHeader, id)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d %v: %.300s", url, resp.StatusCode, err, data)
	}
	all := cachedTokensRE.FindAllSubmatch(data, -1)
	if len(all) == 0 {
		return -1
	}
	n, _ := strconv.Atoi(string(all[len(all)-1][1]))
	return n
}

// TestCachedTokensInUsage: every API that has a member for it reports the
// prompt tokens the prefix cache served, equal to the engine's own count
// of the request's first admission (the prefix log): none for a cold
// prompt, the shared full blocks for a repeated one.
func TestCachedTokensInUsage(t *testing.T) {
	const bs = 16
	prompt := words(1000, "p")
	msgs := []map[string]string{{"role": "user", "content": prompt}}
	for _, tc := range []struct {
		name, engine, path string
		body               map[string]any
	}{
		{"completions body", "", "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 4}},
		{"completions stream", "", "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 4, "stream": true, "stream_options": map[string]bool{"include_usage": true}}},
		{"chat body", "", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 4}},
		{"chat stream", "", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 4, "stream": true, "stream_options": map[string]bool{"include_usage": true}}},
		{"responses body", "", "/v1/responses", map[string]any{"input": prompt, "max_output_tokens": 4}},
		{"responses stream", "", "/v1/responses", map[string]any{"input": prompt, "max_output_tokens": 4, "stream": true}},
		{"sglang generate", simulator.EngineSGLang, "/generate", map[string]any{"text": prompt, "sampling_params": map[string]any{"max_new_tokens": 4}}},
		{"sglang stream", simulator.EngineSGLang, "/generate", map[string]any{"text": prompt, "stream": true, "sampling_params": map[string]any{"max_new_tokens": 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, sim, client := start(t, func(c *simulator.Config) {
				c.BlockSize = bs
				if tc.engine != "" {
					c.Engine = tc.engine
				}
			})
			first := lastCachedTokens(t, client, base+tc.path, "cold", tc.body)
			second := lastCachedTokens(t, client, base+tc.path, "warm", tc.body)
			cold, ok1 := sim.PrefixRecord("cold")
			warm, ok2 := sim.PrefixRecord("warm")
			if !ok1 || !ok2 {
				t.Fatalf("prefix records: %v %v", ok1, ok2)
			}
			if first != 0 || cold.HitTokens != 0 {
				t.Errorf("a cold prompt reported %d cached tokens (engine: %d), want 0", first, cold.HitTokens)
			}
			if want := (warm.PromptTokens - 1) / bs * bs; warm.HitTokens != want || second != want {
				t.Errorf("a repeated prompt of %d tokens reported %d cached tokens, the engine %d; want %d",
					warm.PromptTokens, second, warm.HitTokens, want)
			}
		})
	}
}
