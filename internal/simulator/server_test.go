package simulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"go.uber.org/goleak"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The acceptance example: role chunk, 16 one-token content chunks, the usage
// chunk, [DONE], each JSON chunk stamped with its emit time.
func TestAcceptanceChatStream(t *testing.T) {
	for _, scale := range []float64{0, 0.05} {
		t.Run(fmt.Sprintf("time scale %v", scale), func(t *testing.T) {
			base, _, client := start(t, func(c *simulator.Config) { c.TimeScale = scale })
			res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", map[string]any{
				"model":          "sim-model",
				"messages":       []map[string]any{{"role": "user", "content": "a b c"}},
				"max_tokens":     16,
				"ignore_eos":     true,
				"stream":         true,
				"stream_options": map[string]any{"include_usage": true},
			}, nil)
			if res.status != 200 || res.readErr != nil {
				t.Fatalf("status %d, read error %v", res.status, res.readErr)
			}
			if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("content type %q", ct)
			}
			ev := res.events
			if len(ev) != 19 {
				t.Fatalf("%d events, want 19 (role, 16 content, usage, [DONE])", len(ev))
			}
			arrival := res.arrival(t)
			prevEmit := arrival
			var text strings.Builder
			for i, c := range ev[:18] {
				if c.malformed || c.done {
					t.Fatalf("event %d: %q is not a JSON chunk", i, c.raw)
				}
				if c.Object != "chat.completion.chunk" || c.Model != "sim-model" || c.ID != ev[0].ID || !strings.HasPrefix(c.ID, "chatcmpl-") {
					t.Errorf("event %d: object %q model %q id %q", i, c.Object, c.Model, c.ID)
				}
				if c.SimEmit < prevEmit {
					t.Errorf("event %d: emit %d before the previous stamp %d", i, c.SimEmit, prevEmit)
				}
				prevEmit = c.SimEmit
				if i < 17 && !strings.Contains(c.raw, `"usage":null`) {
					t.Errorf("event %d lacks \"usage\":null: %s", i, c.raw)
				}
			}
			role := ev[0].Choices
			if len(role) != 1 || role[0].Delta == nil || role[0].Delta.Role == nil || *role[0].Delta.Role != "assistant" {
				t.Fatalf("first chunk is not the role chunk: %s", ev[0].raw)
			}
			if _, ok := ev[0].content(); ok {
				t.Errorf("role chunk carries content: %s", ev[0].raw)
			}
			for i := 1; i <= 16; i++ {
				piece, ok := ev[i].content()
				if !ok {
					t.Fatalf("event %d has no content: %s", i, ev[i].raw)
				}
				if !strings.HasPrefix(piece, " ") || simulator.CountTokens(piece) != 1 {
					t.Errorf("event %d content %q is not one space-led token", i, piece)
				}
				text.WriteString(piece)
				fr := ev[i].Choices[0].FinishReason
				switch {
				case i < 16 && fr != nil:
					t.Errorf("event %d finish_reason %q, want null", i, *fr)
				case i == 16 && (fr == nil || *fr != "length"):
					t.Errorf("last content chunk finish_reason %v, want length", fr)
				}
			}
			u := ev[17]
			if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 16 || u.Usage.PromptTokens != 7 || u.Usage.TotalTokens != 23 {
				t.Errorf("usage chunk %s, want completion 16, prompt 7, total 23, no choices", u.raw)
			}
			if !ev[18].done {
				t.Errorf("last event %q, want [DONE]", ev[18].raw)
			}
			if n := mustTokenCount(t, client, base, text.String()); n != 16 {
				t.Errorf("output text tokenizes to %d tokens, want 16", n)
			}
		})
	}
}

func TestCompletionShapes(t *testing.T) {
	base, _, client := start(t, nil)
	tests := []struct {
		name       string
		path       string
		body       map[string]any
		wantObject string
		wantPrompt int
	}{
		{"completions stream", "/v1/completions",
			map[string]any{"prompt": words(40, "w"), "max_tokens": 9, "ignore_eos": true, "stream": true},
			"text_completion", 40},
		{"completions token ids", "/v1/completions",
			map[string]any{"prompt": []int{1, 2, 3, 4, 5}, "max_tokens": 9, "ignore_eos": true, "stream": true},
			"text_completion", 5},
		{"completions non-stream", "/v1/completions",
			map[string]any{"prompt": []string{words(12, "w")}, "max_tokens": 9, "ignore_eos": true},
			"text_completion", 12},
		{"chat non-stream", "/v1/chat/completions",
			map[string]any{"messages": []map[string]any{
				{"role": "system", "content": "be brief"},
				{"role": "user", "content": []map[string]any{{"type": "text", "text": "one two"}, {"type": "text", "text": "three"}}},
			}, "max_completion_tokens": 9, "ignore_eos": true},
			"chat.completion", 3 + 2 + 3 + 3 + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.body["stream"] == true {
				res := streamRequest(t, context.Background(), client, base+tc.path, tc.body, nil)
				if res.status != 200 || res.readErr != nil {
					t.Fatalf("status %d, read error %v", res.status, res.readErr)
				}
				c := res.contents()
				if len(c) != 9 {
					t.Fatalf("%d content chunks, want 9", len(c))
				}
				for _, e := range c {
					if e.Object != tc.wantObject {
						t.Errorf("object %q, want %q", e.Object, tc.wantObject)
					}
				}
				if fr := c[8].Choices[0].FinishReason; fr == nil || *fr != "length" {
					t.Errorf("finish_reason %v, want length", fr)
				}
				if last := res.events[len(res.events)-1]; !last.done {
					t.Errorf("stream does not end with [DONE]")
				}
				for _, e := range res.events {
					if e.Usage != nil {
						t.Errorf("usage chunk without include_usage: %s", e.raw)
					}
				}
				return
			}
			resp, err := post(t, context.Background(), client, base+tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var c chunk
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, decode %v", resp.StatusCode, err)
			}
			if c.Object != tc.wantObject || c.Usage == nil || len(c.Choices) != 1 {
				t.Fatalf("body %+v", c)
			}
			if c.Usage.PromptTokens != tc.wantPrompt || c.Usage.CompletionTokens != 9 || c.Usage.TotalTokens != tc.wantPrompt+9 {
				t.Errorf("usage %+v, want prompt %d completion 9", *c.Usage, tc.wantPrompt)
			}
			text := ""
			if c.Choices[0].Message != nil {
				text = c.Choices[0].Message.Content
				if c.Choices[0].Message.Role != "assistant" {
					t.Errorf("role %q", c.Choices[0].Message.Role)
				}
			} else if c.Choices[0].Text != nil {
				text = *c.Choices[0].Text
			}
			if n := mustTokenCount(t, client, base, text); n != 9 {
				t.Errorf("text %q tokenizes to %d, want 9", text, n)
			}
			arrival, _ := json.Number(resp.Header.Get(simulator.ArrivalHeader)).Int64()
			if c.SimArrival != arrival || c.SimEmit < c.SimArrival || arrival == 0 {
				t.Errorf("sim_arrival %d (header %d), sim_emit %d", c.SimArrival, arrival, c.SimEmit)
			}
		})
	}
}

func TestOutputLengthWithEOS(t *testing.T) {
	base, _, client := start(t, nil)
	lengths := map[int]int{}
	for i := range 60 {
		body := map[string]any{"prompt": words(8, fmt.Sprintf("p%d-", i)), "max_tokens": 20, "min_tokens": 5}
		var c chunk
		b, _ := json.Marshal(body)
		if st := getJSON(t, client, http.MethodPost, base+"/v1/completions", bytes.NewReader(b), &c); st != 200 {
			t.Fatalf("status %d", st)
		}
		n := c.Usage.CompletionTokens
		if n < 5 || n > 20 {
			t.Errorf("completion_tokens %d outside [min_tokens 5, max_tokens 20]", n)
		}
		want := "stop"
		if n == 20 {
			want = "length"
		}
		if fr := c.Choices[0].FinishReason; fr == nil || *fr != want {
			t.Errorf("%d tokens with finish_reason %v, want %s", n, fr, want)
		}
		lengths[n]++
		// The same request again gives the same completion.
		var again chunk
		getJSON(t, client, http.MethodPost, base+"/v1/completions", bytes.NewReader(b), &again)
		if *again.Choices[0].Text != *c.Choices[0].Text {
			t.Errorf("same request, different text: %q vs %q", *c.Choices[0].Text, *again.Choices[0].Text)
		}
	}
	// Uniform over 16 values for 60 prompts: a degenerate draw would show
	// few distinct lengths (expected about 15.5; 8 is far below).
	if len(lengths) < 8 {
		t.Errorf("only %d distinct output lengths over 60 prompts: %v", len(lengths), lengths)
	}
}

func TestTokenize(t *testing.T) {
	base, _, client := start(t, nil)
	tests := []struct {
		name string
		body string
		want int
	}{
		{"prompt", `{"prompt": "a b  c\nd"}`, 4},
		{"empty prompt", `{"prompt": ""}`, 0},
		{"messages", `{"messages": [{"role": "user", "content": "a b c"}]}`, 7},
		{"messages without generation prompt", `{"messages": [{"role": "user", "content": "a b c"}], "add_generation_prompt": false}`, 6},
		{"two messages", `{"model": "sim-model", "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "a b c"}]}`, 3 + 1 + 3 + 3 + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out struct {
				Count       int   `json:"count"`
				MaxModelLen int   `json:"max_model_len"`
				Tokens      []int `json:"tokens"`
			}
			if st := getJSON(t, client, http.MethodPost, base+"/tokenize", strings.NewReader(tc.body), &out); st != 200 {
				t.Fatalf("status %d", st)
			}
			if out.Count != tc.want || len(out.Tokens) != tc.want || out.MaxModelLen != 32768 {
				t.Errorf("count %d, %d tokens, max_model_len %d; want %d tokens", out.Count, len(out.Tokens), out.MaxModelLen, tc.want)
			}
		})
	}
	// The chat request's prompt_tokens agree with /tokenize.
	var out struct{ Count int }
	getJSON(t, client, http.MethodPost, base+"/tokenize", strings.NewReader(`{"messages": [{"role": "user", "content": "`+words(30, "q")+`"}]}`), &out)
	var c chunk
	getJSON(t, client, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"messages": [{"role": "user", "content": "`+words(30, "q")+`"}], "max_tokens": 2}`), &c)
	if c.Usage == nil || c.Usage.PromptTokens != out.Count || out.Count != 34 {
		t.Errorf("tokenize count %d, chat prompt_tokens %+v, want 34", out.Count, c.Usage)
	}
}

func TestBadRequests(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) { c.MaxModelLen = 100 })
	tests := []struct {
		name, path, body string
		status           int
		errType          string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, "BadRequestError"},
		{"malformed JSON completions", "/v1/completions", `not json`, 400, "BadRequestError"},
		{"trailing data", "/v1/completions", `{"prompt": "a"} x`, 400, "BadRequestError"},
		{"wrong type", "/v1/completions", `{"prompt": "a", "max_tokens": "ten"}`, 400, "BadRequestError"},
		{"no prompt", "/v1/completions", `{"max_tokens": 3}`, 400, "BadRequestError"},
		{"empty prompt", "/v1/completions", `{"prompt": "  "}`, 400, "BadRequestError"},
		{"batched prompt", "/v1/completions", `{"prompt": ["a", "b"]}`, 400, "BadRequestError"},
		{"no messages", "/v1/chat/completions", `{"messages": []}`, 400, "BadRequestError"},
		{"too long", "/v1/completions", `{"prompt": "` + words(90, "w") + `", "max_tokens": 11}`, 400, "BadRequestError"},
		{"prompt too long", "/v1/completions", `{"prompt": "` + words(100, "w") + `"}`, 400, "BadRequestError"},
		{"max_tokens zero", "/v1/completions", `{"prompt": "a", "max_tokens": 0}`, 400, "BadRequestError"},
		{"min above max", "/v1/completions", `{"prompt": "a", "max_tokens": 3, "min_tokens": 4}`, 400, "BadRequestError"},
		{"n=2", "/v1/completions", `{"prompt": "a", "n": 2}`, 400, "BadRequestError"},
		{"unknown model", "/v1/completions", `{"model": "gpt-9", "prompt": "a"}`, 404, "NotFoundError"},
		{"tokenize both", "/tokenize", `{"prompt": "a", "messages": []}`, 400, "BadRequestError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body struct {
				Error *struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			st := getJSON(t, client, http.MethodPost, base+tc.path, strings.NewReader(tc.body), &body)
			if st != tc.status || body.Error == nil || body.Error.Type != tc.errType || body.Error.Code != tc.status || body.Error.Message == "" {
				t.Errorf("status %d, error %+v; want %d %s", st, body.Error, tc.status, tc.errType)
			}
		})
	}
	// The default max_tokens is capped by the context, not rejected.
	var c chunk
	st := getJSON(t, client, http.MethodPost, base+"/v1/completions", strings.NewReader(`{"prompt": "`+words(90, "w")+`", "ignore_eos": true}`), &c)
	if st != 200 || c.Usage.CompletionTokens != 10 {
		t.Errorf("status %d, usage %+v; want 10 tokens (100 - 90)", st, c.Usage)
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	base, _, client := start(t, nil)
	var c chunk
	st := getJSON(t, client, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
		`{"messages": [{"role": "user", "content": "hi", "name": "x"}], "max_tokens": 3, "ignore_eos": true,
		  "temperature": 0.7, "top_p": 0.9, "stop": ["\n"], "vendor_extension": {"nested": [1, 2]}}`), &c)
	if st != 200 || c.Usage == nil || c.Usage.CompletionTokens != 3 {
		t.Errorf("status %d, usage %+v", st, c.Usage)
	}
}

func TestModelsHealthVersion(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) { c.Model = "org/my-model" })
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if st := getJSON(t, client, http.MethodGet, base+"/v1/models", nil, &models); st != 200 {
		t.Fatalf("models status %d", st)
	}
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "org/my-model" || models.Data[0].Object != "model" || models.Data[0].MaxModelLen != 32768 {
		t.Errorf("models %+v", models)
	}
	if st := getJSON(t, client, http.MethodGet, base+"/health", nil, nil); st != 200 {
		t.Errorf("health status %d", st)
	}
	var v struct{ Version string }
	if st := getJSON(t, client, http.MethodGet, base+"/version", nil, &v); st != 200 || v.Version != simulator.Version {
		t.Errorf("version status %d body %+v", st, v)
	}
	if st := getJSON(t, client, http.MethodGet, base+"/v1/completions", nil, nil); st != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/completions status %d, want 405", st)
	}
	// The metrics carry the model_name label of the served model.
	resp, _ := client.Get(base + "/metrics")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `vllm:num_requests_running{model_name="org/my-model"} 0`) {
		t.Errorf("metrics lack the model_name label:\n%s", b)
	}
}

// After a concurrent burst, the counters agree with what the responses said.
func TestMetricsAgreeWithResponsesAfterBurst(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) {
		c.TimeScale = 0.01
		c.MaxNumSeqs = 16 // so that some requests queue
	})
	const n = 64
	type outcome struct {
		prompt, completion int
		reason             string
	}
	results := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			prompt := words(5+i*3, fmt.Sprintf("r%d-", i))
			maxTokens := 8 + i%17
			eos := i%3 == 0
			if i%2 == 0 { // streaming, usage from the usage chunk
				res := streamRequest(t, context.Background(), client, base+"/v1/completions", map[string]any{
					"prompt": prompt, "max_tokens": maxTokens, "ignore_eos": !eos, "stream": true,
					"stream_options": map[string]any{"include_usage": true},
				}, nil)
				ev := res.events
				if res.readErr != nil || len(ev) < 2 || ev[len(ev)-2].Usage == nil {
					t.Errorf("request %d: bad stream (%v)", i, res.readErr)
					return
				}
				u := ev[len(ev)-2].Usage
				c := res.contents()
				if len(c) != u.CompletionTokens {
					t.Errorf("request %d: %d content chunks, usage says %d", i, len(c), u.CompletionTokens)
				}
				results[i] = outcome{u.PromptTokens, u.CompletionTokens, *c[len(c)-1].Choices[0].FinishReason}
				return
			}
			b, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": maxTokens, "ignore_eos": !eos})
			var c chunk
			if st := getJSON(t, client, http.MethodPost, base+"/v1/completions", bytes.NewReader(b), &c); st != 200 {
				t.Errorf("request %d: status %d", i, st)
				return
			}
			results[i] = outcome{c.Usage.PromptTokens, c.Usage.CompletionTokens, *c.Choices[0].FinishReason}
		})
	}
	wg.Wait()
	var prompt, completion, itl int
	reasons := map[string]int{}
	for _, r := range results {
		prompt += r.prompt
		completion += r.completion
		itl += r.completion - 1
		reasons[r.reason]++
	}
	m := scrape(t, client, base)
	checks := []struct {
		series string
		want   int
	}{
		{"vllm:generation_tokens_total", completion},
		{"vllm:prompt_tokens_total", prompt},
		{`vllm:request_success_total{finished_reason="length"}`, reasons["length"]},
		{`vllm:request_success_total{finished_reason="stop"}`, reasons["stop"]},
		{`vllm:request_success_total{finished_reason="abort"}`, 0},
		{"vllm:time_to_first_token_seconds_count", n},
		{"vllm:e2e_request_latency_seconds_count", n},
		{"vllm:inter_token_latency_seconds_count", itl},
		{"vllm:prefix_cache_queries_total", prompt},
	}
	for _, c := range checks {
		if got, ok := m[c.series]; !ok || got != float64(c.want) {
			t.Errorf("%s = %v (present %v), responses say %d", c.series, got, ok, c.want)
		}
	}
	if reasons["stop"] == 0 || reasons["length"] == 0 {
		t.Errorf("burst did not exercise both finish reasons: %v", reasons)
	}
	waitFor(t, "the engine to go idle", func() bool {
		m := scrape(t, client, base)
		return m["vllm:num_requests_running"] == 0 && m["vllm:num_requests_waiting"] == 0 && m["vllm:kv_cache_usage_perc"] == 0
	})
}

// TTFT grows with queue depth, measured with the ground-truth stamps.
func TestTTFTGrowsWithQueueDepth(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) {
		c.TimeScale = 0.1 // 2 ms steps
		c.MaxNumSeqs = 1
	})
	meanTTFT := func(depth int) time.Duration {
		ttfts := make([]time.Duration, depth)
		var wg sync.WaitGroup
		for i := range depth {
			wg.Go(func() {
				res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody(words(10, fmt.Sprint(i)), 8, true), nil)
				ttfts[i] = res.ttft(t)
			})
		}
		wg.Wait()
		var sum time.Duration
		for _, d := range ttfts {
			sum += d
		}
		return sum / time.Duration(depth)
	}
	one, eight := meanTTFT(1), meanTTFT(8)
	// With one batch slot, the k-th request waits for k-1 requests of 8
	// steps: the mean wait is 28 steps against 1.
	if eight <= 4*one {
		t.Errorf("mean TTFT at depth 8 = %v, at depth 1 = %v; want more than 4x", eight, one)
	}
	t.Logf("mean TTFT depth 1: %v, depth 8: %v", one, eight)
}

func TestTTFTGrowsWithPromptLength(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) { c.TimeScale = 0.1 })
	short := streamRequest(t, context.Background(), client, base+"/v1/completions",
		map[string]any{"prompt": words(10, "s"), "max_tokens": 2, "stream": true}, nil).ttft(t)
	long := streamRequest(t, context.Background(), client, base+"/v1/completions",
		map[string]any{"prompt": words(8000, "l"), "max_tokens": 2, "stream": true}, nil).ttft(t)
	// 8000 tokens at 10,000 tokens/s plus a 20 ms step, at time scale 0.1:
	// the engine sleeps at least this long before the first token.
	if floor := 82 * time.Millisecond; long < floor {
		t.Errorf("TTFT of an 8000-token prompt %v, below the modelled %v", long, floor)
	}
	if long <= short {
		t.Errorf("TTFT long %v <= short %v", long, short)
	}
}

func TestPrefixCacheOverHTTP(t *testing.T) {
	// 420 ms of modelled prefill for the cold prompt, 100 ms for the warm
	// one, at time scale 0.25.
	base, _, client := start(t, func(c *simulator.Config) { c.TimeScale = 0.25 })
	shared := words(3200, "shared")
	a := streamRequest(t, context.Background(), client, base+"/v1/completions",
		map[string]any{"prompt": shared + " " + words(800, "a"), "max_tokens": 2, "stream": true}, nil)
	before := scrape(t, client, base)
	b := streamRequest(t, context.Background(), client, base+"/v1/completions",
		map[string]any{"prompt": shared + " " + words(800, "b"), "max_tokens": 2, "stream": true}, nil)
	after := scrape(t, client, base)
	if got := after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]; got != 3200 {
		t.Errorf("hits grew by %v, want 3200", got)
	}
	if got := after["vllm:prefix_cache_queries_total"]; got != 8000 {
		t.Errorf("queries %v, want 8000", got)
	}
	if a.ttft(t) <= b.ttft(t) {
		t.Errorf("TTFT with a cached prefix %v not below the cold %v", b.ttft(t), a.ttft(t))
	}
}

// TestKVCacheFullMakesRequestsWait: a request that finds no KV room waits,
// and the waiting gauge shows it. A decodes at the default 20 ms a step, so
// B waits some 2.4 s: the scrape loop has that long to see the gauge, which
// a busy machine cannot take from it (at a tenth of that, 240 ms, it missed
// the window beside two busy loops).
func TestKVCacheFullMakesRequestsWait(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) {
		c.TimeScale = 1
		c.KVBlocks = 64
		c.MaxModelLen = 1024
	})
	// A holds 57 of 64 blocks and grows to 63; B needs 13 and must wait.
	aFirst := make(chan struct{})
	var a, b *streamResult
	var wg sync.WaitGroup
	wg.Go(func() {
		once := sync.OnceFunc(func() { close(aFirst) })
		r := streamRequest(t, context.Background(), client, base+"/v1/completions",
			map[string]any{"prompt": words(900, "a"), "max_tokens": 120, "ignore_eos": true, "stream": true},
			func(c chunk) bool {
				if _, ok := c.content(); ok {
					once()
				}
				return true
			})
		once()
		a = r
	})
	<-aFirst
	wg.Go(func() {
		b = streamRequest(t, context.Background(), client, base+"/v1/completions",
			map[string]any{"prompt": words(200, "b"), "max_tokens": 5, "ignore_eos": true, "stream": true}, nil)
	})
	sawWaiting := false
	waitFor(t, "B to be queued behind A", func() bool {
		m := scrape(t, client, base)
		sawWaiting = m["vllm:num_requests_waiting"] == 1 && m["vllm:num_requests_running"] == 1
		return sawWaiting || m[`vllm:request_success_total{finished_reason="length"}`] > 0
	})
	wg.Wait()
	if !sawWaiting {
		t.Error("the waiting gauge never showed B waiting")
	}
	ac, bc := a.contents(), b.contents()
	if len(ac) != 120 || len(bc) != 5 {
		t.Fatalf("A got %d tokens, B %d", len(ac), len(bc))
	}
	if bc[0].SimEmit <= ac[len(ac)-1].SimEmit {
		t.Error("B's first token was emitted before A's last: B did not wait for KV room")
	}
	if m := scrape(t, client, base); m["vllm:num_preemptions_total"] != 0 {
		t.Errorf("preemptions %v, want 0", m["vllm:num_preemptions_total"])
	}
}

func TestKVCacheFullPreempts(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) {
		c.TimeScale = 0.01
		c.KVBlocks = 64
		c.MaxModelLen = 1024
	})
	// Each grows to 760 tokens = 48 blocks: both cannot fit.
	aFirst := make(chan struct{})
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			if i == 1 {
				<-aFirst
			}
			once := sync.OnceFunc(func() {
				if i == 0 {
					close(aFirst)
				}
			})
			r := streamRequest(t, context.Background(), client, base+"/v1/completions",
				map[string]any{"prompt": words(160, fmt.Sprint(i)), "max_tokens": 600, "ignore_eos": true, "stream": true},
				func(chunk) bool { once(); return true })
			once()
			counts[i] = len(r.contents())
		})
	}
	wg.Wait()
	m := scrape(t, client, base)
	if m["vllm:num_preemptions_total"] < 1 {
		t.Errorf("preemptions %v, want at least 1", m["vllm:num_preemptions_total"])
	}
	if counts[0] != 600 || counts[1] != 600 || m["vllm:generation_tokens_total"] != 1200 {
		t.Errorf("tokens %v, generation_tokens_total %v; want 600 each", counts, m["vllm:generation_tokens_total"])
	}
}

func TestClientDisconnectAborts(t *testing.T) {
	base, _, client := start(t, func(c *simulator.Config) { c.TimeScale = 0.1 })
	ctx, cancel := context.WithCancel(context.Background())
	seen := 0
	streamRequest(t, ctx, client, base+"/v1/chat/completions", chatBody("hello", 1000, true), func(c chunk) bool {
		if _, ok := c.content(); ok {
			seen++
		}
		return seen < 2
	})
	cancel()
	waitFor(t, "the abort to be counted", func() bool {
		m := scrape(t, client, base)
		return m[`vllm:request_success_total{finished_reason="abort"}`] == 1 &&
			m["vllm:num_requests_running"] == 0 && m["vllm:kv_cache_usage_perc"] == 0
	})
}

func TestCloseEndsInFlightStreams(t *testing.T) {
	base, sim, client := start(t, func(c *simulator.Config) { c.TimeScale = 0.1 })
	first := true
	res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("hello", 1000, true), func(c chunk) bool {
		if _, ok := c.content(); ok && first {
			first = false
			sim.Close()
		}
		return true
	})
	if res.readErr == nil {
		t.Error("the stream ended cleanly after Close; want an abrupt end")
	}
	for _, e := range res.events {
		if e.done {
			t.Error("[DONE] after Close")
		}
	}
	if st := getJSON(t, client, http.MethodPost, base+"/v1/completions", strings.NewReader(`{"prompt": "a"}`), nil); st != 503 {
		t.Errorf("status after Close %d, want 503", st)
	}
}

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.1
	go func() { errc <- simulator.Serve(ctx, addr, cfg, nil) }()
	client := newClient(t)
	base := "http://" + addr
	waitFor(t, "the server to listen", func() bool {
		resp, err := client.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	res := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a b c", 16, true), nil)
	if len(res.contents()) != 16 || !res.events[len(res.events)-1].done {
		t.Errorf("got %d content chunks", len(res.contents()))
	}
	// A stream in flight when the context ends is cut.
	cut := streamRequest(t, context.Background(), client, base+"/v1/chat/completions", chatBody("a b c", 1000, true), func(c chunk) bool {
		cancel()
		return true
	})
	if cut.readErr == nil {
		t.Error("stream in flight ended cleanly at shutdown")
	}
	if err := <-errc; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestAddFlags(t *testing.T) {
	app := kingpin.New("test", "")
	cmd := app.Command("simulate", "")
	cfg := simulator.AddFlags(cmd)
	if _, err := app.Parse([]string{"simulate"}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*cfg, simulator.DefaultConfig()) {
		t.Errorf("flag defaults %+v, want DefaultConfig %+v", *cfg, simulator.DefaultConfig())
	}
	_, err := app.Parse([]string{"simulate", "--sim.model=m", "--sim.time-scale=0.5", "--sim.decode-step=5ms",
		"--sim.decode-per-seq=1ms", "--sim.prefill-tokens-per-second=500", "--sim.max-num-seqs=4",
		"--sim.max-batched-tokens=64", "--sim.kv-blocks=100", "--sim.block-size=8", "--sim.seed=7", "--sim.max-model-len=512", "--sim.max-lora=3",
		"--sim.lora-adapters=a,b", "--sim.lora-adapters=c", "--sim.image-tokens=100",
		"--fault.slowdown=2", "--fault.error-rate=0.25", "--fault.error-status=429",
		"--fault.stall-before-first-token=1s", "--fault.stall-mid-stream=2s", "--fault.stall-after-tokens=3",
		"--fault.disconnect-after-tokens=4", "--fault.malformed-after-tokens=5", "--fault.slow-headers=6s", "--sim.engine=tgi", "--sim.tool-calls=3"})
	if err != nil {
		t.Fatal(err)
	}
	want := simulator.Config{Model: "m", MaxModelLen: 512, TimeScale: 0.5, DecodeStep: 5 * time.Millisecond,
		DecodePerSeq: time.Millisecond, PrefillTokensPerSecond: 500, MaxLoRA: 3, LoRAAdapters: []string{"a", "b", "c"}, ImageTokens: 100,
		MaxNumSeqs: 4, MaxBatchedTokens: 64,
		KVBlocks: 100, BlockSize: 8, Seed: 7, Faults: simulator.Faults{Slowdown: 2, ErrorRate: 0.25, ErrorStatus: 429,
			StallBeforeFirstToken: time.Second, StallMidStream: 2 * time.Second, StallAfterTokens: 3,
			DisconnectAfterTokens: 4, MalformedAfterTokens: 5, SlowHeaders: 6 * time.Second}, Engine: "tgi", ToolCalls: 3}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("parsed %+v, want %+v", *cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("parsed config invalid: %v", err)
	}
}

// TestAddFlagsHelpAndEnums: the two flags without a default show a value in
// --help, not kingpin's SIM.REASONING-FIELD, and a typo in either is refused
// when the command line is parsed.
func TestAddFlagsHelpAndEnums(t *testing.T) {
	app := kingpin.New("test", "")
	cmd := app.Command("simulate", "")
	simulator.AddFlags(cmd)
	for _, f := range cmd.Model().Flags {
		if strings.Contains(f.FormatPlaceHolder(), "SIM.") || strings.Contains(f.FormatPlaceHolder(), "FAULT.") {
			t.Errorf("--%s shows the placeholder %s in --help", f.Name, f.FormatPlaceHolder())
		}
	}
	tests := []struct {
		arg, wantErr string
	}{
		{"--sim.reasoning-field=reasoning_content", ""},
		{"--sim.reasoning-field=reasonning", "reasonning"},
		{"--sim.load-mode=unready", ""},
		{"--sim.load-mode=unreddy", "unreddy"},
	}
	for _, tt := range tests {
		_, err := app.Parse([]string{"simulate", tt.arg})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.arg, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one naming %q", tt.arg, err, tt.wantErr)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*simulator.Config)
	}{
		{"kv too small for context", func(c *simulator.Config) { c.KVBlocks = 10 }},
		{"negative time scale", func(c *simulator.Config) { c.TimeScale = -1 }},
		{"zero prefill", func(c *simulator.Config) { c.PrefillTokensPerSecond = 0 }},
		{"zero max seqs", func(c *simulator.Config) { c.MaxNumSeqs = 0 }},
		{"bad error status", func(c *simulator.Config) { c.Faults.ErrorStatus = 404 }},
		{"stall without position", func(c *simulator.Config) { c.Faults.StallMidStream = time.Second }},
		{"empty model", func(c *simulator.Config) { c.Model = "" }},
		{"adapter without max lora", func(c *simulator.Config) { c.LoRAAdapters, c.MaxLoRA = []string{"a"}, 0 }},
		{"adapter named as the base", func(c *simulator.Config) { c.LoRAAdapters = []string{c.Model} }},
		{"adapter named twice", func(c *simulator.Config) { c.LoRAAdapters = []string{"a", "a"} }},
		{"adapter name with a comma", func(c *simulator.Config) { c.LoRAAdapters = []string{"a,b"} }},
		{"adapter name with a space", func(c *simulator.Config) { c.LoRAAdapters = []string{"a b"} }},
		{"empty adapter name", func(c *simulator.Config) { c.LoRAAdapters = []string{""} }},
		{"adapter name too long", func(c *simulator.Config) {
			c.LoRAAdapters = []string{strings.Repeat("a", simulator.MaxAdapterNameBytes+1)}
		}},
		{"too many adapters", func(c *simulator.Config) {
			for i := range simulator.MaxLoRAAdapters + 1 {
				c.LoRAAdapters = append(c.LoRAAdapters, fmt.Sprint("a", i))
			}
		}},
		{"negative image tokens", func(c *simulator.Config) { c.ImageTokens = -1 }},
		{"too many image tokens", func(c *simulator.Config) { c.ImageTokens = simulator.MaxImageTokens + 1 }},
		{"no tool call", func(c *simulator.Config) { c.ToolCalls = 0 }},
		{"too many tool calls", func(c *simulator.Config) { c.ToolCalls = simulator.MaxToolCalls + 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			tc.mutate(&cfg)
			if sim, err := simulator.New(cfg, nil); err == nil {
				sim.Close()
				t.Error("New accepted an invalid config")
			}
		})
	}
	// Zero-valued faults mean "none".
	cfg := simulator.DefaultConfig()
	cfg.Faults = simulator.Faults{}
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatalf("zero faults rejected: %v", err)
	}
	defer sim.Close()
	if sim.Faults() != simulator.NoFaults() {
		t.Errorf("faults %+v, want %+v", sim.Faults(), simulator.NoFaults())
	}
}

// After Close, with a stream cut in flight, no goroutine of the simulator,
// its server or the client is left.
func TestNoGoroutinesAfterClose(t *testing.T) {
	sim, err := simulator.New(simulator.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	res := streamRequest(t, context.Background(), client, srv.URL+"/v1/chat/completions", chatBody("a", 1000, true), func(c chunk) bool {
		if _, ok := c.content(); ok {
			sim.Close()
		}
		return true
	})
	if res.readErr == nil {
		t.Error("stream was not cut")
	}
	srv.Close()
	tr.CloseIdleConnections()
	goleak.VerifyNone(t)
}
