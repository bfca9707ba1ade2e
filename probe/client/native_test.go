package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// ticks returns the fake-clock ticks from..to inclusive.
func ticks(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// serveBody answers every request with body, written at once.
func serveBody(contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, body)
	}
}

func runFlavor(t *testing.T, h http.Handler, f Flavor, target Target) observation.Request {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	clk := &fakeClock{}
	c := New(Options{Now: clk.Now, MaxLineBytes: 4096})
	defer c.Close()
	target.BaseURL, target.Flavor = srv.URL, f
	obs := observation.Request{Scheduled: t0}
	// No max_tokens: the recorded bodies answered requests of their own,
	// whose max_tokens is not known (UsageBelievable).
	c.Do(context.Background(), &target, &Request{Prompt: "hi", KeepText: true}, &obs)
	return obs
}

// TestRecordedNativeStreams replays native streams recorded from real
// servers (testdata/SOURCES.md) through each flavor. Frame k of a body
// written at once is read at tick 1+k.
func TestRecordedNativeStreams(t *testing.T) {
	cases := []struct {
		file, contentType string
		flavor            Flavor
		want              expect
	}{
		{
			// Ollama 0.17.4 /api/generate: four content lines (one is a
			// lone quote), then done with eval_count 8 and
			// prompt_eval_count 12: 8 tokens over 4 lines.
			file: "ollama_api_generate_stream.ndjson", contentType: "application/x-ndjson", flavor: OllamaGenerate,
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: ticks(2, 5), end: 6,
				prompt: 12, output: 8, source: observation.TokensFromUsage, text: `q"qq`, noErr: true},
		},
		{
			// Ollama 0.17.4 /api/chat: six content lines, then done with
			// eval_count 8, prompt_eval_count 6.
			file: "ollama_api_chat_stream.ndjson", contentType: "application/x-ndjson", flavor: OllamaChat,
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: ticks(2, 7), end: 8,
				prompt: 6, output: 8, source: observation.TokensFromUsage, text: "qqqqqq", noErr: true},
		},
		{
			// A public /api/generate capture (qwen2.5vl:7b): 24 content
			// lines, then done with eval_count 25 and prompt_eval_count 28.
			file: "stream_ollama_generate.ndjson", contentType: "application/x-ndjson", flavor: OllamaGenerate,
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: ticks(2, 25), end: 26,
				prompt: 28, output: 25, source: observation.TokensFromUsage, noErr: true,
				text: "A rabbit is a small, furry animal with long ears and a short tail, often associated with agility and quick movements."},
		},
		{
			// Triton's documented generate_stream output: one event whose
			// data line is not followed by a blank line; the body then ends
			// cleanly, which is the protocol's end. No counts: events.
			file: "stream_triton_generate_stream.sse", contentType: "text/event-stream", flavor: Triton,
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2}, end: 3,
				output: 1, source: observation.TokensFromEvents, noErr: true,
				text: `If I had to write a haiku for this one, it would be:.\nMerlion spouts water.\nMarina`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			obs := runFlavor(t, serveBody(tc.contentType, string(body)), tc.flavor, Target{Model: "ensemble"})
			checkObservation(t, obs, tc.want, t0)
		})
	}
}

func sseFrames(datas ...string) string {
	var b strings.Builder
	for _, d := range datas {
		b.WriteString("data:" + d + "\n\n")
	}
	return b.String()
}

// TestNativeFlavors covers each flavor's framing, end marker, counts and
// errors on hand-written frames in the shapes the servers' documentation and
// source give (recorded streams are in TestRecordedNativeStreams).
func TestNativeFlavors(t *testing.T) {
	tgiTok := func(text string, special bool) string {
		return `{"index":1,"token":{"id":1,"text":` + quote(text) + `,"logprob":-0.5,"special":` + map[bool]string{true: "true", false: "false"}[special] + `},"generated_text":null,"details":null}`
	}
	cases := []struct {
		name   string
		flavor Flavor
		ctype  string
		body   string
		want   expect
	}{
		{
			name: "tgi: tokens, final EOS special token with details", flavor: TGI, ctype: "text/event-stream",
			body: sseFrames(tgiTok(" Deep", false), tgiTok(" learning", false),
				`{"index":3,"token":{"id":2,"text":"</s>","logprob":-0.3,"special":true},"generated_text":"Deep learning","details":{"finish_reason":"eos_token","generated_tokens":3,"seed":null,"prompt_tokens":5}}`),
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2, 3}, end: 4,
				prompt: 5, output: 3, source: observation.TokensFromUsage, text: " Deep learning", noErr: true},
		},
		{
			name: "tgi: no details, counted from events", flavor: TGI, ctype: "text/event-stream",
			body: sseFrames(tgiTok(" a", false), `{"token":{"id":3,"text":" b","special":false},"generated_text":" a b","details":null}`),
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2, 3}, end: 3,
				output: 2, source: observation.TokensFromEvents, text: " a b", noErr: true},
		},
		{
			name: "tgi: stream ends without generated_text", flavor: TGI, ctype: "text/event-stream",
			body: sseFrames(tgiTok(" a", false)),
			want: expect{outcome: observation.Disconnected, status: 200, first: 2, tokens: []int{2}, end: 3,
				output: 1, source: observation.TokensFromEvents, text: " a", errIs: ErrNoEndMarker},
		},
		{
			name: "tgi: error event", flavor: TGI, ctype: "text/event-stream",
			body: sseFrames(tgiTok(" a", false), `{"error":"Request failed during generation: Server error: CUDA out of memory","error_type":"generation"}`),
			want: expect{outcome: observation.StreamError, status: 200, first: 2, tokens: []int{2}, end: 3,
				output: 1, source: observation.TokensFromEvents, text: " a", errHas: "CUDA out of memory"},
		},
		{
			name: "llamacpp: content, final stop event with counts", flavor: LlamaCpp, ctype: "text/event-stream",
			body: sseFrames(`{"content":" Hello","stop":false,"id_slot":0,"tokens":[15043]}`, `{"content":"","stop":false,"tokens":[]}`, `{"content":" world","stop":false}`,
				`{"content":"","stop":true,"id_slot":0,"model":"m","tokens_predicted":3,"tokens_evaluated":9,"stop_type":"limit","timings":{"prompt_n":4,"prompt_ms":1.5,"predicted_n":3,"predicted_ms":20.1}}`),
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2, 4}, end: 5,
				prompt: 9, output: 3, source: observation.TokensFromUsage, text: " Hello world", noErr: true},
		},
		{
			name: "llamacpp: counts from timings", flavor: LlamaCpp, ctype: "text/event-stream",
			body: sseFrames(`{"content":" a","stop":false}`, `{"content":"","stop":true,"timings":{"prompt_n":4,"predicted_n":2}}`),
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2}, end: 3,
				prompt: 4, output: 2, source: observation.TokensFromUsage, text: " a", noErr: true},
		},
		{
			name: "llamacpp: error object", flavor: LlamaCpp, ctype: "text/event-stream",
			body: sseFrames(`{"error":{"code":500,"message":"context shift is disabled","type":"server_error"}}`),
			want: expect{outcome: observation.StreamError, status: 200, end: 2, source: observation.TokensFromEvents, errHas: "context shift"},
		},
		{
			name: "sglang: cumulative text, running counts, [DONE]", flavor: SGLang, ctype: "text/event-stream",
			body: sseFrames(`{"text":" The","meta_info":{"id":"a","finish_reason":null,"prompt_tokens":7,"completion_tokens":1,"cached_tokens":0},"index":0}`,
				`{"text":" The","meta_info":{"prompt_tokens":7,"completion_tokens":2},"index":0}`,
				`{"text":" The sky","meta_info":{"finish_reason":{"type":"length","length":3},"prompt_tokens":7,"completion_tokens":3},"index":0}`, "[DONE]"),
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2, 4}, end: 5,
				prompt: 7, output: 3, source: observation.TokensFromUsage, text: " The sky", noErr: true},
		},
		{
			name: "sglang: incremental text", flavor: SGLang, ctype: "text/event-stream",
			body: sseFrames(`{"text":" a","meta_info":{"prompt_tokens":2,"completion_tokens":1}}`, `{"text":" b","meta_info":{"prompt_tokens":2,"completion_tokens":2}}`, "[DONE]"),
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2, 3}, end: 4,
				prompt: 2, output: 2, source: observation.TokensFromUsage, text: " a b", noErr: true},
		},
		{
			name: "sglang: error", flavor: SGLang, ctype: "text/event-stream",
			body: sseFrames(`{"error":{"message":"The input is too long"}}`),
			want: expect{outcome: observation.StreamError, status: 200, end: 2, source: observation.TokensFromEvents, errHas: "too long"},
		},
		{
			name: "ollama: thinking then content, done", flavor: OllamaChat, ctype: "application/x-ndjson",
			body: `{"message":{"role":"assistant","content":"","thinking":"hmm"},"done":false}` + "\n" +
				`{"message":{"role":"assistant","content":"ok"},"done":false}` + "\n" +
				`{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":4}` + "\n",
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2, 3}, reasoning: []int{2}, end: 4,
				prompt: 3, output: 4, source: observation.TokensFromUsage, text: "ok", noErr: true},
		},
		{
			name: "ollama: non-streamed body without newline", flavor: OllamaGenerate, ctype: "application/json",
			body: `{"model":"m","response":"abc","done":true,"prompt_eval_count":2,"eval_count":3}`,
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2}, end: 2,
				prompt: 2, output: 3, source: observation.TokensFromUsage, text: "abc", noErr: true},
		},
		{
			name: "ollama: cut inside a line", flavor: OllamaGenerate, ctype: "application/x-ndjson",
			body: `{"response":"a","done":false}` + "\n" + `{"response":"b","do`,
			want: expect{outcome: observation.Disconnected, status: 200, first: 2, tokens: []int{2}, end: 3,
				output: 1, source: observation.TokensFromEvents, text: "a", errHas: "unexpected EOF"},
		},
		{
			name: "ollama: body ends before done", flavor: OllamaGenerate, ctype: "application/x-ndjson",
			body: `{"response":"a","done":false}` + "\n",
			want: expect{outcome: observation.Disconnected, status: 200, first: 2, tokens: []int{2}, end: 3,
				output: 1, source: observation.TokensFromEvents, text: "a", errIs: ErrNoEndMarker},
		},
		{
			name: "ollama: error line", flavor: OllamaGenerate, ctype: "application/x-ndjson",
			body: `{"error":"model 'nonexistent' not found"}` + "\n",
			want: expect{outcome: observation.StreamError, status: 200, end: 2, source: observation.TokensFromEvents, errHas: "not found"},
		},
		{
			name: "ollama: malformed line", flavor: OllamaGenerate, ctype: "application/x-ndjson",
			body: "{not json\n",
			want: expect{outcome: observation.StreamError, status: 200, end: 2, source: observation.TokensFromEvents, errHas: "malformed"},
		},
		{
			name: "triton: several events then a clean end", flavor: Triton, ctype: "text/event-stream",
			body: sseFrames(`{"model_name":"ensemble","text_output":" a"}`, `{"model_name":"ensemble","text_output":" b"}`),
			want: expect{outcome: observation.Success, status: 200, first: 2, tokens: []int{2, 3}, end: 4,
				output: 2, source: observation.TokensFromEvents, text: " a b", noErr: true},
		},
		{
			name: "triton: error", flavor: Triton, ctype: "text/event-stream",
			body: sseFrames(`{"error":"in ensemble 'ensemble', Encountered error for requestId 1"}`),
			want: expect{outcome: observation.StreamError, status: 200, end: 2, source: observation.TokensFromEvents, errHas: "ensemble"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := runFlavor(t, serveBody(tc.ctype, tc.body), tc.flavor, Target{Model: "m"})
			checkObservation(t, obs, tc.want, t0)
		})
	}
}

// TestNativeCutConnection: a body cut by the connection is disconnected for
// every flavor, Triton included, whose clean end is its end marker.
func TestNativeCutConnection(t *testing.T) {
	for _, f := range []Flavor{TGI, LlamaCpp, OllamaGenerate, OllamaChat, Triton, SGLang} {
		t.Run(f.Name(), func(t *testing.T) {
			frame := sseFrames(`{"token":{"text":" a"},"text_output":" a","content":" a","text":" a"}`)
			if _, ok := f.(ollamaFlavor); ok {
				frame = `{"response":" a","message":{"content":" a"},"done":false}` + "\n"
			}
			obs := runFlavor(t, hijackHandler(frame), f, Target{Model: "m"})
			if obs.Outcome != observation.Disconnected || obs.ContentEvents != 1 {
				t.Fatalf("outcome %s with %d content events (%v), want disconnected after 1", obs.Outcome, obs.ContentEvents, obs.Err)
			}
		})
	}
}

// TestNativeRequestBodies checks what each flavor sends.
func TestNativeRequestBodies(t *testing.T) {
	temp, seed := 0.5, int64(7)
	req := Request{Prompt: "hello world", MaxTokens: 16, IgnoreEOS: true, MinTokens: 4, Temperature: &temp, Seed: &seed,
		Extra: map[string]any{"x_extra": true}}
	cases := []struct {
		flavor Flavor
		path   string
		want   string // the body, as JSON compared after decoding
	}{
		{TGI, "/generate_stream", `{"inputs":"hello world","parameters":{"details":true,"max_new_tokens":16,"temperature":0.5,"seed":7},"stream":true,"x_extra":true}`},
		{LlamaCpp, "/completion", `{"prompt":"hello world","model":"m","stream":true,"n_predict":16,"ignore_eos":true,"temperature":0.5,"seed":7,"x_extra":true}`},
		{OllamaGenerate, "/api/generate", `{"model":"m","prompt":"hello world","stream":true,"options":{"num_predict":16,"temperature":0.5,"seed":7},"x_extra":true}`},
		{OllamaChat, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hello world"}],"stream":true,"options":{"num_predict":16,"temperature":0.5,"seed":7},"x_extra":true}`},
		{Triton, "/v2/models/m/generate_stream", `{"text_input":"hello world","max_tokens":16,"stream":true,"temperature":0.5,"random_seed":7,"x_extra":true}`},
		{SGLang, "/generate", `{"text":"hello world","model":"m","sampling_params":{"max_new_tokens":16,"ignore_eos":true,"min_new_tokens":4,"temperature":0.5},"stream":true,"x_extra":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.flavor.Name(), func(t *testing.T) {
			// The base URL's "/v1" is dropped for the native paths.
			r, err := tc.flavor.NewRequest(context.Background(), &Target{BaseURL: "http://127.0.0.1:1/v1/", Model: "m", BearerToken: "k"}, &req)
			if err != nil {
				t.Fatal(err)
			}
			if r.URL.Path != tc.path || r.Method != http.MethodPost {
				t.Errorf("%s %s, want POST %s", r.Method, r.URL.Path, tc.path)
			}
			if r.Header.Get("Authorization") != "Bearer k" {
				t.Errorf("no bearer token")
			}
			body, _ := io.ReadAll(r.Body)
			var got, want any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal([]byte(tc.want), &want)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("body\n got %s\nwant %s", gb, wb)
			}
		})
	}
	if _, err := Triton.NewRequest(context.Background(), &Target{BaseURL: "http://127.0.0.1:1"}, &req); err == nil {
		t.Error("triton without a model: no error")
	}
}
