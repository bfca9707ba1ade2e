package replay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// onePixelPNG is a 1×1 PNG, base64: the smallest image a recorded body
// carries as an image_url part.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// TestReplayBodiesWithToolsAndImages: recorded chat bodies that carry
// tools and image parts (which a replay sends as they were: the kinds a
// synthetic workload adds are refused for replay:, the body has its own)
// are measured like any other row: each succeeds with a first token, its
// forced output length, its usage's prompt length, and the tools body's
// answer, a call (its name, then its arguments, one token each), is
// counted as output tokens and tool-call events. Rows are told apart by
// their max_tokens (forced from output_tokens), not by arrival order.
func TestReplayBodiesWithToolsAndImages(t *testing.T) {
	sim := simulatortest.InstantConfig()
	sim.ImageTokens = 100 // the simulated vision encoder's tokens an image
	url, _ := simulatortest.StartTest(t, sim)
	const toolsOut, imageOut, textOut = 9, 7, 5
	tools := `{"model":"sim-model","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"user","content":"What is the weather in Paris? Answer by calling one of the functions offered."}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city","days"]}}}],` +
		`"tool_choice":"required"}`
	// The same question with two images and without: the simulator counts
	// each image as ImageTokens prompt tokens beside the text's.
	image := `{"model":"sim-model","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"Describe the images."},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + onePixelPNG + `"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + onePixelPNG + `"}}]}]}`
	text := `{"model":"sim-model","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"Describe the images."}]}]}`
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	lines := fmt.Sprintf(`{"offset":0,"path":"/v1/chat/completions","body":%s,"output_tokens":%d}
{"offset":0.05,"path":"/v1/chat/completions","body":%s,"output_tokens":%d}
{"offset":0.1,"path":"/v1/chat/completions","body":%s,"output_tokens":%d}
`, tools, toolsOut, image, imageOut, text, textOut)
	if err := os.WriteFile(trace, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	// max_rate 10000: a token bucket that holds every row a busy machine
	// makes overdue at once; this test is about what is measured, not when.
	obs, reg := run(t, fmt.Sprintf(`
targets:
  - {name: sim, url: %q, model: sim-model, flavor: openai-chat, timeout: 60s}
workloads:
  - name: r
    target: sim
    replay: {source: jsonl, path: %q, force_output_tokens: true, max_rate: 10000}
`, url, trace))
	if len(obs) != 3 {
		t.Fatalf("%d observations, want 3", len(obs))
	}
	byOut := map[int]observation.Request{}
	for _, o := range obs {
		if o.Outcome != observation.Success {
			t.Fatalf("a row ended %s (HTTP %d): %v", o.Outcome, o.HTTPStatus, o.Err)
		}
		byOut[o.OutputTokens] = o
	}
	for _, n := range []int{toolsOut, imageOut, textOut} {
		o, ok := byOut[n]
		if !ok {
			t.Fatalf("no row with %d output tokens: %+v", n, byOut)
		}
		if ttft, ok := o.TTFT(); !ok || ttft <= 0 {
			t.Errorf("%d-token row: TTFT %v, %v", n, ttft, ok)
		}
		if _, ok := o.TPOT(); !ok {
			t.Errorf("%d-token row: no TPOT", n)
		}
		if o.PromptTokens <= 0 || o.TokenSource != observation.TokensFromUsage {
			t.Errorf("%d-token row: prompt tokens %d from %v, want the usage's", n, o.PromptTokens, o.TokenSource)
		}
		// A replay's kinds are the body's: nothing is judged.
		if o.ToolCallCheck != "" || o.StructuredCheck != "" {
			t.Errorf("%d-token row judged: %q %q", n, o.ToolCallCheck, o.StructuredCheck)
		}
	}
	if o := byOut[toolsOut]; o.ToolCallEvents != toolsOut || o.ContentEvents != toolsOut {
		t.Errorf("tools row: %d tool-call events of %d content events, want every one of its %d tokens a call's", o.ToolCallEvents, o.ContentEvents, toolsOut)
	}
	if o := byOut[imageOut]; o.ToolCallEvents != 0 || o.ContentEvents != imageOut {
		t.Errorf("image row: %d tool-call events, %d content events, want 0 and %d", o.ToolCallEvents, o.ContentEvents, imageOut)
	}
	if img, txt := byOut[imageOut].PromptTokens, byOut[textOut].PromptTokens; img != txt+2*sim.ImageTokens {
		t.Errorf("prompt tokens with two images %d, without %d: want %d more, the images' tokens", img, txt, 2*sim.ImageTokens)
	}
	if v, _ := metric(t, reg, "infer_probe_completion_tokens_total"); v != toolsOut+imageOut+textOut {
		t.Errorf("infer_probe_completion_tokens_total = %v, want %d", v, toolsOut+imageOut+textOut)
	}
	if _, n := metric(t, reg, "infer_probe_time_to_first_token_seconds"); n != 3 {
		t.Errorf("%d TTFT observations, want 3", n)
	}
	if v, _ := metric(t, reg, "infer_probe_replay_requests_total"); v != 3 {
		t.Errorf("infer_probe_replay_requests_total = %v, want 3", v)
	}
}
