package simulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// generate sends one non-streaming request with X-Request-Id id (none when
// empty) and returns the answer's text and its usage.
func generate(t *testing.T, client *http.Client, url, id string, body map[string]any) (string, usage) {
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
	if id != "" {
		req.Header.Set(simulator.RequestIDHeader, id)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d", url, resp.StatusCode)
	}
	var out struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Choices[0].Text + out.Choices[0].Message.Content, out.Usage
}

// TestPrefixRecord: the prefix log gives each request's cached tokens at
// admission as the engine counted them. A second turn that extends the
// first hits the first prompt's full blocks, less its last token for chat
// (whose generation prompt is not the rendered assistant message's first
// token), and none of the reply (generated blocks are not cached); an
// unrelated prompt hits nothing; a request without an id is not logged.
func TestPrefixRecord(t *testing.T) {
	const bs = 16
	for _, tc := range []struct {
		name string
		chat bool
		// first is the first prompt's length in words; hit the second
		// turn's expected hit tokens, from the first turn's prompt tokens.
		first int
		hit   func(firstPrompt int) int
	}{
		{"completions extends prompt and reply", false, 100, func(p int) int { return p / bs * bs }},
		{"completions on a block boundary", false, 96, func(p int) int { return p / bs * bs }},
		{"chat extends messages", true, 100, func(p int) int { return (p - 1) / bs * bs }},
		{"chat on a block boundary", true, 92, func(p int) int { return (p - 1) / bs * bs }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, sim, client := start(t, func(c *simulator.Config) { c.BlockSize = bs })
			user1, user2 := words(tc.first, "u"), words(30, "v")
			var url string
			var body1, body2 map[string]any
			if tc.chat {
				url = base + "/v1/chat/completions"
				body1 = map[string]any{"messages": []map[string]string{{"role": "user", "content": user1}}, "max_tokens": 40, "ignore_eos": true}
			} else {
				url = base + "/v1/completions"
				body1 = map[string]any{"prompt": user1, "max_tokens": 40, "ignore_eos": true}
			}
			reply, u1 := generate(t, client, url, "s-0", body1)
			if tc.chat {
				body2 = map[string]any{"messages": []map[string]string{
					{"role": "user", "content": user1}, {"role": "assistant", "content": reply}, {"role": "user", "content": user2}},
					"max_tokens": 8}
			} else {
				body2 = map[string]any{"prompt": user1 + reply + "\n" + user2, "max_tokens": 8}
			}
			_, u2 := generate(t, client, url, "s-1", body2)
			generate(t, client, url, "other", map[string]any{"prompt": words(200, "z"), "max_tokens": 2, "messages": []map[string]string{{"role": "user", "content": words(200, "z")}}})
			generate(t, client, url, "", body1)

			r1, ok1 := sim.PrefixRecord("s-0")
			r2, ok2 := sim.PrefixRecord("s-1")
			ro, oko := sim.PrefixRecord("other")
			if !ok1 || !ok2 || !oko {
				t.Fatalf("records found: %v %v %v", ok1, ok2, oko)
			}
			if r1.PromptTokens != u1.PromptTokens || r2.PromptTokens != u2.PromptTokens {
				t.Errorf("prompt tokens %d, %d; usage says %d, %d", r1.PromptTokens, r2.PromptTokens, u1.PromptTokens, u2.PromptTokens)
			}
			if r1.HitTokens != 0 {
				t.Errorf("first turn hit %d tokens of a cold cache", r1.HitTokens)
			}
			if want := tc.hit(u1.PromptTokens); r2.HitTokens != want || want == 0 {
				t.Errorf("second turn hit %d tokens, want %d (first prompt %d tokens, block %d)", r2.HitTokens, want, u1.PromptTokens, bs)
			}
			if ro.HitTokens != 0 {
				t.Errorf("an unrelated prompt hit %d tokens", ro.HitTokens)
			}
			for _, r := range []simulator.PrefixRecord{r1, r2, ro} {
				if r.Finished.IsZero() || r.Finished.Before(r.Arrival) {
					t.Errorf("%s: arrival %v, finished %v", r.RequestID, r.Arrival, r.Finished)
				}
			}
			if r2.Arrival.Before(r1.Finished) {
				t.Errorf("the second turn arrived at %v, before the first finished at %v", r2.Arrival, r1.Finished)
			}
			if _, ok := sim.PrefixRecord(""); ok {
				t.Error("a request without X-Request-Id was logged")
			}
		})
	}
}
