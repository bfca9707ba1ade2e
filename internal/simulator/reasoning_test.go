package simulator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// startReasoning starts an instant simulator whose model reasons for n
// tokens, in field (empty: the default).
func startReasoning(t *testing.T, n int, field string, engine string) string {
	t.Helper()
	cfg := simulatortest.InstantConfig()
	cfg.ReasoningTokens, cfg.ReasoningField = n, field
	if engine != "" {
		cfg.Engine = engine
	}
	base, _ := simulatortest.StartTest(t, cfg)
	return base
}

func readAll(t *testing.T, url, body string) []byte {
	t.Helper()
	resp := postJSON(t, url, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: status %d, %v: %s", url, resp.StatusCode, err, b)
	}
	return b
}

// reasoningFrame is what one OpenAI chat chunk says, for these tests.
type reasoningFrame struct {
	role, content, reasoning *string
	other                    *string // the reasoning field that was not configured
	finish                   any
	emit                     bool
	usage                    map[string]any
}

func parseChatFrames(t *testing.T, body []byte, field string) []reasoningFrame {
	t.Helper()
	other := simulator.ReasoningFieldReasoningContent
	if field == other {
		other = simulator.ReasoningFieldReasoning
	}
	str := func(m map[string]any, k string) *string {
		if v, ok := m[k].(string); ok {
			return &v
		}
		return nil
	}
	var out []reasoningFrame
	for _, m := range frames(t, body) {
		f := reasoningFrame{}
		_, f.emit = m["sim_emit_unix_nano"].(float64)
		f.usage, _ = m["usage"].(map[string]any)
		if ch, _ := m["choices"].([]any); len(ch) == 1 {
			c := ch[0].(map[string]any)
			d := c["delta"].(map[string]any)
			f.role, f.content, f.reasoning, f.other = str(d, "role"), str(d, "content"), str(d, field), str(d, other)
			f.finish = c["finish_reason"]
		}
		out = append(out, f)
	}
	return out
}

// TestReasoningChatStream: with --sim.reasoning-tokens=N a chat stream is
// the role chunk, N chunks whose delta carries the reasoning field and no
// content, then the answer in content; usage counts both, with the
// reasoning tokens in completion_tokens_details. Every chunk is stamped.
func TestReasoningChatStream(t *testing.T) {
	for _, field := range []string{"", simulator.ReasoningFieldReasoning, simulator.ReasoningFieldReasoningContent} {
		t.Run("field="+field, func(t *testing.T) {
			base := startReasoning(t, 5, field, "")
			want := field
			if want == "" {
				want = simulator.ReasoningFieldReasoning
			}
			body := readAll(t, base+"/v1/chat/completions",
				`{"model":"sim-model","messages":[{"role":"user","content":"a b c"}],"max_tokens":8,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
			fs := parseChatFrames(t, body, want)
			if len(fs) != 10 {
				t.Fatalf("%d frames, want 10 (role, 5 reasoning, 3 content, usage):\n%s", len(fs), body)
			}
			if fs[0].role == nil || fs[0].reasoning != nil {
				t.Errorf("frame 0 is not the role chunk")
			}
			var reasoning, answer string
			for i, f := range fs {
				if !f.emit {
					t.Errorf("frame %d has no sim_emit_unix_nano", i)
				}
				if f.other != nil {
					t.Errorf("frame %d carries the other reasoning field", i)
				}
				switch {
				case i == 0 || i == 9:
				case i <= 5:
					if f.reasoning == nil || *f.reasoning == "" || f.content != nil {
						t.Errorf("frame %d: want reasoning in %q and no content", i, want)
					} else {
						reasoning += *f.reasoning
					}
				default:
					if f.content == nil || *f.content == "" || f.reasoning != nil {
						t.Errorf("frame %d: want content and no reasoning", i)
					} else {
						answer += *f.content
					}
				}
			}
			if fs[8].finish != "length" {
				t.Errorf("last content chunk's finish_reason %v, want length", fs[8].finish)
			}
			u := fs[9].usage
			details, _ := u["completion_tokens_details"].(map[string]any)
			if u["completion_tokens"] != 8.0 || details["reasoning_tokens"] != 5.0 {
				t.Errorf("usage %v, want 8 completion tokens of which 5 reasoning", u)
			}
			if n, m := simulator.CountTokens(reasoning), simulator.CountTokens(answer); n != 5 || m != 3 {
				t.Errorf("reasoning text %q is %d tokens, answer %q %d; want 5 and 3", reasoning, n, answer, m)
			}
		})
	}
}

// TestReasoningLengths: max_tokens counts reasoning and answer. Without
// ignore_eos the model stops only after answering; a max_tokens that leaves
// no room for the answer cuts the reasoning ("length", no content).
func TestReasoningLengths(t *testing.T) {
	base := startReasoning(t, 5, "", "")
	for i := range 20 {
		body := readAll(t, base+"/v1/chat/completions",
			fmt.Sprintf(`{"model":"sim-model","messages":[{"role":"user","content":"prompt %d"}],"max_tokens":12,"stream":true,"stream_options":{"include_usage":true}}`, i))
		fs := parseChatFrames(t, body, simulator.ReasoningFieldReasoning)
		u := fs[len(fs)-1].usage
		completion := int(u["completion_tokens"].(float64))
		if completion < 6 || completion > 12 {
			t.Fatalf("prompt %d: %d completion tokens, want 6..12 (5 reasoning and an answer)", i, completion)
		}
		if got := len(fs) - 2; got != completion {
			t.Errorf("prompt %d: %d token chunks, usage %d", i, got, completion)
		}
	}
	body := readAll(t, base+"/v1/chat/completions",
		`{"model":"sim-model","messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
	fs := parseChatFrames(t, body, simulator.ReasoningFieldReasoning)
	if len(fs) != 5 {
		t.Fatalf("%d frames, want 5 (role, 3 reasoning, usage)", len(fs))
	}
	for _, f := range fs[1:4] {
		if f.reasoning == nil || f.content != nil {
			t.Errorf("a token of a cut reasoning is not a reasoning chunk")
		}
	}
	details, _ := fs[4].usage["completion_tokens_details"].(map[string]any)
	if fs[3].finish != "length" || details["reasoning_tokens"] != 3.0 {
		t.Errorf("finish %v, usage %v: want length and 3 reasoning tokens", fs[3].finish, fs[4].usage)
	}
}

// TestReasoningNotStreamed: the message holds the answer in content and the
// reasoning in the configured field; /v1/completions does not reason.
func TestReasoningNotStreamed(t *testing.T) {
	base := startReasoning(t, 4, simulator.ReasoningFieldReasoningContent, "")
	var chat struct {
		Choices []struct {
			Message map[string]*string `json:"message"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	b := readAll(t, base+"/v1/chat/completions", `{"model":"sim-model","messages":[{"role":"user","content":"a"}],"max_tokens":6,"ignore_eos":true}`)
	if err := json.Unmarshal(b, &chat); err != nil {
		t.Fatal(err)
	}
	m := chat.Choices[0].Message
	if m["content"] == nil || simulator.CountTokens(*m["content"]) != 2 || m["reasoning_content"] == nil || simulator.CountTokens(*m["reasoning_content"]) != 4 {
		t.Errorf("message %s, want 2 answer and 4 reasoning tokens", b)
	}
	if d, _ := chat.Usage["completion_tokens_details"].(map[string]any); chat.Usage["completion_tokens"] != 6.0 || d["reasoning_tokens"] != 4.0 {
		t.Errorf("usage %v", chat.Usage)
	}

	b = readAll(t, base+"/v1/completions", `{"model":"sim-model","prompt":"a","max_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
	if strings.Contains(string(b), "reasoning") {
		t.Errorf("a text completion reasons:\n%s", b)
	}
}

// TestReasoningOllama: Ollama's native chat and generate stream the
// reasoning in message.thinking and thinking, beside an empty answer, then
// the answer; eval_count counts both.
func TestReasoningOllama(t *testing.T) {
	base := startReasoning(t, 3, "", simulator.EngineOllama)
	for _, tc := range []struct{ path, body string }{
		{"/api/chat", `{"model":"sim-model","messages":[{"role":"user","content":"a b"}],"options":{"num_predict":5}}`},
		{"/api/generate", `{"model":"sim-model","prompt":"a b","options":{"num_predict":5}}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			fs := frames(t, readAll(t, base+tc.path, tc.body))
			if len(fs) < 5 {
				t.Fatalf("%d lines", len(fs))
			}
			last := fs[len(fs)-1]
			n := int(last["eval_count"].(float64))
			if last["done"] != true || n < 4 || n > 5 || len(fs) != n+1 {
				t.Fatalf("%d lines, final %v: want 4..5 tokens (3 thinking and an answer) and a done line", len(fs), last)
			}
			for i, f := range fs[:n] {
				text, thinking := f, f
				if m, ok := f["message"].(map[string]any); ok {
					text, thinking = m, m
				}
				answer, _ := text["content"].(string)
				if tc.path == "/api/generate" {
					answer, _ = text["response"].(string)
				}
				th, _ := thinking["thinking"].(string)
				if _, ok := f["sim_emit_unix_nano"]; !ok {
					t.Errorf("line %d not stamped", i)
				}
				if isReasoning := i < 3; isReasoning && (th == "" || answer != "") || !isReasoning && (answer == "" || th != "") {
					t.Errorf("line %d: thinking %q, answer %q", i, th, answer)
				}
			}
		})
	}
}

func TestReasoningConfig(t *testing.T) {
	for _, mutate := range []func(*simulator.Config){
		func(c *simulator.Config) { c.ReasoningTokens = -1 },
		func(c *simulator.Config) { c.ReasoningField = "thinking" },
	} {
		cfg := simulator.DefaultConfig()
		mutate(&cfg)
		if sim, err := simulator.New(cfg, nil); err == nil {
			sim.Close()
			t.Errorf("New accepted %+v", cfg)
		}
	}
	app := kingpin.New("test", "")
	cmd := app.Command("simulate", "")
	cfg := simulator.AddFlags(cmd)
	if _, err := app.Parse([]string{"simulate", "--sim.reasoning-tokens=30", "--sim.reasoning-field=reasoning_content"}); err != nil {
		t.Fatal(err)
	}
	if cfg.ReasoningTokens != 30 || cfg.ReasoningField != simulator.ReasoningFieldReasoningContent || cfg.Validate() != nil {
		t.Errorf("parsed %d %q (%v)", cfg.ReasoningTokens, cfg.ReasoningField, cfg.Validate())
	}
	sim, err := simulator.New(simulator.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if f := sim.Config().ReasoningField; f != simulator.ReasoningFieldReasoning {
		t.Errorf("default reasoning field %q", f)
	}
}
