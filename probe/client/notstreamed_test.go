package client

import (
	"os"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestNonStreamedBodies: a server that ignores "stream": true answers a 2xx
// with one JSON document. For every flavor that is a success whose whole
// answer is one content event, read when the body's last byte was (the body
// is frame 1, tick 2): it has a TTFT and an end, and no TPOT and no ITL.
// Before, the OpenAI flavors recorded a TPOT of 0 s for it, dragging the
// TPOT quantiles down, and the native SSE flavors took the body for a
// stream without its end marker.
func TestNonStreamedBodies(t *testing.T) {
	recorded, err := os.ReadFile("testdata/ollama_v1_chat_completions.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		flavor Flavor
		body   string
		want   expect
	}{
		{
			// Recorded from Ollama 0.17.4 (testdata/SOURCES.md).
			name: "openai-chat, recorded", flavor: OpenAIChat, body: string(recorded),
			want: expect{prompt: 6, output: 8, source: observation.TokensFromUsage, text: "qqqqqq"},
		},
		{
			name: "openai-completions", flavor: OpenAICompletions,
			body: `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"abc","finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`,
			want: expect{prompt: 2, output: 3, source: observation.TokensFromUsage, text: "abc"},
		},
		{
			name: "ollama-chat, thinking and content", flavor: OllamaChat,
			body: `{"model":"m","message":{"role":"assistant","content":"abc","thinking":"hmm"},"done":true,"done_reason":"stop","prompt_eval_count":2,"eval_count":5}` + "\n",
			want: expect{prompt: 2, output: 5, source: observation.TokensFromUsage, text: "abc"},
		},
		{
			name: "ollama-generate", flavor: OllamaGenerate,
			body: `{"model":"m","response":"abc","done":true,"prompt_eval_count":2,"eval_count":3}`,
			want: expect{prompt: 2, output: 3, source: observation.TokensFromUsage, text: "abc"},
		},
		{
			name: "llamacpp", flavor: LlamaCpp,
			body: `{"content":"abc","stop":true,"tokens_predicted":3,"tokens_evaluated":2}`,
			want: expect{prompt: 2, output: 3, source: observation.TokensFromUsage, text: "abc"},
		},
		{
			name: "sglang", flavor: SGLang,
			body: `{"text":"abc","meta_info":{"id":"a","finish_reason":{"type":"length","length":3},"prompt_tokens":2,"completion_tokens":3}}`,
			want: expect{prompt: 2, output: 3, source: observation.TokensFromUsage, text: "abc"},
		},
		{
			name: "tgi", flavor: TGI,
			body: `{"generated_text":"abc","details":{"finish_reason":"length","generated_tokens":3}}`,
			want: expect{output: 3, source: observation.TokensFromUsage, text: "abc"},
		},
		{
			name: "triton", flavor: Triton,
			body: `{"model_name":"ensemble","model_version":"1","text_output":"abc"}`,
			want: expect{output: 1, source: observation.TokensFromEvents, text: "abc"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := runFlavor(t, serveBody("application/json", tc.body), tc.flavor, Target{Model: "m"})
			w := tc.want
			w.outcome, w.status, w.first, w.tokens, w.end, w.noErr = observation.Success, 200, 2, []int{2}, 2, true
			checkObservation(t, obs, w, t0)
			if d, ok := obs.TPOT(); ok {
				t.Errorf("TPOT = %v, want none for a body that was not streamed", d)
			}
			obs.ITLs(func(d time.Duration) { t.Errorf("ITL %v, want none for a body that was not streamed", d) })
			if d, ok := obs.TTFT(); !ok || d != tick(2).Sub(t0) {
				t.Errorf("TTFT = %v %v, want the time to the whole answer", d, ok)
			}
		})
	}
}

// TestStreamedKeepsTPOT: the same answer streamed has its TPOT.
func TestStreamedKeepsTPOT(t *testing.T) {
	obs := runFlavor(t, serveBody("text/event-stream", chatContent("a")+chatContent("b")+chatContent("c")+usageChunk(2, 3)+done), OpenAIChat, Target{Model: "m"})
	// Frames at ticks 2, 3, 4 (content), 5 (usage), 6 ([DONE]): (6-2)/(3-1).
	if d, ok := obs.TPOT(); !ok || d != 2*time.Millisecond {
		t.Errorf("TPOT = %v %v, want 2ms", d, ok)
	}
	n := 0
	obs.ITLs(func(time.Duration) { n++ })
	if n != 2 {
		t.Errorf("%d ITLs, want 2", n)
	}
}

// TestOllamaContentEvents: response, thinking, message.content and
// message.thinking each make an Ollama line a content event, wherever they
// sit; thinking is not answer text.
func TestOllamaContentEvents(t *testing.T) {
	cases := []struct {
		name   string
		flavor Flavor
		body   string
		want   expect
	}{
		{
			name: "generate: thinking, then response", flavor: OllamaGenerate,
			body: `{"model":"m","response":"","thinking":"hm","done":false}` + "\n" +
				`{"model":"m","response":"ok","done":false}` + "\n" +
				`{"model":"m","response":"","done":true,"prompt_eval_count":1,"eval_count":2}` + "\n",
			want: expect{first: 2, tokens: []int{2, 3}, reasoning: []int{2}, end: 4, prompt: 1, output: 2, text: "ok"},
		},
		{
			name: "chat: message.thinking, then message.content", flavor: OllamaChat,
			body: `{"model":"m","message":{"role":"assistant","content":"","thinking":"hm"},"done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":"ok"},"done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":""},"done":true,"prompt_eval_count":1,"eval_count":2}` + "\n",
			want: expect{first: 2, tokens: []int{2, 3}, reasoning: []int{2}, end: 4, prompt: 1, output: 2, text: "ok"},
		},
		{
			// Before, a message object hid the top-level fields.
			name: "chat: top-level thinking beside an empty message", flavor: OllamaChat,
			body: `{"model":"m","message":{"role":"assistant","content":""},"thinking":"hm","done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":"ok"},"done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":""},"done":true,"prompt_eval_count":1,"eval_count":2}` + "\n",
			want: expect{first: 2, tokens: []int{2, 3}, reasoning: []int{2}, end: 4, prompt: 1, output: 2, text: "ok"},
		},
		{
			name: "generate: a response beside a message is kept", flavor: OllamaGenerate,
			body: `{"model":"m","response":"o","message":{"content":"k"},"done":false}` + "\n" +
				`{"model":"m","response":"","done":true,"prompt_eval_count":1,"eval_count":1}` + "\n",
			want: expect{first: 2, tokens: []int{2}, end: 3, prompt: 1, output: 1, text: "ok"},
		},
		{
			// A line with both thinking and answer text is an answer event.
			name: "chat: thinking and content on one line", flavor: OllamaChat,
			body: `{"model":"m","message":{"role":"assistant","content":"","thinking":"hm"},"done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":"o","thinking":"m"},"done":false}` + "\n" +
				`{"model":"m","thinking":"h","response":"k","done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":""},"done":true,"prompt_eval_count":1,"eval_count":3}` + "\n",
			want: expect{first: 2, tokens: []int{2, 3, 4}, reasoning: []int{2}, end: 5, prompt: 1, output: 3, text: "ok"},
		},
		{
			name: "empty and absent texts are not content events", flavor: OllamaChat,
			body: `{"model":"m","message":{"role":"assistant","content":"","thinking":""},"response":"","thinking":"","done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant"},"done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":"x"},"done":false}` + "\n" +
				`{"model":"m","message":{"role":"assistant","content":""},"done":true,"prompt_eval_count":1,"eval_count":1}` + "\n",
			want: expect{first: 4, tokens: []int{4}, end: 5, prompt: 1, output: 1, text: "x"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := runFlavor(t, serveBody("application/x-ndjson", tc.body), tc.flavor, Target{Model: "m"})
			w := tc.want
			w.outcome, w.status, w.source, w.noErr = observation.Success, 200, observation.TokensFromUsage, true
			checkObservation(t, obs, w, t0)
		})
	}
}
