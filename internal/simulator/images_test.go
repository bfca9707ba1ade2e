package simulator_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// image is a distinct fake image's base64 data (the simulator does not
// decode it).
func image(i int) string { return base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("png %d", i))) }

// imageChat is a chat body whose user message is "a b c" and k image parts
// after it, as the exporter sends them.
func imageChat(model string, k int, stream bool) map[string]any {
	parts := []map[string]any{{"type": "text", "text": "a b c"}}
	for i := range k {
		parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": "data:image/png;base64," + image(i)}})
	}
	b := map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": parts}}, "max_tokens": 2, "stream": stream}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// textTokens is the known prompt length of imageChat without images:
// 3 words, 3 template tokens and the generation prompt.
const textTokens = 3 + simulator.ChatTokensPerMessage + simulator.ChatGenerationPromptTokens

// TestImagePromptTokens: each image part of a chat request is
// Config.ImageTokens prompt tokens, in usage (streamed and not), in
// /tokenize, in vllm:prompt_tokens_total and in the engine's own prompt
// length (the prefill and KV cache's); Responses' input_image parts
// likewise; 0 image tokens make images free; more than MaxPromptImages is
// a 400.
func TestImagePromptTokens(t *testing.T) {
	for _, imageTokens := range []int{simulator.DefaultImageTokens, 10, 0} {
		t.Run(fmt.Sprint(imageTokens), func(t *testing.T) {
			base, sim, client := start(t, func(c *simulator.Config) { c.ImageTokens = imageTokens })
			promptTotal := 0.0
			for _, k := range []int{0, 1, 3} {
				want := textTokens + k*imageTokens
				var out struct{ Usage usage }
				b, _ := json.Marshal(imageChat("sim-model", k, false))
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(b)))
				req.Header.Set(simulator.RequestIDHeader, fmt.Sprint("img-", k))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
					t.Fatalf("%d images: %d %s", k, resp.StatusCode, body)
				}
				if out.Usage.PromptTokens != want {
					t.Errorf("%d images: prompt_tokens %d, want %d", k, out.Usage.PromptTokens, want)
				}
				promptTotal += float64(want)
				if rec, ok := sim.PrefixRecord(fmt.Sprint("img-", k)); !ok || rec.PromptTokens != want {
					t.Errorf("%d images: the engine's prompt %d (found %v), want %d", k, rec.PromptTokens, ok, want)
				}
				res := streamRequest(t, t.Context(), client, base+"/v1/chat/completions", imageChat("sim-model", k, true), nil)
				last := res.events[len(res.events)-2] // the usage chunk, before [DONE]
				if res.status != 200 || last.Usage == nil || last.Usage.PromptTokens != want {
					t.Errorf("%d images streamed: status %d, usage %+v, want prompt_tokens %d", k, res.status, last.Usage, want)
				}
				promptTotal += float64(want)
				var tok struct{ Count int }
				tb, _ := json.Marshal(map[string]any{"messages": imageChat("", k, false)["messages"]})
				if st := getJSON(t, client, http.MethodPost, base+"/tokenize", strings.NewReader(string(tb)), &tok); st != 200 || tok.Count != want {
					t.Errorf("%d images: /tokenize %d count %d, want %d", k, st, tok.Count, want)
				}
				// Responses: input_image parts.
				in := []map[string]any{{"type": "input_text", "text": "a b c"}}
				for i := range k {
					in = append(in, map[string]any{"type": "input_image", "image_url": "data:image/png;base64," + image(i)})
				}
				rb, _ := json.Marshal(map[string]any{"model": "sim-model", "input": []map[string]any{{"role": "user", "content": in}}, "max_output_tokens": 2})
				var rout struct {
					Usage struct {
						InputTokens int `json:"input_tokens"`
					} `json:"usage"`
				}
				if st := getJSON(t, client, http.MethodPost, base+"/v1/responses", strings.NewReader(string(rb)), &rout); st != 200 || rout.Usage.InputTokens != want {
					t.Errorf("%d images: /v1/responses %d input_tokens %d, want %d", k, st, rout.Usage.InputTokens, want)
				}
				promptTotal += float64(want)
			}
			if got := scrape(t, client, base)["vllm:prompt_tokens_total"]; got != promptTotal {
				t.Errorf("vllm:prompt_tokens_total %v, want %v", got, promptTotal)
			}
		})
	}

	base, _, client := start(t, nil)
	b, _ := json.Marshal(imageChat("sim-model", simulator.MaxPromptImages+1, false))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if st := getJSON(t, client, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(b)), &e); st != 400 || !strings.Contains(e.Error.Message, "At most 64 image(s)") {
		t.Errorf("%d images: %d %q, want a 400", simulator.MaxPromptImages+1, st, e.Error.Message)
	}
	// Images that cannot fit the context are refused as a long prompt is.
	b, _ = json.Marshal(imageChat("sim-model", 60, false)) // 60 x 576 tokens > 32768
	if st := getJSON(t, client, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(b)), &e); st != 400 || !strings.Contains(e.Error.Message, "maximum context length is 32768 tokens") {
		t.Errorf("60 images: %d %q, want the context-length 400", st, e.Error.Message)
	}
	// An image part without a URL is a 400.
	body := `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`
	if st := getJSON(t, client, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body), nil); st != 400 {
		t.Errorf("an image without a url: %d, want 400", st)
	}
}

// TestImagePrefillAndCache: an image's tokens are prefilled as any prompt
// tokens are (the prefill step takes at least their time), and a repeated
// image is a prefix-cache hit while another image is not, as vLLM keys
// its cache by image content.
func TestImagePrefillAndCache(t *testing.T) {
	base, sim, client := start(t, func(c *simulator.Config) {
		c.TimeScale = 1
		c.DecodeStep = 0
		c.DecodePerSeq = 0
		c.PrefillTokensPerSecond = 20000
	})
	send := func(id string, images ...int) simulator.PrefixRecord {
		parts := []map[string]any{{"type": "text", "text": "a b c"}}
		for _, i := range images {
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": "data:image/png;base64," + image(i)}})
		}
		b, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": parts}}, "max_tokens": 1})
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(string(b)))
		req.Header.Set(simulator.RequestIDHeader, id)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rec, ok := sim.PrefixRecord(id)
		if resp.StatusCode != 200 || !ok {
			t.Fatalf("%s: status %d, record %v", id, resp.StatusCode, ok)
		}
		return rec
	}
	first := send("first", 0, 1)
	prompt := textTokens + 2*simulator.DefaultImageTokens
	if first.PromptTokens != prompt || first.HitTokens != 0 {
		t.Fatalf("first: %d prompt tokens, %d hit; want %d and 0", first.PromptTokens, first.HitTokens, prompt)
	}
	if d, min := first.FirstToken.Sub(first.Scheduled), time.Duration(prompt)*time.Second/20000; d < min {
		t.Errorf("prefill of %d tokens took %v, want at least %v", prompt, d, min)
	}
	// The same images: every full block but the last token's.
	if again := send("again", 0, 1); again.HitTokens != (prompt-1)/16*16 {
		t.Errorf("the same images hit %d tokens, want %d", again.HitTokens, (prompt-1)/16*16)
	}
	// Another second image: the whole blocks of what the prompts share,
	// <|im_start|> <|user|> a b c and the first image, and nothing of the
	// second image.
	other := send("other", 0, 2)
	if want := (5 + simulator.DefaultImageTokens) / 16 * 16; other.HitTokens != want {
		t.Errorf("another image hit %d tokens, want the shared blocks' %d", other.HitTokens, want)
	}
}

// TestOllamaImages: Ollama's base64 images, a chat message's and
// /api/generate's, are Config.ImageTokens prompt tokens each in the done
// line's prompt_eval_count.
func TestOllamaImages(t *testing.T) {
	base, _, _ := start(t, func(c *simulator.Config) { c.Engine = simulator.EngineOllama })
	for _, tc := range []struct {
		path string
		body func(images []string) map[string]any
		text int
	}{
		{"/api/chat", func(images []string) map[string]any {
			return map[string]any{"model": "sim-model", "messages": []map[string]any{{"role": "user", "content": "a b c", "images": images}}, "options": map[string]any{"num_predict": 2}}
		}, textTokens},
		{"/api/generate", func(images []string) map[string]any {
			return map[string]any{"model": "sim-model", "prompt": "a b c", "images": images, "options": map[string]any{"num_predict": 2}}
		}, 3},
	} {
		for _, k := range []int{0, 2} {
			var images []string
			for i := range k {
				images = append(images, image(i))
			}
			b, _ := json.Marshal(tc.body(images))
			resp := postJSON(t, base+tc.path, string(b))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fs := frames(t, body)
			if resp.StatusCode != 200 || len(fs) == 0 {
				t.Fatalf("%s with %d images: %d %s", tc.path, k, resp.StatusCode, body)
			}
			want := tc.text + k*simulator.DefaultImageTokens
			if got := fs[len(fs)-1]["prompt_eval_count"]; got != float64(want) {
				t.Errorf("%s with %d images: prompt_eval_count %v, want %d", tc.path, k, got, want)
			}
		}
	}
}
