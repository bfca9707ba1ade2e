package simulator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
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
