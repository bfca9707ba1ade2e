package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// decoded is what a chunk means to the probe.
type decoded struct {
	Err                          bool
	Content, Reasoning, ToolCall string
	Calls                        string // the parts, as renderParts writes them
	HasUsage                     bool
	Prompt, Completion           int
	ReasoningTokens              int
	CachedTokens                 int
}

// renderPart writes one tool-call part for a comparison.
func renderPart(index int, id, name, args string, whole bool) string {
	return fmt.Sprintf("[%d %q %q %q %v]", index, id, name, args, whole)
}

// renderParts writes a chunk's tool-call parts for a comparison.
func renderParts(parts []CallPart) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(renderPart(p.Index, string(p.ID), string(p.Name), string(p.Arguments), p.Whole))
	}
	return b.String()
}

// oracleIndex reads a call's index by the documented rule: an integer in
// [0, 1e9], else none (-1).
func oracleIndex(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1e9 || f != math.Trunc(f) {
		return -1
	}
	return int(f)
}

// oracle reads a chunk the slow, obvious way: encoding/json into `any`, then
// the rules written at the top of openai_json.go.
func oracle(data []byte) decoded {
	bad := decoded{Err: true}
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
	if o, ok := top["object"].(string); ok && o == "error" {
		return bad
	}
	var out decoded
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
	// function reads a tool call's function or a function_call: an object
	// or null whose name and arguments are texts; an object is a part of
	// the call of that index and id.
	function := func(v any, index int, id string, dst, parts *string) bool {
		switch fn := v.(type) {
		case nil:
			return true
		case map[string]any:
			var name, args string
			if !text(fn, "name", &name) || !text(fn, "arguments", &args) {
				return false
			}
			*dst += name + args
			*parts += renderPart(index, id, name, args, false)
			return true
		}
		return false
	}
	toolCalls := func(o map[string]any, dst, parts *string) bool {
		switch calls := o["tool_calls"].(type) {
		case nil:
		case []any:
			for _, el := range calls {
				call, ok := el.(map[string]any)
				if !ok {
					return false
				}
				id, _ := call["id"].(string)
				if !function(call["function"], oracleIndex(call["index"]), id, dst, parts) {
					return false
				}
			}
		default:
			return false
		}
		return function(o["function_call"], -1, "", dst, parts)
	}
	switch ch := top["choices"].(type) {
	case nil:
	case []any:
		for _, el := range ch {
			choice, ok := el.(map[string]any)
			if !ok {
				return bad
			}
			var content, reasoning, toolCall, parts string
			for _, k := range []string{"delta", "message"} {
				switch o := choice[k].(type) {
				case nil:
				case map[string]any:
					if !text(o, "content", &content) || !text(o, "refusal", &content) {
						return bad
					}
				default:
					return bad
				}
			}
			if !text(choice, "text", &content) {
				return bad
			}
			for _, k := range []string{"delta", "message"} {
				if o, ok := choice[k].(map[string]any); ok {
					if !text(o, "reasoning_content", &reasoning) || !text(o, "reasoning", &reasoning) {
						return bad
					}
				}
			}
			for _, k := range []string{"delta", "message"} {
				if o, ok := choice[k].(map[string]any); ok {
					if !toolCalls(o, &toolCall, &parts) {
						return bad
					}
				}
			}
			out.Content += content
			out.Reasoning += reasoning
			out.ToolCall += toolCall
			out.Calls += parts
		}
	default:
		return bad
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
	switch u := top["usage"].(type) {
	case nil:
	case map[string]any:
		p, okP := count(u, "prompt_tokens", &out.Prompt)
		c, okC := count(u, "completion_tokens", &out.Completion)
		if !okP || !okC {
			return bad
		}
		out.HasUsage = p || c
		switch d := u["completion_tokens_details"].(type) {
		case nil:
		case map[string]any:
			if _, ok := count(d, "reasoning_tokens", &out.ReasoningTokens); !ok {
				return bad
			}
		default:
			return bad
		}
		// The cached count is absent when it cannot be read.
		if d, ok := u["prompt_tokens_details"].(map[string]any); ok {
			var n int
			if _, ok := count(d, "cached_tokens", &n); ok {
				out.CachedTokens = n
			}
		}
	default:
		return bad
	}
	return out
}

func scanChunk(c *openAIChunk, data []byte) decoded {
	var ch Chunk
	if err := c.decode(data, &ch); err != nil {
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			panic("decode returned a non-protocol error")
		}
		return decoded{Err: true}
	}
	return decoded{
		Content: string(ch.Content), Reasoning: string(ch.Reasoning), ToolCall: string(ch.ToolCall),
		Calls:    renderParts(ch.Calls),
		HasUsage: ch.HasUsage, Prompt: ch.PromptTokens, Completion: ch.CompletionTokens,
		ReasoningTokens: ch.ReasoningTokens, CachedTokens: ch.CachedTokens,
	}
}

var chunkSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":" tok\n\u00e9\ud83d\ude00"},"finish_reason":null}]}`,
	`{"choices":[{"delta":{"reasoning_content":"think","content":null}}]}`,
	`{"choices":[{"delta":{"reasoning":"r"}}],"usage":null}`,
	`{"choices":[{"text":"q","index":0}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`,
	`{"choices":[],"usage":{"prompt_tokens":6,"completion_tokens":8,"total_tokens":14}}`,
	`{"choices":[{"message":{"role":"assistant","content":"all","reasoning_content":"x"}}],"usage":{"prompt_tokens":1e1,"completion_tokens":3.0}}`,
	`{"error":{"message":"boom","code":500}}`,
	`{"error":null,"choices":[{"delta":{"content":"a"}}]}`,
	`{"object":"error","message":"bad","code":400}`,
	`{"obj\u0065ct":"\u0065rror"}`,
	`{"choices":[{"delta":{"content":"a"},"delta":{"role":"x"}}],"choices":[{"text":"b"}]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choices":[{"delta":{"content":5},"delta":{"content":"ok"}}]}`,
	`{"choices":{"x":1}}`,
	`{"choices":[1]}`,
	`{"usage":{"completion_tokens":-1}}`,
	`{"usage":{"completion_tokens":1000000001}}`,
	`{"usage":{"completion_tokens":"8"}}`,
	`{"usage":7}`,
	`{"choices":[],"usage":{"prompt_tokens":6,"completion_tokens":50,"completion_tokens_details":{"reasoning_tokens":30,"audio_tokens":0}}}`,
	`{"usage":{"completion_tokens_details":{"reasoning_tokens":3}}}`,
	`{"usage":{"completion_tokens":4,"completion_tokens_details":null}}`,
	`{"usage":{"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":null}}}`,
	`{"usage":{"completion_tokens":4,"completion_tokens_details":{}}}`,
	`{"usage":{"completion_tokens":4,"completion_tokens_details":[1]}}`,
	`{"usage":{"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":"2"}}}`,
	`{"usage":{"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":-1}}}`,
	`{"usage":{"completion_tokens_details":{"reasoning_tokens":2},"completion_tokens_details":null}}`,
	`{"usage":{"completion_tokens_details":7,"completion_tokens_details":{"reasoning_tokens":1,"reasoning_tokens":2.0}}}`,
	`{"usage":{"completion_tokens_details":{"reasoning_tokens":2}},"usage":null}`,
	`{"usage":null,"completion_tokens_details":{"reasoning_tokens":2}}`,
	`{"usage":{"completion_tokens_details":{"x":{"reasoning_tokens":2},"reasoning_tokens":1e0}}}`,
	// Cached prompt tokens (vLLM with --enable-prompt-tokens-details,
	// SGLang, OpenAI): read when they can be, never a protocol error.
	`{"choices":[],"usage":{"prompt_tokens":1024,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":512}}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":null}}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":"4"}}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":-4}}}`,
	`{"usage":{"prompt_tokens":9,"prompt_tokens_details":[4]}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":2,"cached_tokens":3.0},"prompt_tokens_details":{"cached_tokens":5}}}`,
	"{\"choices\":[{\"delta\":{\"content\":\"\xff\xfeok\\u0041\xc3\"}}]}", // invalid UTF-8 bytes
	// Tool calls, as vLLM, SGLang and OpenAI stream them: the first delta
	// names the function, the rest carry arguments.
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Pa"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"a","arguments":"1"}},{"index":1,"function":{"name":"b","arguments":"2"}}]}}]}`,
	`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"0","type":"function","function":{"name":"f","arguments":"{\"x\":1}","description":null}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":null,"refusal":null,"function_call":null,"content":"a"}}]}`,
	`{"choices":[{"delta":{"refusal":"I can't"}},{"message":{"refusal":"no","content":"x"}}]}`,
	`{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{}"},"tool_calls":[{"function":{"name":"g"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a"},"function":{"arguments":"b"}}],"tool_calls":[{"function":null}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":5},"function":{"name":"ok"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a","name":7}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"x":1}}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":{"function":{"name":"a"}}}}]}`,
	`{"choices":[{"delta":{"tool_calls":[null]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":"f"}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a"}},1]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{}, {"id":"x"}]}}]}`,
	`{"choices":[{"delta":{"function_call":[1]}}]}`,
	`{"choices":[{"delta":{"refusal":1}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"\u0066n\ud800","arguments":"\"q\""}}]}}]}`,
	// The index and id that tell interleaved calls apart: of a wrong type
	// they are absent, never an unreadable chunk.
	`{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"c"}},{"index":0,"function":{"arguments":"{\"d"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":"1","id":7,"function":{"name":"a"}},{"index":1.5,"id":null,"function":{"name":"b"}},{"index":-1,"function":{"name":"c"}},{"index":null,"function":{"name":"d"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":2,"index":1e0,"id":"x","id":"c\u0061ll_\ud800","function":{"name":"a"}},{"index":1000000001,"function":{"name":"b"}},{"index":{"x":1},"id":["y"],"function":{"name":"c"}}]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f"}}]}},{"message":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{}"}}],"function_call":{"name":"h"}}}]}`,
	"{\"a\":\"\x01\"}", "{\"a\":\"\x7f\"}",
	`{"choices":[{"delta":{"content":"\ud800\ud800\udc00"}}]}`,
	`{"a":[1,2,{"b":[true,false,null,-0.5e+3]}],"choices":null}`,
	`[1]`, `"str"`, `{}`, ` {} `, `{} x`, `{"a":01}`, `{"a":1.}`, `{"a":"\x01"}`, `{"a":"\q"}`, `{,}`, `{"a":1,}`, `[1,]`, ``, `{"a"}`,
	`{"choices":[{"delta":{"content":"a"}}]}` + "\n",
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

func TestDecodeChunkMatchesOracle(t *testing.T) {
	var c openAIChunk
	for _, s := range chunkSeeds {
		got, want := scanChunk(&c, []byte(s)), oracle([]byte(s))
		if got != want {
			t.Errorf("%.80q:\n got %+v\nwant %+v", s, got, want)
		}
	}
}

// TestDecodeChunkRecorded decodes every event of the recorded streams, and
// of the hand-written reasoning streams, both ways.
func TestDecodeChunkRecorded(t *testing.T) {
	var c openAIChunk
	for _, f := range []string{"ollama_v1_chat_completions_stream.sse", "ollama_v1_completions_stream.sse", "stream_openai_chat_llamacpp.sse",
		"handwritten_vllm_chat_reasoning_stream.sse", "handwritten_deepseek_chat_reasoning_content_stream.sse"} {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			got, want := scanChunk(&c, []byte(data)), oracle([]byte(data))
			if got != want || got.Err {
				t.Errorf("%s: %.80q:\n got %+v\nwant %+v", f, data, got, want)
			}
		}
	}
	// TGI's recorded tool-call stream, a JSON array of its chunks, and its
	// non-streamed answer: every chunk carries tool-call text.
	stream := strings.Split(sseOfChunkArray(t, "stream_tgi_openai_chat_tool_call_chunks.json"), "\n\n")
	for _, ev := range append(stream, "data: "+readTestdata(t, "tgi_openai_chat_tool_call.json")) {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		got, want := scanChunk(&c, []byte(data)), oracle([]byte(data))
		if got != want || got.Err || got.ToolCall == "" {
			t.Errorf("tgi: %.80q:\n got %+v\nwant %+v", data, got, want)
		}
	}
}

// FuzzDecodeChunk checks that the hand-written scanner means exactly what
// encoding/json plus the documented rules mean, on any input, and that a
// reused scanner carries nothing from one chunk to the next.
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	var prev openAIChunk
	f.Fuzz(func(t *testing.T, data []byte) {
		want := oracle(data)
		var fresh openAIChunk
		if got := scanChunk(&fresh, data); got != want {
			t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
		}
		// The same input through a scanner that has decoded other chunks.
		if got := scanChunk(&prev, data); got != want {
			t.Fatalf("reused scanner, %q:\n got %+v\nwant %+v", data, got, want)
		}
	})
}

// BenchmarkDecodeChunk compares the scanner with encoding/json on one vLLM
// content chunk.
func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-8f0b1c2d3e4f","object":"chat.completion.chunk","created":1732000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" tok7"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("scanner", func(b *testing.B) {
		var c openAIChunk
		var ch Chunk
		b.ReportAllocs()
		for b.Loop() {
			ch.Reset()
			if err := c.decode(data, &ch); err != nil || len(ch.Content) == 0 {
				b.Fatal(err)
			}
		}
	})
	// A final usage chunk of a reasoning model: the nested count is read
	// without allocating either.
	usage := []byte(`{"id":"chatcmpl-8f0b1c2d3e4f","object":"chat.completion.chunk","created":1732000000,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":64,"total_tokens":114,"completion_tokens":50,"completion_tokens_details":{"reasoning_tokens":30}}}`)
	b.Run("scanner-usage", func(b *testing.B) {
		var c openAIChunk
		var ch Chunk
		b.ReportAllocs()
		for b.Loop() {
			ch.Reset()
			if err := c.decode(usage, &ch); err != nil || ch.ReasoningTokens != 30 {
				b.Fatal(err)
			}
		}
	})
	// An argument delta of a tool call, as vLLM streams it: the tool-call
	// text is read without allocating either.
	call := []byte(`{"id":"chatcmpl-8f0b1c2d3e4f","object":"chat.completion.chunk","created":1732000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"city\""}}]},"logprobs":null,"finish_reason":null}]}`)
	b.Run("scanner-tool-call", func(b *testing.B) {
		var c openAIChunk
		var ch Chunk
		b.ReportAllocs()
		for b.Loop() {
			ch.Reset()
			if err := c.decode(call, &ch); err != nil || len(ch.ToolCall) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		type text struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		}
		var v struct {
			Choices []struct {
				Delta text    `json:"delta"`
				Text  *string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		b.ReportAllocs()
		for b.Loop() {
			v.Choices, v.Usage = v.Choices[:0], nil
			if err := json.Unmarshal(data, &v); err != nil || len(v.Choices) == 0 {
				b.Fatal(err)
			}
		}
	})
}
