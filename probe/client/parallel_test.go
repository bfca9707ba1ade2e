package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// chatCall is a chat chunk whose delta carries tool-call fragments, each
// a tool_calls element's JSON.
func chatCall(elems ...string) string {
	return chatDelta(`{"tool_calls":[` + strings.Join(elems, ",") + `]}`)
}

// openCall is a chat call's first fragment: its index, id and name.
func openCall(index int, id, name string) string {
	return fmt.Sprintf(`{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}`, index, id, name)
}

// callArgs is a later fragment of the call of index: its arguments.
func callArgs(index int, args string) string {
	return fmt.Sprintf(`{"index":%d,"function":{"arguments":%s}}`, index, quote(args))
}

// respCallAdded opens a Responses function call at output_index.
func respCallAdded(index int, id, name string) string {
	return respEvent("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"type":"function_call","id":%q,"call_id":"call_%d","name":%q,"arguments":"","status":"in_progress"}`, index, id, index, name))
}

// respCallArgs is an arguments delta of the call of item id at index
// (an empty id or an index below 0 leaves that member out).
func respCallArgs(index int, id, args string) string {
	var f []string
	if id != "" {
		f = append(f, fmt.Sprintf(`"item_id":%q`, id))
	}
	if index >= 0 {
		f = append(f, fmt.Sprintf(`"output_index":%d`, index))
	}
	return respEvent("response.function_call_arguments.delta", strings.Join(append(f, `"delta":`+quote(args)), ","))
}

func toolCalls(nameArgs ...string) []observation.ToolCall {
	var out []observation.ToolCall
	for i := 0; i+1 < len(nameArgs); i += 2 {
		out = append(out, observation.ToolCall{Name: nameArgs[i], Arguments: nameArgs[i+1]})
	}
	return out
}

// TestParallelToolCalls: calls whose fragments alternate in a stream, as
// the chat API (told apart by index) and the Responses API (by item_id and
// output_index) allow and gateways that translate between them send, are
// each put together from their own fragments; calls that follow each
// other are as before. Every fragment is a token, as before: the events
// counted do not depend on how the calls are put together.
func TestParallelToolCalls(t *testing.T) {
	var many []string
	for _, c := range `{"city":"Paris","days":3}` {
		many = append(many, chatCall(callArgs(0, string(c))))
	}
	var tooMany []string
	for i := range MaxToolCalls + 1 {
		tooMany = append(tooMany, chatCall(openCall(i, fmt.Sprintf("call_%d", i), "noargs")))
	}
	respEnd := respEnd("response.completed", 5, 9, 0)
	cases := []struct {
		name, contentType, body string
		flavor                  Flavor
		calls                   []observation.ToolCall
		text                    string // obs.ToolCalls
		events                  int
		errHas                  string // a stream_error's reason
	}{
		{
			name: "chat, 2 calls interleaved",
			body: roleChunk + chatCall(openCall(0, "call_a", "get_weather")) + chatCall(openCall(1, "call_b", "get_weather")) +
				chatCall(callArgs(0, `{"city":`)) + chatCall(callArgs(1, `{"city":`)) +
				chatCall(callArgs(1, `"Rome"}`)) + chatCall(callArgs(0, `"Paris"}`)) + finishChunk + done,
			calls:  toolCalls("get_weather", `{"city":"Paris"}`, "get_weather", `{"city":"Rome"}`),
			text:   `get_weather{"city":"Paris"}get_weather{"city":"Rome"}`,
			events: 6,
		},
		{
			name: "chat, 3 calls interleaved, two in one chunk",
			body: roleChunk + chatCall(openCall(0, "call_a", "get_weather"), openCall(1, "call_b", "noargs")) +
				chatCall(callArgs(0, `{"city":"Paris",`), openCall(2, "call_c", "get_weather")) +
				chatCall(callArgs(2, `{"city":"Rome",`)) + chatCall(callArgs(1, `{}`)) +
				chatCall(callArgs(2, `"days":2}`)) + chatCall(callArgs(0, `"days":1}`)) + finishChunk + done,
			calls:  toolCalls("get_weather", `{"city":"Paris","days":1}`, "noargs", `{}`, "get_weather", `{"city":"Rome","days":2}`),
			text:   `get_weather{"city":"Paris","days":1}noargs{}get_weather{"city":"Rome","days":2}`,
			events: 6,
		},
		{
			name:   "chat, a call in many fragments",
			body:   roleChunk + chatCall(openCall(0, "call_a", "get_weather")) + strings.Join(many, "") + finishChunk + done,
			calls:  toolCalls("get_weather", `{"city":"Paris","days":3}`),
			text:   `get_weather{"city":"Paris","days":3}`,
			events: 1 + len(many),
		},
		{
			name: "chat, 2 calls one after the other",
			body: roleChunk + chatCall(openCall(0, "call_a", "noargs")) + chatCall(callArgs(0, `{}`)) +
				chatCall(openCall(1, "call_b", "get_weather")) + chatCall(callArgs(1, `{"city":"Rome"}`)) + finishChunk + done,
			calls:  toolCalls("noargs", `{}`, "get_weather", `{"city":"Rome"}`),
			text:   `noargs{}get_weather{"city":"Rome"}`,
			events: 4,
		},
		{
			name: "chat, every call index 0, each its own id",
			body: roleChunk + chatCall(openCall(0, "call_a", "noargs")) + chatCall(callArgs(0, `{}`)) +
				chatCall(openCall(0, "call_b", "get_weather")) + chatCall(callArgs(0, `{"city":"Rome"}`)) + finishChunk + done,
			calls:  toolCalls("noargs", `{}`, "get_weather", `{"city":"Rome"}`),
			text:   `noargs{}get_weather{"city":"Rome"}`,
			events: 4,
		},
		{
			name: "chat, neither index nor id: calls follow each other",
			body: roleChunk + chatCall(`{"function":{"name":"get_"}}`, `{"function":{"name":"weather"}}`) +
				chatCall(`{"function":{"arguments":"{}"}}`) + chatCall(`{"function":{"name":"noargs"}}`) +
				chatDelta(`{"function_call":{"arguments":"{}"}}`) + finishChunk + done,
			calls:  toolCalls("get_weather", `{}`, "noargs", `{}`),
			text:   `get_weather{}noargs{}`,
			events: 4,
		},
		{
			name: "chat, a fragment for an index never opened",
			body: roleChunk + chatCall(openCall(0, "call_a", "get_weather")) + chatCall(callArgs(1, `{"city":"Rome"}`)) +
				chatCall(callArgs(0, `{"city":"Paris"}`)) + finishChunk + done,
			calls:  toolCalls("get_weather", `{"city":"Paris"}`, "", `{"city":"Rome"}`),
			text:   `get_weather{"city":"Paris"}{"city":"Rome"}`,
			events: 3,
		},
		{
			name: "chat, not streamed, 2 calls",
			body: `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_a","type":"function","function":{"name":"noargs","arguments":"{}"}},` +
				`{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},"finish_reason":"tool_calls"}],` +
				`"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`,
			contentType: "application/json",
			calls:       toolCalls("noargs", `{}`, "get_weather", `{"city":"Rome"}`),
			text:        `noargs{}get_weather{"city":"Rome"}`,
			events:      1,
		},
		{
			name:   "chat, too many calls",
			body:   roleChunk + strings.Join(tooMany, "") + finishChunk + done,
			events: MaxToolCalls + 1,
			errHas: fmt.Sprintf("more than %d tool calls in one answer (client.MaxToolCalls)", MaxToolCalls),
		},
		{
			name:   "responses, 2 calls interleaved",
			flavor: OpenAIResponses,
			body: respStart + respCallAdded(0, "fc_a", "get_weather") + respCallAdded(1, "fc_b", "get_weather") +
				respCallArgs(0, "fc_a", `{"city":`) + respCallArgs(1, "fc_b", `{"city":`) +
				respCallArgs(1, "fc_b", `"Rome"}`) + respCallArgs(0, "fc_a", `"Paris"}`) + respEnd,
			calls:  toolCalls("get_weather", `{"city":"Paris"}`, "get_weather", `{"city":"Rome"}`),
			text:   `get_weather{"city":"Paris"}get_weather{"city":"Rome"}`,
			events: 6,
		},
		{
			name:   "responses, 3 calls interleaved, told by item_id or output_index alone",
			flavor: OpenAIResponses,
			body: respStart + respCallAdded(0, "fc_a", "get_weather") + respCallAdded(1, "fc_b", "noargs") +
				respCallArgs(0, "fc_a", `{"city":"Paris",`) + respCallAdded(2, "fc_c", "get_weather") +
				respCallArgs(2, "", `{"city":"Rome",`) + respCallArgs(-1, "fc_b", `{}`) +
				respCallArgs(-1, "fc_c", `"days":2}`) + respCallArgs(0, "", `"days":1}`) + respEnd,
			calls:  toolCalls("get_weather", `{"city":"Paris","days":1}`, "noargs", `{}`, "get_weather", `{"city":"Rome","days":2}`),
			text:   `get_weather{"city":"Paris","days":1}noargs{}get_weather{"city":"Rome","days":2}`,
			events: 8,
		},
		{
			name:   "responses, arguments for an item never added",
			flavor: OpenAIResponses,
			body: respStart + respCallAdded(0, "fc_a", "get_weather") + respCallArgs(1, "fc_x", `{"city":"Rome"}`) +
				respCallArgs(0, "fc_a", `{"city":"Paris"}`) + respEnd,
			calls:  toolCalls("get_weather", `{"city":"Paris"}`, "", `{"city":"Rome"}`),
			text:   `get_weather{"city":"Paris"}{"city":"Rome"}`,
			events: 3,
		},
		{
			name:        "responses, not streamed, 2 calls",
			flavor:      OpenAIResponses,
			contentType: "application/json",
			body: `{"id":"resp_1","object":"response","status":"completed","output":[` +
				`{"type":"function_call","id":"fc_a","call_id":"call_a","name":"noargs","arguments":"{}"},` +
				`{"type":"function_call","id":"fc_b","call_id":"call_b","name":"get_weather","arguments":"{\"city\":\"Rome\"}"}],` +
				`"usage":{"input_tokens":5,"output_tokens":9,"total_tokens":14}}`,
			calls:  toolCalls("noargs", `{}`, "get_weather", `{"city":"Rome"}`),
			text:   `noargs{}get_weather{"city":"Rome"}`,
			events: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct := tc.contentType
			if ct == "" {
				ct = "text/event-stream"
			}
			srv := httptest.NewServer(serveBody(ct, tc.body))
			defer srv.Close()
			c := New(Options{Now: (&fakeClock{}).Now})
			defer c.Close()
			obs := observation.Request{Scheduled: t0}
			flavor := tc.flavor
			if flavor == nil {
				flavor = OpenAIChat
			}
			c.Do(context.Background(), &Target{BaseURL: srv.URL, Flavor: flavor, Model: "m"}, &Request{Prompt: "hi", KeepText: true}, &obs)
			if obs.ContentEvents != tc.events {
				t.Errorf("%d content events, want %d", obs.ContentEvents, tc.events)
			}
			if tc.errHas != "" {
				if obs.Outcome != observation.StreamError || obs.Err == nil || !strings.Contains(obs.Err.Error(), tc.errHas) {
					t.Fatalf("outcome %s (%v), want stream_error with %q", obs.Outcome, obs.Err, tc.errHas)
				}
				return
			}
			if obs.Outcome != observation.Success {
				t.Fatalf("outcome %s (%v)", obs.Outcome, obs.Err)
			}
			if !reflect.DeepEqual(obs.Calls, tc.calls) || obs.ToolCalls != tc.text {
				t.Errorf("calls %q (%q), want %q (%q)", obs.Calls, obs.ToolCalls, tc.calls, tc.text)
			}
		})
	}
}
