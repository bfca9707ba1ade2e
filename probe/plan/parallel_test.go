package plan

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestCheckParallelCalls: an answer of parallel calls whose fragments
// alternate in the stream, as the chat API and the Responses API allow,
// is judged call by call through the client, as the live exporter, /probe
// and the bench judge every answer (Kinds.apply, client.Do, Kinds.Check).
// Their fragments concatenated would read as one call of
// get_weatherget_weather, an unknown_tool.
func TestCheckParallelCalls(t *testing.T) {
	chunk := func(elems ...string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[` + strings.Join(elems, ",") + `]},"finish_reason":null}]}` + "\n\n"
	}
	open := func(i int, name string) string {
		return fmt.Sprintf(`{"index":%d,"id":"call_%d","type":"function","function":{"name":%q,"arguments":""}}`, i, i, name)
	}
	args := func(i int, a string) string {
		return fmt.Sprintf(`{"index":%d,"function":{"arguments":%q}}`, i, a)
	}
	event := func(typ, fields string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"," + fields + "}\n\n"
	}
	added := func(i int, name string) string {
		return event("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":%q,"arguments":""}`, i, i, i, name))
	}
	delta := func(i int, a string) string {
		return event("response.function_call_arguments.delta", fmt.Sprintf(`"item_id":"fc_%d","output_index":%d,"delta":%q`, i, i, a))
	}
	const chatEnd = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	respEnd := event("response.completed", `"response":{"id":"r","object":"response","status":"completed","output":[],"usage":{"input_tokens":5,"output_tokens":9,"total_tokens":14}}`)
	for _, tc := range []struct {
		name, flavor, body string
		want, why          string
	}{
		{"chat, interleaved", "openai-chat",
			chunk(open(0, "get_weather")) + chunk(open(1, "get_weather")) + chunk(args(0, `{"city":"Paris",`)) +
				chunk(args(1, `{"city":"Rome",`)) + chunk(args(1, `"days":2}`)) + chunk(args(0, `"days":1}`)) + chatEnd,
			observation.Valid, ""},
		{"chat, interleaved, the second not valid", "openai-chat",
			chunk(open(0, "get_weather")) + chunk(open(1, "get_weather")) + chunk(args(0, `{"city":"Paris",`)) +
				chunk(args(1, `{"city":"Rome",`)) + chunk(args(1, `"days":0}`)) + chunk(args(0, `"days":1}`)) + chatEnd,
			observation.SchemaMismatch, "get_weather's arguments"},
		{"chat, one after the other", "openai-chat",
			chunk(open(0, "noargs")) + chunk(open(1, "get_weather")) + chunk(args(1, `{"city":"Rome","days":2}`)) + chatEnd,
			observation.Valid, ""},
		{"chat, a fragment for an index never opened", "openai-chat",
			chunk(open(0, "noargs")) + chunk(args(1, `{"city":"Rome","days":2}`)) + chatEnd,
			observation.UnknownTool, "call 2 names no function"},
		{"responses, interleaved", "openai-responses",
			added(0, "get_weather") + added(1, "get_weather") + delta(0, `{"city":"Paris",`) + delta(1, `{"city":"Rome",`) +
				delta(1, `"days":2}`) + delta(0, `"days":1}`) + respEnd,
			observation.Valid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := kindsConfig(t, srv.URL, tc.flavor, weatherTool)
			k, err := NewKinds(&c.Workloads[0].Kinds)
			if err != nil {
				t.Fatal(err)
			}
			cl := client.New(client.Options{})
			defer cl.Close()
			flavor, err := client.ParseFlavor(tc.flavor)
			if err != nil {
				t.Fatal(err)
			}
			req := &client.Request{Prompt: "p", MaxTokens: 64}
			k.apply(req)
			var o observation.Request
			cl.Do(context.Background(), &client.Target{BaseURL: srv.URL, Flavor: flavor, Model: "m"}, req, &o)
			if o.Outcome != observation.Success {
				t.Fatalf("outcome %s (%v)", o.Outcome, o.Err)
			}
			why := k.Check(context.Background(), &o)
			if o.ToolCallCheck != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("%q: %s (%s); want %s (%s)", o.Calls, o.ToolCallCheck, why, tc.want, tc.why)
			}
		})
	}
}
