package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// eventKinds records the kind of each content event as an observer hears
// it: r reasoning, c content, t tool call.
type eventKinds struct{ kinds strings.Builder }

func (*eventKinds) Sent(*observation.Request) {}

func (e *eventKinds) Content(o *observation.Request) {
	switch {
	case o.LastReasoning:
		e.kinds.WriteByte('r')
	case o.LastToolCall:
		e.kinds.WriteByte('t')
	default:
		e.kinds.WriteByte('c')
	}
}

// sseOfChunkArray frames a JSON array of decoded chunks (as TGI's test
// snapshots record a stream) as the SSE stream it was: one compact
// "data:" event per chunk, then [DONE], which the snapshot does not keep.
func sseOfChunkArray(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []json.RawMessage
	if err := json.Unmarshal(b, &chunks); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, c := range chunks {
		var line bytes.Buffer
		if err := json.Compact(&line, c); err != nil {
			t.Fatal(err)
		}
		sb.WriteString(data(line.String()))
	}
	return sb.String() + done
}

// ndjsonOfDoc makes a pretty-printed JSON document one NDJSON line.
func ndjsonOfDoc(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var line bytes.Buffer
	if err := json.Compact(&line, b); err != nil {
		t.Fatal(err)
	}
	return line.String() + "\n"
}

func readTestdata(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// toolDelta is a hand-written chat delta of one tool call, in the shape
// vLLM, SGLang and OpenAI stream: the first names the function, the
// others carry pieces of its arguments.
func toolDelta(function string) string {
	return chatDelta(`{"tool_calls":[{"index":0,"function":` + function + `}]}`)
}

// TestToolCallTokens: every token-bearing delta is a token. A stream whose
// answer is a tool call (content null, the model's output in
// tool_calls[].function.name|arguments) has a first token, a first answer
// (a tool call is an answer), token times and so a TPOT, like a text
// answer; tool-call text is not answer text. Frame k of a body written at
// once is read at tick 1+k. No timing here but the fake clock's ticks:
// TestToolCallAccuracy (probe/live) measures a real stream's.
func TestToolCallTokens(t *testing.T) {
	cases := []struct {
		name, contentType string
		body              func(t *testing.T) string
		flavor            Flavor
		// Ticks of the first token and of the first answer.
		first, answer int
		// The kind of each content event, as the observer heard it.
		kinds          string
		prompt, output int
		source         observation.TokenSource
		text           string
		tpot           bool
	}{
		{
			// Recorded: TGI 3.1.2's stream of a call of
			// get_current_weather (testdata/SOURCES.md): 17 chunks, the
			// first with the name and "{", no usage.
			name: "tgi recorded stream", contentType: "text/event-stream", flavor: OpenAIChat,
			body:  func(t *testing.T) string { return sseOfChunkArray(t, "stream_tgi_openai_chat_tool_call_chunks.json") },
			first: 2, answer: 2, kinds: strings.Repeat("t", 17), output: 17, source: observation.TokensFromEvents, tpot: true,
		},
		{
			// Recorded: TGI's non-streamed answer with the same call in
			// message.tool_calls: one event, its usage 286 + 29.
			name: "tgi recorded body", contentType: "application/json", flavor: OpenAIChat,
			body:  func(t *testing.T) string { return readTestdata(t, "tgi_openai_chat_tool_call.json") },
			first: 2, answer: 2, kinds: "t", prompt: 286, output: 29, source: observation.TokensFromUsage,
		},
		{
			// Ollama's documented /api/chat answer with tools
			// (testdata/SOURCES.md): message.tool_calls with an
			// arguments object, one line that is also the done line.
			name: "ollama docs example", contentType: "application/x-ndjson", flavor: OllamaChat,
			body:  func(t *testing.T) string { return ndjsonOfDoc(t, "ollama_api_chat_tool_call_docs.json") },
			first: 2, answer: 2, kinds: "t", prompt: 122, output: 33, source: observation.TokensFromUsage,
		},
		{
			// Hand-written, in vLLM's shape: a role chunk (tick 2), the
			// name (3), 20 argument deltas (4-23), the finish chunk with
			// an empty delta, the usage chunk.
			name: "hand-written vllm shape", contentType: "text/event-stream", flavor: OpenAIChat,
			body: func(*testing.T) string {
				b := roleChunk + chatDelta(`{"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather"}}]}`)
				for i := range 20 {
					b += toolDelta(`{"arguments":` + quote(string(rune('a'+i))) + `}`)
				}
				return b + data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`) +
					usageChunk(10, 21) + done
			},
			first: 3, answer: 3, kinds: strings.Repeat("t", 21), prompt: 10, output: 21, source: observation.TokensFromUsage, tpot: true,
		},
		{
			// Hand-written: a reasoning model that thinks (ticks 3-4),
			// then calls a tool (5-7): the first answer is the call.
			name: "hand-written reasoning then call", contentType: "text/event-stream", flavor: OpenAIChat,
			body: func(*testing.T) string {
				return roleChunk + chatDelta(`{"reasoning":"a"}`) + chatDelta(`{"reasoning":"b"}`) +
					toolDelta(`{"name":"f","arguments":""}`) + toolDelta(`{"arguments":"{}"}`) +
					chatDelta(`{"tool_calls":[{"index":1,"function":{"name":"g"}}]}`) + done
			},
			first: 3, answer: 5, kinds: "rrttt", output: 5, source: observation.TokensFromEvents, tpot: true,
		},
		{
			// Hand-written: text, then a call beside more text (a tool
			// call wins the event's kind), then text.
			name: "hand-written content and call", contentType: "text/event-stream", flavor: OpenAIChat,
			body: func(*testing.T) string {
				return chatContent("Let me check. ") + chatDelta(`{"content":"x","tool_calls":[{"index":0,"function":{"name":"f"}}]}`) +
					chatContent("y") + done
			},
			first: 2, answer: 2, kinds: "ctc", output: 3, source: observation.TokensFromEvents, text: "Let me check. xy", tpot: true,
		},
		{
			// Hand-written: OpenAI's refusal delta is answer text.
			name: "hand-written refusal", contentType: "text/event-stream", flavor: OpenAIChat,
			body: func(*testing.T) string {
				return roleChunk + chatDelta(`{"content":null,"refusal":"I can"}`) + chatDelta(`{"refusal":"'t."}`) + done
			},
			first: 3, answer: 3, kinds: "cc", output: 2, source: observation.TokensFromEvents, text: "I can't.", tpot: true,
		},
		{
			// Hand-written: the deprecated function_call delta.
			name: "hand-written function_call", contentType: "text/event-stream", flavor: OpenAIChat,
			body: func(*testing.T) string {
				return chatDelta(`{"function_call":{"name":"f","arguments":""}}`) + chatDelta(`{"function_call":{"arguments":"{}"}}`) + done
			},
			first: 2, answer: 2, kinds: "tt", output: 2, source: observation.TokensFromEvents, tpot: true,
		},
		{
			// Hand-written: Ollama /api/chat streaming a call in one line,
			// then the done line.
			name: "hand-written ollama stream", contentType: "application/x-ndjson", flavor: OllamaChat,
			body: func(*testing.T) string {
				return `{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]},"done":false}` + "\n" +
					`{"model":"m","message":{"role":"assistant","content":""},"done":true,"prompt_eval_count":4,"eval_count":9}` + "\n"
			},
			first: 2, answer: 2, kinds: "t", prompt: 4, output: 9, source: observation.TokensFromUsage,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(serveBody(tc.contentType, tc.body(t)))
			defer srv.Close()
			c := New(Options{Now: (&fakeClock{}).Now})
			defer c.Close()
			ev := &eventKinds{}
			obs := observation.Request{Scheduled: t0}
			c.Do(context.Background(), &Target{BaseURL: srv.URL, Flavor: tc.flavor, Model: "m"}, &Request{Prompt: "hi", KeepText: true, Events: ev}, &obs)
			if obs.Outcome != observation.Success {
				t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
			}
			if obs.FirstToken != tick(tc.first) || obs.FirstAnswer != tick(tc.answer) {
				t.Errorf("first token at tick %v, first answer at %v, want %d and %d", obs.FirstToken.Sub(t0), obs.FirstAnswer.Sub(t0), tc.first, tc.answer)
			}
			if _, ok := obs.TTFT(); !ok {
				t.Error("no TTFT")
			}
			if got := ev.kinds.String(); got != tc.kinds {
				t.Errorf("event kinds %q, want %q", got, tc.kinds)
			}
			tools, reasoning := strings.Count(tc.kinds, "t"), strings.Count(tc.kinds, "r")
			if obs.ContentEvents != len(tc.kinds) || obs.ToolCallEvents != tools || obs.ReasoningEvents != reasoning {
				t.Errorf("%d events (%d tool calls, %d reasoning), want %d (%d, %d)",
					obs.ContentEvents, obs.ToolCallEvents, obs.ReasoningEvents, len(tc.kinds), tools, reasoning)
			}
			if obs.LastToolCall != strings.HasSuffix(tc.kinds, "t") {
				t.Errorf("LastToolCall %v after %q", obs.LastToolCall, tc.kinds)
			}
			if obs.PromptTokens != tc.prompt || obs.OutputTokens != tc.output || obs.TokenSource != tc.source {
				t.Errorf("tokens %d + %d from %s, want %d + %d from %s", obs.PromptTokens, obs.OutputTokens, obs.TokenSource, tc.prompt, tc.output, tc.source)
			}
			if obs.Text != tc.text {
				t.Errorf("text %q, want %q (a tool call is not answer text)", obs.Text, tc.text)
			}
			if _, ok := obs.TPOT(); ok != tc.tpot {
				t.Errorf("TPOT defined %v, want %v", ok, tc.tpot)
			}
		})
	}
}

// TestToolCallUnreadable: a tool call of the wrong shape is a protocol
// error, as any field the probe reads, rather than a token silently lost.
func TestToolCallUnreadable(t *testing.T) {
	for _, delta := range []string{
		`{"tool_calls":{"index":0}}`,
		`{"tool_calls":[{"function":{"arguments":{"x":1}}}]}`, // an object: the OpenAI API sends a string
		`{"tool_calls":[{"function":"f"}]}`,
		`{"tool_calls":[7]}`,
		`{"refusal":false}`,
	} {
		srv := httptest.NewServer(serveBody("text/event-stream", chatDelta(delta)+done))
		c := New(Options{})
		var obs observation.Request
		c.Do(context.Background(), &Target{BaseURL: srv.URL}, &Request{Prompt: "hi"}, &obs)
		if obs.Outcome != observation.StreamError || !strings.Contains(obs.Err.Error(), "unreadable event") {
			t.Errorf("%s: outcome %s (%v), want an unreadable event", delta, obs.Outcome, obs.Err)
		}
		c.Close()
		srv.Close()
	}
}
