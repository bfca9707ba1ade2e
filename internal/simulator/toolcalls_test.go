package simulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

const weatherTools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`

// TestToolCallChatStream: a chat request that offers tools is answered
// with a call of the first tool, streamed as vLLM streams one: the role
// chunk, a delta naming the function, one argument delta per later token,
// no content; usage counts every token. Every chunk is stamped. With
// reasoning, the call follows the reasoning.
func TestToolCallChatStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reasoning int
	}{{"plain", 0}, {"after reasoning", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			base := startReasoning(t, tc.reasoning, "", "")
			body := readAll(t, base+"/v1/chat/completions",
				`{"model":"sim-model","messages":[{"role":"user","content":"a b c"}],`+weatherTools+`,"max_tokens":8,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
			fs := frames(t, body)
			if len(fs) != 10 {
				t.Fatalf("%d frames, want 10 (role, 8 tokens, usage):\n%s", len(fs), body)
			}
			var args string
			for i, m := range fs[1:9] {
				if _, ok := m["sim_emit_unix_nano"].(float64); !ok {
					t.Errorf("token %d has no sim_emit_unix_nano", i)
				}
				c := m["choices"].([]any)[0].(map[string]any)
				d := c["delta"].(map[string]any)
				if i < tc.reasoning {
					if d["reasoning"] == nil || d["tool_calls"] != nil {
						t.Errorf("token %d: %v, want reasoning", i, d)
					}
					continue
				}
				if _, ok := d["content"]; ok {
					t.Errorf("token %d carries content: %v", i, d)
				}
				calls, _ := d["tool_calls"].([]any)
				if len(calls) != 1 {
					t.Fatalf("token %d: %v, want one tool call", i, d)
				}
				call := calls[0].(map[string]any)
				fn := call["function"].(map[string]any)
				if i == tc.reasoning {
					if fn["name"] != "get_weather" || call["id"] == nil || fn["arguments"] != "" {
						t.Errorf("first call delta %v, want get_weather's name and id", call)
					}
					continue
				}
				if _, ok := fn["name"]; ok {
					t.Errorf("token %d repeats the name: %v", i, call)
				}
				a, _ := fn["arguments"].(string)
				if a == "" {
					t.Errorf("token %d: no arguments piece: %v", i, call)
				}
				args += a
			}
			if fr := fs[8]["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "length" {
				t.Errorf("last finish_reason %v, want length (ignore_eos at max_tokens)", fr)
			}
			u, _ := fs[9]["usage"].(map[string]any)
			if u["completion_tokens"] != 8.0 {
				t.Errorf("usage %v, want 8 completion tokens", u)
			}
			if args == "" {
				t.Error("no arguments")
			}
		})
	}
}

// TestToolCallChatBody: not streamed, the call is in message.tool_calls
// with a null content; a generation that stops says "tool_calls".
func TestToolCallChatBody(t *testing.T) {
	base, _ := simulatortest.StartTest(t, simulatortest.InstantConfig())
	body := readAll(t, base+"/v1/chat/completions",
		`{"model":"sim-model","messages":[{"role":"user","content":"a b c"}],`+weatherTools+`,"max_tokens":6}`)
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	m := r.Choices[0].Message
	if m.Content != nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].ID == "" {
		t.Fatalf("message %s, want one call of get_weather and no content", body)
	}
	n := r.Usage.CompletionTokens
	if want := map[bool]string{true: "tool_calls", false: "length"}[n < 6]; r.Choices[0].FinishReason != want {
		t.Errorf("finish_reason %q after %d of 6 tokens, want %q", r.Choices[0].FinishReason, n, want)
	}
	if (n > 1) != (m.ToolCalls[0].Function.Arguments != "") {
		t.Errorf("%d tokens, arguments %q: the tokens after the name are the arguments", n, m.ToolCalls[0].Function.Arguments)
	}
}

// TestToolChoiceNone: tool_choice "none" asks for a text answer.
func TestToolChoiceNone(t *testing.T) {
	base, _ := simulatortest.StartTest(t, simulatortest.InstantConfig())
	body := readAll(t, base+"/v1/chat/completions",
		`{"model":"sim-model","messages":[{"role":"user","content":"a b c"}],`+weatherTools+`,"tool_choice":"none","max_tokens":4,"ignore_eos":true,"stream":true}`)
	for i, m := range frames(t, body) {
		d := m["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		if _, ok := d["tool_calls"]; ok || d["content"] == nil {
			t.Errorf("frame %d: %v, want content and no tool call", i, d)
		}
	}
}

// TestToolTurns: with ToolTurns set, a request offering tools is answered
// with a call while its messages hold fewer tool results, then with text.
func TestToolTurns(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.ToolTurns = 2
	base, _ := simulatortest.StartTest(t, cfg)
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`
	result := `{"role":"tool","tool_call_id":"call_0","content":"sunny"}`
	for results, want := range []bool{true, true, false} {
		msgs := `{"role":"user","content":"a b c"}`
		for range results {
			msgs += "," + call + "," + result
		}
		body := readAll(t, base+"/v1/chat/completions",
			`{"model":"sim-model","messages":[`+msgs+`],`+weatherTools+`,"max_tokens":6}`)
		if got := strings.Contains(string(body), `"tool_calls":[`); got != want {
			t.Errorf("%d tool results: answered with a call %v, want %v: %s", results, got, want, body)
		}
	}
}

// twoTools offers two functions with different parameters.
const twoTools = `"tools":[{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}},` +
	`{"type":"function","function":{"name":"fetch","parameters":{"type":"object","properties":{"url":{"type":"string"},"depth":{"type":"integer"}},"required":["url","depth"]}}}]`

// TestParallelToolCallsStream: with ToolCalls 3, an answer that calls
// tools streams three calls one after the other, each opened by a delta
// with its own index (0, 1, 2), id and name, the offered tools in turn,
// then its arguments' deltas under the same index; each call's arguments
// are a JSON document that the called function's parameters accept; the
// exporter's client reads three calls, with their names and arguments.
// Every answer token is one delta, and usage counts them all.
func TestParallelToolCallsStream(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.ToolCalls = 3
	base, _ := simulatortest.StartTest(t, cfg)
	const maxTokens = 11 // 4, 4 and 3 tokens a call
	body := readAll(t, base+"/v1/chat/completions",
		`{"model":"sim-model","messages":[{"role":"user","content":"a b c"}],`+twoTools+`,"max_tokens":11,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
	fs := frames(t, body)
	if len(fs) != maxTokens+2 {
		t.Fatalf("%d frames, want %d (role, %d tokens, usage):\n%s", len(fs), maxTokens+2, maxTokens, body)
	}
	wantNames := []string{"search", "fetch", "search"}
	wantTokens := []int{4, 4, 3}
	args := make([]string, len(wantNames))
	tokens := make([]int, len(wantNames))
	ids := map[string]bool{}
	last := -1
	for i, m := range fs[1 : maxTokens+1] {
		d := m["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		calls, _ := d["tool_calls"].([]any)
		if _, ok := d["content"]; ok || len(calls) != 1 {
			t.Fatalf("token %d: %v, want one tool call delta and no content", i, d)
		}
		call := calls[0].(map[string]any)
		idx, _ := call["index"].(float64)
		j := int(idx)
		if j < 0 || j >= len(wantNames) || j < last || j > last+1 {
			t.Fatalf("token %d: call index %v after %d, want the calls in order 0..%d", i, call["index"], last, len(wantNames)-1)
		}
		fn := call["function"].(map[string]any)
		if j != last {
			id, _ := call["id"].(string)
			if fn["name"] != wantNames[j] || id == "" || ids[id] {
				t.Errorf("call %d opens with %v, want %s's name and a new id", j, call, wantNames[j])
			}
			ids[id] = true
		} else if _, ok := fn["name"]; ok {
			t.Errorf("token %d repeats call %d's name: %v", i, j, call)
		}
		last = j
		tokens[j]++
		a, _ := fn["arguments"].(string)
		args[j] += a
	}
	if last != len(wantNames)-1 {
		t.Fatalf("%d calls, want %d", last+1, len(wantNames))
	}
	for j, a := range args {
		var doc map[string]any
		if err := json.Unmarshal([]byte(a), &doc); err != nil {
			t.Errorf("call %d arguments %q: %v", j, a, err)
		}
		if _, ok := doc[map[string]string{"search": "query", "fetch": "url"}[wantNames[j]]]; !ok {
			t.Errorf("call %d (%s) arguments %q lack its required property", j, wantNames[j], a)
		}
		if tokens[j] != wantTokens[j] {
			t.Errorf("call %d has %d tokens, want %d", j, tokens[j], wantTokens[j])
		}
	}
	if u, _ := fs[maxTokens+1]["usage"].(map[string]any); u["completion_tokens"] != float64(maxTokens) {
		t.Errorf("usage %v, want %d completion tokens", u, maxTokens)
	}

	var obs observation.Request
	var tools []any
	if err := json.Unmarshal([]byte("{"+twoTools+"}"), &struct{ Tools *[]any }{&tools}); err != nil {
		t.Fatal(err)
	}
	cl := client.New(client.Options{})
	defer cl.Close()
	cl.Do(context.Background(), &client.Target{BaseURL: base, Model: "sim-model"},
		&client.Request{Prompt: "a b c", MaxTokens: maxTokens, IgnoreEOS: true, KeepText: true, Extra: map[string]any{"tools": tools}}, &obs)
	if obs.Outcome != observation.Success || len(obs.Calls) != len(wantNames) {
		t.Fatalf("the client read %s, %d calls %+v, want %d", obs.Outcome, len(obs.Calls), obs.Calls, len(wantNames))
	}
	for j, c := range obs.Calls {
		if c.Name != wantNames[j] || c.Arguments != args[j] {
			t.Errorf("the client's call %d: %+v, want %s with %q", j, c, wantNames[j], args[j])
		}
	}
}

// TestParallelToolCallsBody: not streamed, message.tool_calls holds the
// calls, each with its id, name and whole arguments; a named tool_choice
// has every call name its function; an answer of fewer tokens than calls
// holds a call a token, its arguments whole in it.
func TestParallelToolCallsBody(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.ToolCalls = 3
	base, _ := simulatortest.StartTest(t, cfg)
	for _, tc := range []struct {
		name, extra string
		maxTokens   int
		want        []string
	}{
		{"in turn", ``, 9, []string{"search", "fetch", "search"}},
		{"named", `,"tool_choice":{"type":"function","function":{"name":"fetch"}}`, 9, []string{"fetch", "fetch", "fetch"}},
		{"fewer tokens than calls", ``, 2, []string{"search", "fetch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := readAll(t, base+"/v1/chat/completions", fmt.Sprintf(
				`{"model":"sim-model","messages":[{"role":"user","content":"a b c"}],%s%s,"max_tokens":%d,"ignore_eos":true}`, twoTools, tc.extra, tc.maxTokens))
			var r struct {
				Choices []struct {
					Message struct {
						Content   *string `json:"content"`
						ToolCalls []struct {
							ID       string `json:"id"`
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
				}
			}
			if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) != 1 {
				t.Fatalf("%v: %s", err, body)
			}
			m := r.Choices[0].Message
			if m.Content != nil || len(m.ToolCalls) != len(tc.want) {
				t.Fatalf("message %s, want %d calls and no content", body, len(tc.want))
			}
			ids := map[string]bool{}
			for j, c := range m.ToolCalls {
				if c.Function.Name != tc.want[j] || c.ID == "" || ids[c.ID] || !json.Valid([]byte(c.Function.Arguments)) {
					t.Errorf("call %d: %+v, want %s with a new id and JSON arguments", j, c, tc.want[j])
				}
				ids[c.ID] = true
			}
		})
	}
}

// TestToolTurnsRounds: with parallel calls, ToolTurns counts rounds of tool
// results (a run of tool messages answers one turn's calls), not results.
func TestToolTurnsRounds(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.ToolTurns, cfg.ToolCalls = 2, 2
	base, _ := simulatortest.StartTest(t, cfg)
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"get_weather","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`
	results := `{"role":"tool","tool_call_id":"a","content":"sunny"},{"role":"tool","tool_call_id":"b","content":"rainy"}`
	for rounds, want := range []bool{true, true, false} {
		msgs := `{"role":"user","content":"a b c"}`
		for range rounds {
			msgs += "," + call + "," + results
		}
		body := readAll(t, base+"/v1/chat/completions",
			`{"model":"sim-model","messages":[`+msgs+`],`+weatherTools+`,"max_tokens":6}`)
		if got := strings.Contains(string(body), `"tool_calls":[`); got != want {
			t.Errorf("%d rounds of two results: answered with a call %v, want %v: %s", rounds, got, want, body)
		}
	}
}
