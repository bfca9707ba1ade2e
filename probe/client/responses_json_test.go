package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// decodedResp is what a Responses API event or body means to the probe.
type decodedResp struct {
	Err                          bool
	Content, Reasoning, ToolCall string
	Calls                        string // the parts, as renderParts writes them
	HasUsage                     bool
	Prompt, Completion           int
	ReasoningTokens              int
	CachedTokens                 int
	Done                         bool
}

// responsesOracle reads an event (whose SSE event name is name) or a body
// the slow, obvious way: encoding/json into `any`, then the rules written
// at the top of responses_json.go.
func responsesOracle(data []byte, name string, body bool) decodedResp {
	bad := decodedResp{Err: true}
	if !json.Valid(data) {
		return bad
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return bad
	}
	top, ok := v.(map[string]any)
	if !ok {
		return bad
	}
	if e, ok := top["error"]; ok && e != nil {
		return bad
	}
	var out decodedResp
	text := func(m map[string]any, key string, dst *string) bool {
		switch t := m[key].(type) {
		case nil:
		case string:
			*dst += t
		default:
			return false
		}
		return true
	}
	count := func(u map[string]any, key string, dst *int) (present, good bool) {
		switch n := u[key].(type) {
		case nil:
			return false, true
		case json.Number:
			f, err := n.Float64()
			if err != nil || f < 0 || f > 1e9 || f != math.Trunc(f) {
				return false, false
			}
			*dst = int(f)
			return true, true
		default:
			return false, false
		}
	}
	usage := func(v any) bool {
		switch u := v.(type) {
		case nil:
		case map[string]any:
			p, okP := count(u, "input_tokens", &out.Prompt)
			c, okC := count(u, "output_tokens", &out.Completion)
			if !okP || !okC {
				return false
			}
			out.HasUsage = p || c
			switch d := u["output_tokens_details"].(type) {
			case nil:
			case map[string]any:
				if _, ok := count(d, "reasoning_tokens", &out.ReasoningTokens); !ok {
					return false
				}
			default:
				return false
			}
			// The cached count is absent when it cannot be read.
			if d, ok := u["input_tokens_details"].(map[string]any); ok {
				var n int
				if _, ok := count(d, "cached_tokens", &n); ok {
					out.CachedTokens = n
				}
			}
		default:
			return false
		}
		return true
	}
	if body {
		switch s := top["status"].(type) {
		case nil:
		case string:
			if s != "completed" && s != "incomplete" {
				return bad
			}
		default:
			return bad
		}
		if !usage(top["usage"]) {
			return bad
		}
		parts := func(v any, dst *string) bool {
			switch ps := v.(type) {
			case nil:
			case []any:
				for _, p := range ps {
					part, ok := p.(map[string]any)
					if !ok || !text(part, "text", dst) || !text(part, "refusal", dst) {
						return false
					}
				}
			default:
				return false
			}
			return true
		}
		switch items := top["output"].(type) {
		case nil:
		case []any:
			for _, el := range items {
				item, ok := el.(map[string]any)
				if !ok {
					return bad
				}
				var typ string
				switch ty := item["type"].(type) {
				case nil:
				case string:
					typ = ty
				default:
					return bad
				}
				good := true
				switch typ {
				case "message":
					good = parts(item["content"], &out.Content)
				case "reasoning":
					good = parts(item["content"], &out.Reasoning) && parts(item["summary"], &out.Reasoning)
				case "function_call", "custom_tool_call":
					argsKey := "arguments"
					if typ == "custom_tool_call" {
						argsKey = "input"
					}
					var name, args string
					good = text(item, "name", &name) && text(item, argsKey, &args)
					out.ToolCall += name + args
					out.Calls += renderPart(-1, "", name, args, true)
				}
				if !good {
					return bad
				}
			}
		default:
			return bad
		}
		return out
	}
	kind := ""
	switch ty := top["type"].(type) {
	case nil:
		if name != "message" {
			kind = name
		}
	case string:
		kind = ty
	default:
		return bad
	}
	if kind == "error" || kind == "response.failed" {
		return bad
	}
	switch r := top["response"].(type) {
	case nil:
	case map[string]any:
		if !usage(r["usage"]) {
			return bad
		}
	default:
		return bad
	}
	index := oracleIndex(top["output_index"])
	var dst *string
	switch kind {
	case "response.output_text.delta", "response.refusal.delta":
		dst = &out.Content
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		dst = &out.Reasoning
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		var delta string
		if !text(top, "delta", &delta) {
			return bad
		}
		id, _ := top["item_id"].(string)
		out.ToolCall = delta
		out.Calls = renderPart(index, id, "", delta, false)
	case "response.completed", "response.incomplete":
		out.Done = true
	case "response.output_item.added":
		switch item := top["item"].(type) {
		case nil:
		case map[string]any:
			var typ string
			if !text(item, "type", &typ) {
				return bad
			}
			if typ == "function_call" || typ == "custom_tool_call" {
				if !text(item, "name", &out.ToolCall) {
					return bad
				}
				id, _ := item["id"].(string)
				out.Calls = renderPart(index, id, out.ToolCall, "", false)
			}
		default:
			return bad
		}
	}
	if dst != nil && !text(top, "delta", dst) {
		return bad
	}
	return out
}

// scanResponses decodes data with the scanner, as an event named name or a
// body.
func scanResponses(c *responsesChunk, data []byte, name string, body bool) decodedResp {
	var ch Chunk
	var err error
	if body {
		err = c.decodeBody(data, &ch)
	} else {
		err = c.decodeEvent(data, name, &ch)
	}
	if err != nil {
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			panic("decode returned a non-protocol error")
		}
		return decodedResp{Err: true}
	}
	return decodedResp{
		Content: string(ch.Content), Reasoning: string(ch.Reasoning), ToolCall: string(ch.ToolCall),
		Calls:    renderParts(ch.Calls),
		HasUsage: ch.HasUsage, Prompt: ch.PromptTokens, Completion: ch.CompletionTokens,
		ReasoningTokens: ch.ReasoningTokens, CachedTokens: ch.CachedTokens, Done: ch.Done,
	}
}

// responsesSeeds are events and bodies, each read both ways.
var responsesSeeds = []string{
	`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}`,
	`{"delta":" tok\n\u00e9\ud83d\ude00","type":"response.output_text.delta"}`,
	`{"type":"response.refusal.delta","delta":"no"}`,
	`{"type":"response.reasoning_text.delta","delta":"think"}`,
	`{"type":"response.reasoning_summary_text.delta","delta":"**T**","summary_index":0}`,
	`{"type":"response.function_call_arguments.delta","delta":"{\"x\":"}`,
	`{"type":"response.function_call_arguments.delta","item_id":"fc_2","output_index":2,"delta":"{\"x\":"}`,
	`{"type":"response.function_call_arguments.delta","item_id":5,"output_index":"2","delta":"1"}`,
	`{"type":"response.function_call_arguments.delta","item_id":"a","item_id":null,"output_index":1.5,"output_index":3,"delta":"1"}`,
	`{"type":"response.custom_tool_call_input.delta","item_id":"ct\u0031","output_index":-1,"delta":null}`,
	`{"type":"response.output_item.added","output_index":0,"item":{"id":["x"],"type":"function_call","name":"f"}}`,
	`{"type":"response.output_item.added","output_index":0,"item":{"id":"m","type":"message","name":"f"}}`,
	`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"delta":"x"}`,
	`{"type":"response.custom_tool_call_input.delta","delta":"ls"}`,
	`{"type":"response.output_text.done","text":"whole"}`,
	`{"type":"response.output_item.added","item":{"type":"function_call","name":"f","arguments":""}}`,
	`{"type":"response.output_item.added","output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`,
	`{"type":"response.output_item.added","item":{"type":"custom_tool_call","name":"sh","input":""}}`,
	`{"type":"response.output_item.added","item":{"name":"f","type":"function_call","name":"g"}}`,
	`{"type":"response.output_item.added","item":{"type":"function_call","name":null}}`,
	`{"type":"response.output_item.added","item":{"type":"function_call"}}`,
	`{"type":"response.output_item.added","item":{"type":"function_call","name":7}}`,
	`{"type":"response.output_item.added","item":{"type":"message","name":7,"content":[]}}`,
	`{"type":"response.output_item.added","item":{"type":7,"name":"f"}}`,
	`{"type":"response.output_item.added","item":null}`,
	`{"type":"response.output_item.added","item":[1]}`,
	`{"type":"response.output_item.added","item":{"type":"function_call","name":"f"},"item":{"type":"message"}}`,
	`{"type":"response.output_item.added","item":{"type":"function_call","name":"f\u00e9\ud800"}}`,
	`{"type":"response.output_item.done","item":{"type":"function_call","name":"f","arguments":"{}"}}`,
	`{"type":"response.output_text.delta","delta":"a","item":7}`,
	`{"item":{"type":"function_call","name":"f"}}`,
	`{"type":"response.output_item.done","item":{"type":"message","content":[{"type":"output_text","text":"x"}]}}`,
	`{"type":"response.content_part.added","part":{"type":"output_text","text":""}}`,
	`{"type":"response.created","response":{"id":"r","status":"in_progress","output":[],"usage":null}}`,
	`{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":37,"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":1e1,"output_tokens":3.0,"output_tokens_details":{"reasoning_tokens":2}}}}`,
	`{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"output_tokens":16}}}`,
	`{"type":"response.incomplete","response":null}`,
	`{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error"}}}`,
	`{"type":"response.failed"}`,
	`{"type":"error","code":"x","message":"y","param":null}`,
	`{"error":{"message":"boom"}}`,
	`{"error":null,"type":"response.output_text.delta","delta":"a"}`,
	`{"type":null,"delta":"a"}`,
	`{"delta":"a"}`,
	`{"type":5,"delta":"a"}`,
	`{"type":"response.output_text.delta","delta":5}`,
	`{"type":"response.output_text.delta","delta":null}`,
	`{"type":"response.output_text.delta","delta":5,"delta":"ok"}`,
	`{"type":"response.audio.delta","delta":5}`,
	`{"type":"response.output_text.delta","type":"response.reasoning_text.delta","delta":"r"}`,
	`{"type":"response.completed","response":{"usage":{"output_tokens":-1}}}`,
	`{"type":"response.completed","response":{"usage":{"output_tokens":"8"}}}`,
	`{"type":"response.completed","response":{"usage":7}}`,
	`{"type":"response.completed","response":{"usage":{"output_tokens_details":{"reasoning_tokens":3}}}}`,
	`{"type":"response.completed","response":{"usage":{"output_tokens":4,"output_tokens_details":[1]}}}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":64,"input_tokens_details":{"cached_tokens":48},"output_tokens":4}}}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":64,"input_tokens_details":{"cached_tokens":1e10},"output_tokens":4}}}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":64,"input_tokens_details":"x","output_tokens":4}}}`,
	`{"type":"response.completed","response":{"usage":{"output_tokens":4}},"response":null}`,
	`{"type":"response.completed","response":[]}`,
	`{"type":"response.created","response":{"output":[{"type":"message","content":"not read here"}],"status":7}}`,
	`{"type":"response.output_text.delta","usage":7,"status":8,"output":9,"delta":"top-level members of an event are not read"}`,
	`{"typ\u0065":"response.output_text.delta","d\u0065lta":"esc"}`,
	"{\"type\":\"response.output_text.delta\",\"delta\":\"\xff\xfeok\\u0041\xc3\"}",
	`{"type":"response.output_text.delta","delta":"\ud800\ud800\udc00"}`,
	// Bodies (also read as events: nothing there is an event).
	`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Paris.","annotations":[]}]}],"usage":{"input_tokens":12,"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0}}}`,
	`{"status":"incomplete","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"S"}],"content":[{"type":"reasoning_text","text":"R"}]},{"type":"message","content":[{"type":"refusal","refusal":"no"},{"text":"a","refusal":"b"}]}]}`,
	`{"status":"completed","output":[{"type":"function_call","name":"get_weather","arguments":"{\"city\":\"Paris\"}","call_id":"c"},{"type":"custom_tool_call","name":"sh","input":"ls"}]}`,
	`{"status":"completed","output":[{"arguments":"x","name":"f","type":"function_call","name":"g"}]}`,
	`{"status":"completed","output":[{"type":"web_search_call","action":{"query":"q"},"content":7,"name":8}]}`,
	`{"status":"completed","output":[{"type":"message","content":"a string"}]}`,
	`{"status":"completed","output":[{"type":"message","content":[7]}]}`,
	`{"status":"completed","output":[{"type":"message","content":[{"text":7}]}]}`,
	`{"status":"completed","output":[{"type":"message","content":[{"text":7}],"content":[{"text":"ok"}]}]}`,
	`{"status":"completed","output":[{"type":"message","content":null,"summary":5}]}`,
	`{"status":"completed","output":[{"type":"reasoning","summary":5}]}`,
	`{"status":"completed","output":[{"type":"function_call","arguments":{"x":1}}]}`,
	`{"status":"completed","output":[{"type":"function_call","input":{"x":1}}]}`,
	`{"status":"completed","output":[{"type":"custom_tool_call","input":{"x":1}}]}`,
	`{"status":"completed","output":[{"type":7}]}`,
	`{"status":"completed","output":[1]}`,
	`{"status":"completed","output":{"type":"message"}}`,
	`{"status":"completed","output":[{"type":"message","content":[{"text":"a"}]}],"output":[{"type":"message","content":[{"text":"b"}]}]}`,
	`{"status":"completed","output":[{"type":"message","content":[{"text":"a"}]}],"output":null}`,
	`{"status":"failed","output":[]}`,
	`{"status":"queued"}`,
	`{"status":null,"output":null,"usage":null}`,
	`{"status":7}`,
	`{"status":"completed","usage":{"input_tokens":2.5}}`,
	`{"status":"completed","error":{"code":"x"}}`,
	`{"status":"completed","error":null,"output":[]}`,
	`{"object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"\u0041"}]}]}`,
	"{\"output\":[{\"type\":\"message\",\"content\":[{\"text\":\"\xff\"}]}]}",
	`[1]`, `"str"`, `{}`, ` {} `, `{} x`, `{"a":01}`, `{"a":"\q"}`, `{,}`, `{"a":1,}`, ``, `{"a"}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"output":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"output":[{"content":[{"text":` + strings.Repeat("[", 9996) + strings.Repeat("]", 9996) + `}]}]}`,
	`{"response":{"usage":{"output_tokens_details":{"x":` + strings.Repeat("[", 9996) + strings.Repeat("]", 9996) + `}}}}`,
	`{"response":{"usage":{"output_tokens_details":{"x":` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `}}}}`,
}

// The SSE event names the seeds are read under: the default, a type's own
// name, and the error event's.
var responsesSeedNames = []string{"message", "response.output_text.delta", "response.completed", "error", "response.failed", "response.output_item.added"}

func TestDecodeResponsesMatchesOracle(t *testing.T) {
	var c responsesChunk
	for _, s := range responsesSeeds {
		for _, body := range []bool{false, true} {
			for _, name := range responsesSeedNames {
				got, want := scanResponses(&c, []byte(s), name, body), responsesOracle([]byte(s), name, body)
				if got != want {
					t.Errorf("%.80q (body %v, event %s):\n got %+v\nwant %+v", s, body, name, got, want)
				}
			}
		}
	}
}

// TestDecodeResponsesRecorded reads every document of the recorded
// examples both ways.
func TestDecodeResponsesRecorded(t *testing.T) {
	var c responsesChunk
	for _, line := range strings.Split(readTestdata(t, "openai_responses_stream_docs.sse"), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		got, want := scanResponses(&c, []byte(d), "message", false), responsesOracle([]byte(d), "message", false)
		if got != want || got.Err {
			t.Errorf("%.80q:\n got %+v\nwant %+v", d, got, want)
		}
	}
	for _, f := range []string{"openai_responses_function_call_docs.json", "openai_responses_reasoning_docs.json"} {
		b := []byte(readTestdata(t, f))
		got, want := scanResponses(&c, b, "message", true), responsesOracle(b, "message", true)
		if got != want || got.Err || !got.HasUsage {
			t.Errorf("%s:\n got %+v\nwant %+v", f, got, want)
		}
	}
}

// FuzzDecodeResponses checks that the scanner means exactly what
// encoding/json plus the documented rules mean, on any input, as an event
// and as a body, and that a reused scanner carries nothing from one
// document to the next.
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range responsesSeeds {
		f.Add([]byte(s), uint8(0), false)
		f.Add([]byte(s), uint8(3), true)
	}
	f.Add(readTestdataFile(f, "openai_responses_function_call_docs.json"), uint8(0), true)
	f.Add(readTestdataFile(f, "openai_responses_events/response.completed.json"), uint8(2), false)
	var prev responsesChunk
	f.Fuzz(func(t *testing.T, data []byte, n uint8, body bool) {
		name := responsesSeedNames[int(n)%len(responsesSeedNames)]
		want := responsesOracle(data, name, body)
		var fresh responsesChunk
		if got := scanResponses(&fresh, data, name, body); got != want {
			t.Fatalf("%q (body %v, event %s):\n got %+v\nwant %+v", data, body, name, got, want)
		}
		if got := scanResponses(&prev, data, name, body); got != want {
			t.Fatalf("reused scanner, %q (body %v, event %s):\n got %+v\nwant %+v", data, body, name, got, want)
		}
	})
}
