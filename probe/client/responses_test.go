package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// respEvent is a hand-written Responses API event as vLLM writes one: its
// type as the SSE event name and in the data.
func respEvent(typ, fields string) string {
	if fields != "" {
		fields = "," + fields
	}
	return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + fields + "}\n\n"
}

func respDelta(typ, delta string) string {
	return respEvent(typ, `"item_id":"i","output_index":0,"content_index":0,"delta":`+quote(delta))
}

// respEnd is a terminal event with its usage.
func respEnd(typ string, in, out, reasoning int) string {
	status := "completed"
	if typ == "response.incomplete" {
		status = "incomplete"
	}
	return respEvent(typ, fmt.Sprintf(`"response":{"id":"resp_1","object":"response","status":%q,"output":[],"usage":{"input_tokens":%d,"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}}`,
		status, in, out, reasoning, in+out))
}

// respStart is what precedes the first token: the response created and in
// progress.
var respStart = respEvent("response.created", `"sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}`) +
	respEvent("response.in_progress", `"sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}`)

// doRecorded sends one request to a server answering body and returns the
// observation and the kinds of its content events (r reasoning, c content,
// t tool call).
func doRecorded(t *testing.T, contentType, body string, maxLine int) (observation.Request, string) {
	t.Helper()
	srv := httptest.NewServer(serveBody(contentType, body))
	defer srv.Close()
	c := New(Options{Now: (&fakeClock{}).Now, MaxLineBytes: maxLine})
	defer c.Close()
	ev := &eventKinds{}
	obs := observation.Request{Scheduled: t0}
	c.Do(context.Background(), &Target{BaseURL: srv.URL, Flavor: OpenAIResponses, Model: "m"},
		// No max_tokens: the recorded bodies answered requests of their
		// own, whose max_tokens is not known (UsageBelievable).
		&Request{Prompt: "hi", KeepText: true, Events: ev}, &obs)
	return obs, ev.kinds.String()
}

// TestResponsesStreams: the Responses API's events through the client.
// Every token-bearing delta is a token: output text and refusals are
// answer events, reasoning and reasoning-summary text reasoning events,
// function-call arguments and custom tool input tool-call events; every
// other event carries none. Frame k is read at tick 1+k; an SSE event
// without data (the documentation's "..." line) is no frame.
func TestResponsesStreams(t *testing.T) {
	callAdded := respEvent("response.output_item.added", `"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"","status":"in_progress"}`)
	args := respDelta("response.function_call_arguments.delta", `{"city":`) + respDelta("response.function_call_arguments.delta", `"Paris"}`)
	cases := []struct {
		name, contentType string
		body              func(t *testing.T) string
		first, answer     int
		kinds             string
		end               int
		prompt, output    int
		reasoningTokens   int
		source            observation.TokenSource
		text              string
		// calls is the kept tool-call text: each call's name (from its
		// output_item.added, a token) then its arguments.
		calls string
		tpot  bool
	}{
		{
			// OpenAI's API reference, createResponse's streaming example
			// (testdata/SOURCES.md): created (tick 2), in_progress,
			// output_item.added, content_part.added, one text delta "Hi"
			// (6), a "..." line that is no event, output_text.done,
			// content_part.done, output_item.done, completed (10), its
			// data line not followed by the blank line that would
			// dispatch it, at the body's clean end.
			name: "openai docs example", contentType: "text/event-stream",
			body:  func(t *testing.T) string { return readTestdata(t, "openai_responses_stream_docs.sse") },
			first: 6, answer: 6, kinds: "c", end: 10, prompt: 37, output: 11, source: observation.TokensFromUsage, text: "Hi",
		},
		{
			// Hand-written, vLLM's shape: text deltas, then completed.
			name: "text", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return respStart + respEvent("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[],"status":"in_progress"}`) +
					respDelta("response.output_text.delta", "One") + respDelta("response.output_text.delta", ", two") +
					respEvent("response.output_text.done", `"text":"One, two"`) + respEnd("response.completed", 5, 2, 0)
			},
			first: 5, answer: 5, kinds: "cc", end: 8, prompt: 5, output: 2, source: observation.TokensFromUsage, text: "One, two", tpot: true,
		},
		{
			// Hand-written: a reasoning model reasons (ticks 4-5), then
			// answers (6-7); its usage counts the reasoning tokens.
			name: "reasoning then text", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return respStart + respDelta("response.reasoning_text.delta", "Let") + respDelta("response.reasoning_text.delta", " me") +
					respDelta("response.output_text.delta", "Yes") + respDelta("response.output_text.delta", ".") + respEnd("response.completed", 5, 4, 2)
			},
			first: 4, answer: 6, kinds: "rrcc", end: 8, prompt: 5, output: 4, reasoningTokens: 2, source: observation.TokensFromUsage, text: "Yes.", tpot: true,
		},
		{
			// Hand-written: OpenAI's reasoning summary is reasoning text.
			name: "reasoning summary", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return respDelta("response.reasoning_summary_text.delta", "**Thinking**") + respDelta("response.output_text.delta", "ok") + respEnd("response.completed", 1, 9, 7)
			},
			first: 2, answer: 3, kinds: "rc", end: 4, prompt: 1, output: 9, reasoningTokens: 7, source: observation.TokensFromUsage, text: "ok", tpot: true,
		},
		{
			// Hand-written, vLLM's shape of a call: output_item.added
			// (tick 4) names the function, a token as chat's name
			// delta is; the argument deltas (5, 6) follow; a tool call
			// is the first answer and no answer text.
			name: "function call", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return respStart + callAdded + args + respEvent("response.function_call_arguments.done", `"item_id":"fc_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"`) +
					respEnd("response.completed", 20, 3, 0)
			},
			first: 4, answer: 4, kinds: "ttt", end: 8, prompt: 20, output: 3, source: observation.TokensFromUsage, tpot: true,
			calls: `get_weather{"city":"Paris"}`,
		},
		{
			// A recording of OpenAI's server (gpt-4o-2024-08-06) calling
			// two functions in one answer (testdata/SOURCES.md): created
			// (tick 2), in_progress, the first call's output_item.added
			// (4) naming "search", 15 argument deltas (5-19), its
			// arguments.done and output_item.done, the second call's
			// output_item.added (22) naming "weather", 5 deltas (23-27),
			// its done events, completed (30) with usage 92 + 52. Each
			// name is a token, kept before its arguments: 22 tool-call
			// events, the first at tick 4.
			name: "openai recorded function calls", contentType: "text/event-stream",
			body:  func(t *testing.T) string { return readTestdata(t, "openai_responses_function_call_stream.sse") },
			first: 4, answer: 4, kinds: strings.Repeat("t", 22), end: 30, prompt: 92, output: 52, source: observation.TokensFromUsage, tpot: true,
			calls: `search{"query":"Detroit Tigers game time October 6, 2023"}weather{"city":"Detroit"}`,
		},
		{
			// Hand-written: a custom tool's input deltas are tool calls.
			name: "custom tool input", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return respDelta("response.custom_tool_call_input.delta", "ls") + respDelta("response.custom_tool_call_input.delta", " -l") + respEnd("response.completed", 3, 2, 0)
			},
			first: 2, answer: 2, kinds: "tt", end: 4, prompt: 3, output: 2, source: observation.TokensFromUsage, tpot: true,
			calls: "ls -l",
		},
		{
			// Hand-written: a refusal is answer text, as for chat.
			name: "refusal", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return respDelta("response.refusal.delta", "I can") + respDelta("response.refusal.delta", "'t.") + respEnd("response.completed", 3, 2, 0)
			},
			first: 2, answer: 2, kinds: "cc", end: 4, prompt: 3, output: 2, source: observation.TokensFromUsage, text: "I can't.", tpot: true,
		},
		{
			// Hand-written: max_output_tokens reached. The answer is cut
			// where the server stopped it, as a chat answer whose
			// finish_reason is "length": a success.
			name: "incomplete at max_output_tokens", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return respDelta("response.output_text.delta", "a") + respDelta("response.output_text.delta", "b") + respEnd("response.incomplete", 3, 2, 0)
			},
			first: 2, answer: 2, kinds: "cc", end: 4, prompt: 3, output: 2, source: observation.TokensFromUsage, text: "ab", tpot: true,
		},
		{
			// Hand-written: no event line, the type in the data only;
			// then a "[DONE]" the stream has ended before.
			name: "data lines only", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return data(`{"type":"response.output_text.delta","delta":"x"}`) + data(`{"type":"response.completed","response":{"usage":{"input_tokens":1,"output_tokens":1}}}`) + done
			},
			first: 2, answer: 2, kinds: "c", end: 3, prompt: 1, output: 1, source: observation.TokensFromUsage, text: "x",
		},
		{
			// Hand-written: the type only in the event line.
			name: "event lines only", contentType: "text/event-stream",
			body: func(*testing.T) string {
				return "event: response.output_text.delta\ndata: {\"delta\":\"x\"}\n\n" + "event: response.completed\ndata: {\"response\":null}\n\n"
			},
			first: 2, answer: 2, kinds: "c", end: 3, output: 1, source: observation.TokensFromEvents, text: "x",
		},
		{
			// OpenAI's documented function_call answer, not streamed: one
			// tool-call event, its usage.
			name: "openai docs function call body", contentType: "application/json",
			body:  func(t *testing.T) string { return readTestdata(t, "openai_responses_function_call_docs.json") },
			first: 2, answer: 2, kinds: "t", end: 2, prompt: 291, output: 23, source: observation.TokensFromUsage,
			calls: `get_current_weather{"location":"Boston, MA","unit":"celsius"}`,
		},
		{
			// OpenAI's documented reasoning answer, not streamed: its
			// message text; its reasoning is in the usage only. The
			// documentation elides the answer ("..."): 29 bytes cannot
			// be its 1035 - 832 = 203 answer tokens, even with the 832
			// hidden reasoning tokens allowed (UsageBelievable), so the
			// one body is counted.
			name: "openai docs reasoning body", contentType: "application/json",
			body:  func(t *testing.T) string { return readTestdata(t, "openai_responses_reasoning_docs.json") },
			first: 2, answer: 2, kinds: "c", end: 2, prompt: 81, output: 1, source: observation.TokensFromEvents,
			text: "The classic tongue twister...",
		},
		{
			// Hand-written body with a reasoning item and a cut answer.
			name: "incomplete body with reasoning", contentType: "application/json",
			body: func(*testing.T) string {
				return `{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[` +
					`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"S"}],"content":[{"type":"reasoning_text","text":"R"}]},` +
					`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A","annotations":[]},{"type":"refusal","refusal":"B"}]},` +
					`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"query":"q"}}],` +
					`"usage":{"input_tokens":4,"output_tokens":16,"output_tokens_details":{"reasoning_tokens":12}}}`
			},
			first: 2, answer: 2, kinds: "c", end: 2, prompt: 4, output: 16, reasoningTokens: 12, source: observation.TokensFromUsage, text: "AB",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs, kinds := doRecorded(t, tc.contentType, tc.body(t), 1<<20)
			if obs.Outcome != observation.Success {
				t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
			}
			if obs.FirstToken != tick(tc.first) || obs.FirstAnswer != tick(tc.answer) || obs.End != tick(tc.end) {
				t.Errorf("first token at tick %v, first answer at %v, end at %v; want %d, %d and %d",
					obs.FirstToken.Sub(t0), obs.FirstAnswer.Sub(t0), obs.End.Sub(t0), tc.first, tc.answer, tc.end)
			}
			if kinds != tc.kinds {
				t.Errorf("event kinds %q, want %q", kinds, tc.kinds)
			}
			tools, reasoning := strings.Count(tc.kinds, "t"), strings.Count(tc.kinds, "r")
			if obs.ContentEvents != len(tc.kinds) || obs.ToolCallEvents != tools || obs.ReasoningEvents != reasoning {
				t.Errorf("%d events (%d tool calls, %d reasoning), want %d (%d, %d)",
					obs.ContentEvents, obs.ToolCallEvents, obs.ReasoningEvents, len(tc.kinds), tools, reasoning)
			}
			if obs.PromptTokens != tc.prompt || obs.OutputTokens != tc.output || obs.TokenSource != tc.source || obs.ReasoningTokens != tc.reasoningTokens {
				t.Errorf("tokens %d + %d (%d reasoning) from %s, want %d + %d (%d) from %s", obs.PromptTokens, obs.OutputTokens, obs.ReasoningTokens,
					obs.TokenSource, tc.prompt, tc.output, tc.reasoningTokens, tc.source)
			}
			if obs.Text != tc.text {
				t.Errorf("text %q, want %q", obs.Text, tc.text)
			}
			if obs.ToolCalls != tc.calls {
				t.Errorf("tool calls %q, want %q", obs.ToolCalls, tc.calls)
			}
			if _, ok := obs.TPOT(); ok != tc.tpot {
				t.Errorf("TPOT defined %v, want %v", ok, tc.tpot)
			}
		})
	}
}

// TestResponsesFailures: the API's failure events and statuses, and
// hostile streams, each with its outcome and what was read before it.
func TestResponsesFailures(t *testing.T) {
	text := respDelta("response.output_text.delta", "a")
	cases := []struct {
		name, contentType, body string
		maxLine                 int
		outcome                 observation.Outcome
		errHas                  string
		events                  int
	}{
		{"response.failed", "text/event-stream", text + respEvent("response.failed",
			`"response":{"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"usage":null}`),
			0, observation.StreamError, `response failed: "{\"code\":\"server_error\"`, 1},
		{"error event", "text/event-stream", text + respEvent("error", `"code":"ERR_SOMETHING","message":"Something went wrong","param":null`),
			0, observation.StreamError, "error event", 1},
		{"error type without an event line", "text/event-stream", data(`{"type":"error","message":"overloaded"}`), 0, observation.StreamError, "error event", 0},
		{"error event line with non-JSON data", "text/event-stream", "event: error\ndata: upstream gone\n\n", 0, observation.StreamError, "error event", 0},
		{"top-level error", "text/event-stream", text + data(`{"error":{"message":"boom"}}`), 0, observation.StreamError, "error in stream", 1},
		{"cut before the terminal event", "text/event-stream", text + text, 0, observation.Disconnected, "end marker", 2},
		{"[DONE] without a terminal event", "text/event-stream", text + done, 0, observation.Disconnected, "end marker", 1},
		{"terminal event cut mid-line", "text/event-stream", text + "event: response.completed\ndata: {\"type\":\"response.completed\"", 0, observation.Disconnected, "", 1},
		{"malformed event", "text/event-stream", text + data(`{"type":"response.output_text.delta","delta":`), 0, observation.StreamError, "malformed JSON event", 1},
		{"delta not a string", "text/event-stream", data(`{"type":"response.output_text.delta","delta":["a"]}`), 0, observation.StreamError, "unreadable event", 0},
		{"type not a string", "text/event-stream", data(`{"type":7,"delta":"a"}`), 0, observation.StreamError, "unreadable event", 0},
		{"usage count negative", "text/event-stream", text + data(`{"type":"response.completed","response":{"usage":{"output_tokens":-1}}}`), 0, observation.StreamError, "unreadable event", 1},
		{"response not an object", "text/event-stream", data(`{"type":"response.created","response":[]}`), 0, observation.StreamError, "unreadable event", 0},
		{"event over the line bound", "text/event-stream", text + respDelta("response.output_text.delta", strings.Repeat("x", 5000)), 4096, observation.StreamError, "reading event", 1},
		{"terminal event over the line bound", "text/event-stream", text + respEvent("response.completed", `"response":{"output":[{"type":"message","content":[{"type":"output_text","text":"`+strings.Repeat("x", 5000)+`"}]}]}`),
			4096, observation.StreamError, "reading event", 1},
		{"body failed", "application/json", `{"object":"response","status":"failed","error":{"code":"server_error","message":"no"},"output":[]}`, 0, observation.StreamError, "error in response", 0},
		{"body cancelled", "application/json", `{"object":"response","status":"cancelled","error":null,"output":[]}`, 0, observation.StreamError, `response status "cancelled" is not an answer`, 0},
		{"body queued", "application/json", `{"object":"response","status":"queued","output":[]}`, 0, observation.StreamError, `status "queued"`, 0},
		{"body item content not parts", "application/json", `{"status":"completed","output":[{"type":"message","content":"text"}]}`, 0, observation.StreamError, "unreadable response", 0},
		{"body arguments an object", "application/json", `{"status":"completed","output":[{"type":"function_call","name":"f","arguments":{"x":1}}]}`, 0, observation.StreamError, "unreadable response", 0},
		{"body not an object", "application/json", `[{"status":"completed"}]`, 0, observation.StreamError, "malformed JSON body", 0},
		{"body over the bound", "application/json", `{"status":"completed","output":[{"type":"message","content":[{"text":"` + strings.Repeat("x", 5000) + `"}]}]}`, 4096, observation.StreamError, "JSON body longer than", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs, _ := doRecorded(t, tc.contentType, tc.body, tc.maxLine)
			if obs.Outcome != tc.outcome || obs.Err == nil || !strings.Contains(obs.Err.Error(), tc.errHas) {
				t.Fatalf("outcome %s (%v), want %s with %q", obs.Outcome, obs.Err, tc.outcome, tc.errHas)
			}
			if obs.ContentEvents != tc.events {
				t.Errorf("%d content events before the failure, want %d", obs.ContentEvents, tc.events)
			}
		})
	}
}

// TestResponsesEventCap: a server that ignores max_output_tokens and
// streams deltas for ever is cut off at the client's event cap, as any
// flavor is.
func TestResponsesEventCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		ev := respDelta("response.output_text.delta", "x")
		for range 10000 {
			if _, err := io.WriteString(w, ev); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := New(Options{MaxConnsPerHost: 1})
	defer c.Close()
	obs := &observation.Request{Scheduled: time.Now()}
	c.Do(context.Background(), &Target{BaseURL: srv.URL, Flavor: OpenAIResponses}, &Request{Prompt: "p", MaxTokens: 10}, obs)
	if obs.Outcome != observation.StreamError || obs.ContentEvents != 4*10+16 {
		t.Fatalf("outcome %s, %d events; want stream_error after 56", obs.Outcome, obs.ContentEvents)
	}
}

// TestResponsesEventExamples decodes each event example of OpenAI's API
// reference (testdata/openai_responses_events, SOURCES.md), as it is and
// through the oracle.
func TestResponsesEventExamples(t *testing.T) {
	for file, want := range map[string]decodedResp{
		"response.output_text.delta":            {Content: "In"},
		"response.refusal.delta":                {Content: "refusal text so far"},
		"response.reasoning_text.delta":         {Reasoning: "The"},
		"response.reasoning_summary_text.delta": {Reasoning: "**Responding to a greeting**\n\nThe user just said, \"Hello!\" So, it seems I need to engage. I'll greet them back and offer help since they're looking to chat. I could say something like, \"Hello! How can I assist you today?\" That feels friendly and open. They didn't ask a specific question, so this approach will work well for starting a conversation. Let's see where it goes from there!"},
		"response.custom_tool_call_input.delta": {ToolCall: "partial input text", Calls: renderPart(0, "ctc_1234567890abcdef", "", "partial input text", false)},
		"response.output_item.added":            {},
		"response.completed":                    {Done: true, HasUsage: true},
		"response.incomplete":                   {Done: true},
		"response.failed":                       {Err: true},
		"error":                                 {Err: true},
		// The reference's own example lacks a comma after its delta: not
		// JSON, so a server that sent it would fail the request.
		"response.function_call_arguments.delta": {Err: true},
	} {
		t.Run(file, func(t *testing.T) {
			b := []byte(readTestdata(t, "openai_responses_events/"+file+".json"))
			var c responsesChunk
			got := scanResponses(&c, b, "message", false)
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
			if o := responsesOracle(b, "message", false); o != got {
				t.Errorf("oracle %+v, scanner %+v", o, got)
			}
		})
	}
}

// TestResponsesVLLMDocsExample: vLLM's documentation writes its stream as
// data lines with placeholders ("{...}", "N+1"): those lines are not JSON,
// so only its two delta lines can be read as events, which they are. (As
// one SSE stream the block is a single event: its data lines have no blank
// line between them.)
func TestResponsesVLLMDocsExample(t *testing.T) {
	var c responsesChunk
	var text []string
	for _, line := range strings.Split(readTestdata(t, "vllm_responses_stream_docs.sse"), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" || !json.Valid([]byte(d)) {
			continue
		}
		got := scanResponses(&c, []byte(d), "message", false)
		if want := responsesOracle([]byte(d), "message", false); got != want || got.Err {
			t.Errorf("%q: got %+v, oracle %+v", d, got, want)
		}
		text = append(text, got.Content)
	}
	if got := strings.Join(text, "|"); got != "One|, two" {
		t.Errorf("readable events' text %q, want the two deltas", got)
	}
}

// TestResponsesRequestBody: the request asks /v1/responses to stream the
// prompt as its input, not to store it, with the workload's length and
// sampling; a sessions conversation (Extra "messages") is the input list;
// a recorded body is forced to stream, without chat's stream_options.
func TestResponsesRequestBody(t *testing.T) {
	temp, seed := 0.5, int64(7)
	history := []map[string]string{{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}}
	cases := []struct {
		name   string
		target Target
		req    Request
		want   string
	}{
		{"minimal", Target{Model: "m"}, Request{Prompt: "Say <hi>"},
			`{"model":"m","input":"Say <hi>","stream":true,"store":false}`},
		{"every option", Target{}, Request{Prompt: "p", MaxTokens: 64, IgnoreEOS: true, MinTokens: 64, Temperature: &temp, Seed: &seed,
			Extra: map[string]any{"tools": []any{map[string]any{"type": "function", "name": "f"}}, "store": true}},
			`{"input":"p","stream":true,"store":true,"max_output_tokens":64,"ignore_eos":true,"min_tokens":64,"temperature":0.5,"seed":7,"tools":[{"type":"function","name":"f"}]}`},
		{"a conversation", Target{Model: "m"}, Request{Prompt: "ignored", MaxTokens: 8, Extra: map[string]any{"messages": history}},
			`{"model":"m","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"stream":true,"store":false,"max_output_tokens":8}`},
		{"recorded body", Target{Model: "sim"}, Request{RawBody: []byte(`{"model":"prod","input":"x","max_output_tokens":3}`), Prompt: "ignored"},
			`{"model":"sim","input":"x","max_output_tokens":3,"stream":true}`},
		// The request kinds in the API's shapes (NewAttachments encodes
		// them; probe/plan's TestKindsResponsesBody checks a
		// configuration's): tools and tool_choice at the top, the format
		// in "text", images as input_image parts after the prompt's
		// input_text part. Chat's shapes, encoded beside them, are not
		// sent.
		{"tools and a format", Target{Model: "m"}, Request{Prompt: "p", Attach: NewAttachments(&config.RequestKinds{
			Tools:          []config.Tool{{Name: "f", ParametersJSON: json.RawMessage(`{"type":"object"}`)}},
			ToolChoice:     "f",
			ResponseFormat: &config.ResponseFormat{Type: config.ResponseJSONSchema, Name: "answer", SchemaJSON: json.RawMessage(`{"type":"object"}`)},
		}, nil)},
			`{"model":"m","input":"p","stream":true,"store":false,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],` +
				`"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true}}}`},
		{"images", Target{Model: "m"}, Request{Prompt: "Describe.", MaxTokens: 8, Attach: &Attachments{
			Images: []Image{NewImage("image/png", []byte("ABC")), NewImage("image/jpeg", []byte("DEF"))},
		}},
			`{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Describe."},` +
				`{"type":"input_image","image_url":"data:image/png;base64,QUJD","detail":"auto"},{"type":"input_image","image_url":"data:image/jpeg;base64,REVG","detail":"auto"}]}],` +
				`"stream":true,"store":false,"max_output_tokens":8}`},
		{"tools without a choice", Target{}, Request{Prompt: "p", Attach: NewAttachments(&config.RequestKinds{
			Tools: []config.Tool{{Name: "f", Description: "Does <f>.", ParametersJSON: json.RawMessage(`{}`)}},
		}, nil)},
			`{"input":"p","stream":true,"store":false,"tools":[{"type":"function","name":"f","description":"Does <f>.","parameters":{}}],"tool_choice":"auto"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			target.BaseURL = "http://127.0.0.1:1/v1"
			req, err := OpenAIResponses.NewRequest(context.Background(), &target, &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if req.URL.Path != "/v1/responses" || req.Method != http.MethodPost || req.Header.Get("Accept") != "text/event-stream" {
				t.Errorf("request %s %s, Accept %q", req.Method, req.URL, req.Header.Get("Accept"))
			}
			got, _ := io.ReadAll(req.Body)
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("sent %s: %v", got, err)
			}
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("sent %s\nwant %s", got, tc.want)
			}
		})
	}
	// Prepare encodes the same body ahead.
	r := &Request{Prompt: "p", MaxTokens: 4}
	Prepare(&Target{Flavor: OpenAIResponses, Model: "m"}, r)
	if !bytes.Contains(r.prepared.bytes(), []byte(`"max_output_tokens":4`)) {
		t.Errorf("prepared %s", r.prepared.bytes())
	}
}

// TestResponsesDecodeAllocates: a delta event is read without allocating,
// as a chat chunk is (the hot path: one event per token).
func TestResponsesDecodeAllocates(t *testing.T) {
	ev := []byte(`{"type":"response.function_call_arguments.delta","sequence_number":12,"item_id":"fc_6806bfca0b2481918a5748308061a2600d3ce51bdffd5476","output_index":0,"delta":"\"city\""}`)
	added := []byte(`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`)
	var c responsesChunk
	var ch Chunk
	allocs := testing.AllocsPerRun(100, func() {
		ch.Reset()
		if err := c.decodeEvent(added, "response.output_item.added", &ch); err != nil || string(ch.ToolCall) != "get_weather" {
			t.Fatal(err, string(ch.ToolCall))
		}
		ch.Reset()
		if err := c.decodeEvent(ev, "response.function_call_arguments.delta", &ch); err != nil || len(ch.ToolCall) == 0 ||
			len(ch.Calls) != 1 || ch.Calls[0].Index != 0 || len(ch.Calls[0].ID) == 0 {
			t.Fatal(err, ch.Calls)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per event, want 0", allocs)
	}
}

// BenchmarkDecodeResponsesEvent: a text delta of vLLM's shape.
func BenchmarkDecodeResponsesEvent(b *testing.B) {
	ev := []byte(`{"content_index":0,"delta":" tok7","item_id":"msg_8f0b1c2d3e4f4a5b","logprobs":[],"output_index":0,"sequence_number":7,"type":"response.output_text.delta"}`)
	var c responsesChunk
	var ch Chunk
	b.ReportAllocs()
	for b.Loop() {
		ch.Reset()
		if err := c.decodeEvent(ev, "response.output_text.delta", &ch); err != nil || len(ch.Content) == 0 {
			b.Fatal(err)
		}
	}
}

// readTestdataFile is os.ReadFile of testdata, for the fuzz seeds.
func readTestdataFile(f *testing.F, file string) []byte {
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// TestResponsesCallNameBound: a call's name, a token kept before its
// arguments, counts against the bound on kept text (Request.MaxTextBytes) as the
// arguments do; without KeepText nothing is kept.
func TestResponsesCallNameBound(t *testing.T) {
	body := respEvent("response.output_item.added", `"output_index":0,"item":{"type":"function_call","name":"get_weather","arguments":""}`) +
		respDelta("response.function_call_arguments.delta", `{}`) + respEnd("response.completed", 3, 1, 0)
	srv := httptest.NewServer(serveBody("text/event-stream", body))
	defer srv.Close()
	c := New(Options{Now: (&fakeClock{}).Now})
	defer c.Close()
	target := &Target{BaseURL: srv.URL, Flavor: OpenAIResponses}
	for _, tc := range []struct {
		name     string
		keep     bool
		max      int
		outcome  observation.Outcome
		calls    string
		contents int
	}{
		{"kept", true, 13, observation.Success, "get_weather{}", 2},
		{"name over the bound", true, 10, observation.StreamError, "", 1},
		{"arguments over the bound", true, 12, observation.StreamError, "get_weather", 2},
		{"not kept", false, 1, observation.Success, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observation.Request{Scheduled: t0}
			c.Do(context.Background(), target, &Request{Prompt: "p", KeepText: tc.keep, MaxTextBytes: tc.max}, &obs)
			if obs.Outcome != tc.outcome || obs.ToolCalls != tc.calls || obs.ContentEvents != tc.contents {
				t.Errorf("outcome %s (%v), calls %q, %d events; want %s, %q, %d", obs.Outcome, obs.Err, obs.ToolCalls, obs.ContentEvents, tc.outcome, tc.calls, tc.contents)
			}
		})
	}
}
