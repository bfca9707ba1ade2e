package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// respEvent is one event of a Responses API stream: its SSE event name and
// its data.
type respEvent struct {
	name string
	data map[string]any
}

// respEvents splits a Responses stream into its events, each an event line
// and a data line ended by a blank line.
func respEvents(t *testing.T, body []byte) []respEvent {
	t.Helper()
	var out []respEvent
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		name, rest, ok := strings.Cut(block, "\n")
		name, ok1 := strings.CutPrefix(name, "event: ")
		data, ok2 := strings.CutPrefix(rest, "data: ")
		if !ok || !ok1 || !ok2 || strings.Contains(data, "\n") {
			t.Fatalf("event %q is not an event line and a data line", block)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", block, err)
		}
		out = append(out, respEvent{name, m})
	}
	return out
}

// TestResponsesStream: POST /v1/responses streamed, as vLLM streams it:
// response.created and in_progress, then for each output item its added
// event (and content part), one delta event per generated token (reasoning
// text, then output text or function-call arguments), its done events, and
// response.completed, or response.incomplete at max_output_tokens, with
// the usage. Every event names its type in its event line and its data,
// carries the next sequence_number and a sim_emit_unix_nano.
func TestResponsesStream(t *testing.T) {
	const tools = `,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]`
	for _, tc := range []struct {
		name      string
		reasoning int
		extra     string
		ignoreEOS bool
		// The kind of each token event: r reasoning, c output text, t
		// function-call arguments; and the terminal event.
		kinds, terminal string
	}{
		{"text at max_output_tokens", 0, "", true, "cccccc", "response.incomplete"},
		// Stops at its drawn EOS point, before max_output_tokens: 57 of
		// 64 tokens for its prompt, as a chat request's.
		{"text", 0, "", false, "", "response.completed"},
		{"reasoning then text", 2, "", true, "rrcccc", "response.incomplete"},
		{"function call", 0, tools, true, "tttttt", "response.incomplete"},
		{"reasoning then a call", 2, tools, true, "rrtttt", "response.incomplete"},
		{"tool_choice none", 0, tools + `,"tool_choice":"none"`, true, "cccccc", "response.incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := startReasoning(t, tc.reasoning, "", "")
			req := `{"model":"sim-model","input":"a b c","stream":true` + tc.extra
			if tc.ignoreEOS {
				req += `,"max_output_tokens":6,"ignore_eos":true`
			} else {
				req = strings.Replace(req, "a b c", "hello world", 1) + `,"max_output_tokens":64`
			}
			evs := respEvents(t, readAll(t, base+"/v1/responses", req+"}"))
			if evs[0].name != "response.created" || evs[1].name != "response.in_progress" {
				t.Errorf("first events %s, %s", evs[0].name, evs[1].name)
			}
			var kinds, text, args, reasoning strings.Builder
			added := 0
			for i, e := range evs {
				if e.data["type"] != e.name {
					t.Errorf("event %d: line %q, type %v", i, e.name, e.data["type"])
				}
				if e.data["sequence_number"] != float64(i) {
					t.Errorf("event %d: sequence_number %v", i, e.data["sequence_number"])
				}
				if _, ok := e.data["sim_emit_unix_nano"].(float64); !ok {
					t.Errorf("event %d (%s) has no sim_emit_unix_nano", i, e.name)
				}
				d, _ := e.data["delta"].(string)
				switch e.name {
				case "response.output_item.added":
					added++
					if item, _ := e.data["item"].(map[string]any); item["type"] == "function_call" {
						kinds.WriteByte('t') // the call's name, its first answer token
					}
				case "response.reasoning_text.delta":
					kinds.WriteByte('r')
					reasoning.WriteString(d)
				case "response.output_text.delta":
					kinds.WriteByte('c')
					text.WriteString(d)
				case "response.function_call_arguments.delta":
					kinds.WriteByte('t')
					args.WriteString(d)
				case "response.reasoning_text.done":
					if e.data["text"] != reasoning.String() {
						t.Errorf("reasoning done %q, deltas %q", e.data["text"], reasoning.String())
					}
				case "response.output_text.done":
					if e.data["text"] != text.String() {
						t.Errorf("text done %q, deltas %q", e.data["text"], text.String())
					}
				case "response.function_call_arguments.done":
					if e.data["arguments"] != args.String() || e.data["name"] != "get_weather" {
						t.Errorf("arguments done %v, deltas %q", e.data, args.String())
					}
				}
				if strings.HasSuffix(e.name, ".delta") && d == "" {
					t.Errorf("event %d: empty delta", i)
				}
			}
			if tc.kinds != "" && kinds.String() != tc.kinds {
				t.Errorf("token events %q, want %q", kinds.String(), tc.kinds)
			}
			if want := 1 + min(tc.reasoning, 1); added != want {
				t.Errorf("%d output items added, want %d", added, want)
			}
			last := evs[len(evs)-1]
			if last.name != tc.terminal {
				t.Fatalf("last event %s, want %s (tokens %q)", last.name, tc.terminal, kinds.String())
			}
			resp := last.data["response"].(map[string]any)
			u := resp["usage"].(map[string]any)
			n := float64(len(kinds.String()))
			details := u["output_tokens_details"].(map[string]any)
			prompt := "a b c"
			if !tc.ignoreEOS {
				prompt = "hello world"
			}
			if u["output_tokens"] != n || u["input_tokens"] != float64(simulator.CountChatTokens([]simulator.ChatMessage{{Role: "user", Content: prompt}}, true)) ||
				details["reasoning_tokens"] != float64(strings.Count(kinds.String(), "r")) {
				t.Errorf("usage %v for %q", u, kinds.String())
			}
			out := resp["output"].([]any)
			if len(out) != added {
				t.Errorf("response output %v, want %d items", out, added)
			}
			if tc.terminal == "response.incomplete" {
				if inc, _ := resp["incomplete_details"].(map[string]any); resp["status"] != "incomplete" || inc["reason"] != "max_output_tokens" {
					t.Errorf("incomplete response %v", resp)
				}
			}
		})
	}
}

// TestResponsesNotStreamed: without "stream" the answer is one response
// object: its reasoning item, its message or function call, its status and
// usage.
func TestResponsesNotStreamed(t *testing.T) {
	base := startReasoning(t, 2, "", "")
	body := readAll(t, base+"/v1/responses",
		`{"model":"sim-model","instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"a b"}]},{"type":"message","role":"assistant","content":"c"},{"type":"function_call_output","call_id":"x","output":"d e"}],"max_output_tokens":5,"ignore_eos":true,"tools":[{"type":"function","function":{"name":"f"}}]}`)
	var r struct {
		Status string
		Output []struct {
			Type, Name, Arguments string
			Content               []struct{ Type, Text string }
		}
		Usage struct {
			In      int `json:"input_tokens"`
			Out     int `json:"output_tokens"`
			Details struct {
				Reasoning int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		}
		Emit int64 `json:"sim_emit_unix_nano"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	prompt := simulator.CountChatTokens([]simulator.ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "a b"},
		{Role: "assistant", Content: "c"}, {Role: "tool", Content: "d e"}}, true)
	if r.Status != "incomplete" || r.Usage.In != prompt || r.Usage.Out != 5 || r.Usage.Details.Reasoning != 2 || r.Emit == 0 {
		t.Errorf("status %s, usage %+v, emit %d; want incomplete, %d + 5 (2 reasoning)", r.Status, r.Usage, r.Emit, prompt)
	}
	// f has no parameters: its arguments are the empty object, spread
	// over the 2 answer tokens after its name ("{", "}").
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || len(r.Output[0].Content) != 1 || r.Output[1].Type != "function_call" ||
		r.Output[1].Name != "f" || r.Output[1].Arguments != "{}" {
		t.Errorf("output %+v, want reasoning then a call of f with arguments %q", r.Output, "{}")
	}
}

// TestResponsesStructured: a Responses request with tools is answered with
// a call whose arguments are a document its parameters accept; one with
// text.format json_schema or json_object with such a document as its text,
// as chat answers tools and response_format. The name is in
// output_item.added, the call's first answer token as chat's name delta
// is, and in function_call_arguments.done, not in a delta; every other
// answer token carries a piece of the document, streamed or not. The
// InvalidStructured fault (1: every answer) cuts the document's last byte.
func TestResponsesStructured(t *testing.T) {
	const (
		params = `{"type":"object","properties":{"city":{"type":"string","minLength":3},"days":{"type":"integer","minimum":2}},"required":["city","days"]}`
		tools  = `,"tools":[{"type":"function","name":"noargs"},{"type":"function","name":"get_weather","description":"d","parameters":` + params + `}]`
		schema = `{"type":"object","properties":{"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"minItems":2}},"required":["n","tags"]}`
		city   = `{"city":"ooo","days":2}`
		answer = `{"n":1,"tags":["oo","oo"]}`
	)
	for _, tc := range []struct {
		name, extra string
		reasoning   int
		invalid     float64
		// call is the function called ("" for a text answer); doc the
		// answer's document, before padding.
		call, doc string
	}{
		{"first tool", `,"tools":[{"type":"function","name":"get_weather","parameters":` + params + `},{"type":"function","name":"noargs"}]`, 0, 0, "get_weather", city},
		{"named tool", tools + `,"tool_choice":{"type":"function","name":"get_weather"}`, 0, 0, "get_weather", city},
		{"named tool, chat's shape", tools + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`, 0, 0, "get_weather", city},
		{"required, after reasoning", tools + `,"tool_choice":"required"`, 2, 0, "noargs", "{}"},
		{"json_schema", `,"text":{"format":{"type":"json_schema","name":"answer","schema":` + schema + `,"strict":true}}`, 0, 0, "", answer},
		{"json_object", `,"text":{"format":{"type":"json_object"}}`, 2, 0, "", `{"answer":"ok"}`},
		{"tools and a format: the call", tools + `,"tool_choice":"auto","text":{"format":{"type":"json_object"}}`, 0, 0, "noargs", "{}"},
		{"cut call", tools + `,"tool_choice":{"type":"function","name":"get_weather"}`, 0, 1, "get_weather", city[:len(city)-1]},
		{"cut answer", `,"text":{"format":{"type":"json_schema","name":"answer","schema":` + schema + `}}`, 0, 1, "", answer[:len(answer)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.ReasoningTokens = tc.reasoning
			cfg.Faults.InvalidStructured = tc.invalid
			base, _ := simulatortest.StartTest(t, cfg)
			const max = 32
			req := `{"model":"sim-model","input":"a b c","max_output_tokens":32,"ignore_eos":true` + tc.extra
			// A call's name is its first answer token: its arguments
			// are spread over the others.
			name := 0
			if tc.call != "" {
				name = 1
			}
			wantDoc := tc.doc + strings.Repeat(" ", max-tc.reasoning-name-len(tc.doc))

			// Streamed.
			evs := respEvents(t, readAll(t, base+"/v1/responses", req+`,"stream":true}`))
			var deltas, done, addedName, doneName string
			tokens := 0
			for _, e := range evs {
				d, _ := e.data["delta"].(string)
				switch e.name {
				case "response.output_item.added":
					if item := e.data["item"].(map[string]any); item["type"] == "function_call" {
						addedName, _ = item["name"].(string)
						tokens++ // the name is a token
						if item["arguments"] != "" {
							t.Errorf("added call %v: arguments before its deltas", item)
						}
					}
				case "response.function_call_arguments.delta", "response.output_text.delta":
					if (e.name == "response.function_call_arguments.delta") != (tc.call != "") {
						t.Errorf("%s in a %q answer", e.name, tc.call)
					}
					deltas += d
					tokens++
				case "response.reasoning_text.delta":
					tokens++
				case "response.function_call_arguments.done":
					done, _ = e.data["arguments"].(string)
					doneName, _ = e.data["name"].(string)
				case "response.output_text.done":
					done, _ = e.data["text"].(string)
				}
			}
			if addedName != tc.call || (tc.call != "" && doneName != tc.call) {
				t.Errorf("called %q (done %q), want %q", addedName, doneName, tc.call)
			}
			if tokens != max || deltas != wantDoc || done != deltas {
				t.Errorf("%d tokens, answer %q, done %q; want %d, %q", tokens, deltas, done, max, wantDoc)
			}
			if valid := json.Valid([]byte(deltas)); valid != (tc.invalid == 0) {
				t.Errorf("answer %q valid %v with InvalidStructured %v", deltas, valid, tc.invalid)
			}

			// Not streamed: the same document in the output item.
			var r struct {
				Output []struct {
					Type, Name, Arguments string
					Content               []struct{ Type, Text string }
				}
			}
			if err := json.Unmarshal(readAll(t, base+"/v1/responses", req+`}`), &r); err != nil {
				t.Fatal(err)
			}
			last := r.Output[len(r.Output)-1]
			got := last.Arguments
			if tc.call == "" {
				if last.Type != "message" || len(last.Content) != 1 {
					t.Fatalf("output %+v, want a message", r.Output)
				}
				got = last.Content[0].Text
			} else if last.Type != "function_call" || last.Name != tc.call {
				t.Fatalf("output %+v, want a call of %s", r.Output, tc.call)
			}
			if got != wantDoc {
				t.Errorf("body answer %q, want %q", got, wantDoc)
			}
		})
	}
}

// TestResponsesRefused: vLLM's refusals, with its error body.
func TestResponsesRefused(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	base, _ := simulatortest.StartTest(t, cfg)
	for _, tc := range []struct {
		body   string
		status int
		has    string
	}{
		{`{"model":"other","input":"a"}`, http.StatusNotFound, "does not exist"},
		{`{"model":"sim-model"}`, http.StatusBadRequest, "input is required"},
		{`{"input":7}`, http.StatusBadRequest, "input must be"},
		{`{"input":[{"type":"reasoning"}]}`, http.StatusBadRequest, "no message"},
		{`{"input":"a","max_output_tokens":0}`, http.StatusBadRequest, "at least 1"},
		{`{"input":"a","max_output_tokens":100000000}`, http.StatusBadRequest, "maximum context length"},
		{`{"input":"a"`, http.StatusBadRequest, "invalid JSON"},
	} {
		resp := postJSON(t, base+"/v1/responses", tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.has) || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s: %d %s, want %d with %q", tc.body, resp.StatusCode, b, tc.status, tc.has)
		}
	}
}

// TestResponsesOnlyVLLM: the Responses API is vLLM's: the other engines do
// not serve it.
func TestResponsesOnlyVLLM(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.Engine = simulator.EngineSGLang
	base, _ := simulatortest.StartTest(t, cfg)
	resp := postJSON(t, base+"/v1/responses", `{"input":"a"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("sglang: %d, want no such route", resp.StatusCode)
	}
}
