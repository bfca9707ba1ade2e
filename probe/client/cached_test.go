package client

import (
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestCachedTokensParse: the prompt tokens the server's prefix cache
// served are read from each API's member, and an unreadable count is
// absent without costing the frame its tokens or usage.
func TestCachedTokensParse(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		responses  bool
		cached     int
		usage      bool
	}{
		{"vLLM chat usage", `{"choices":[],"usage":{"prompt_tokens":1024,"total_tokens":1032,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":1008}}}`, false, 1008, true},
		{"OpenAI usage with audio", `{"usage":{"prompt_tokens":2006,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0}}}`, false, 1920, true},
		{"absent", `{"usage":{"prompt_tokens":7,"completion_tokens":1}}`, false, 0, true},
		{"details null (vLLM's default)", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":null}}`, false, 0, true},
		{"count null", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":null}}}`, false, 0, true},
		{"count a string", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":"4"}}}`, false, 0, true},
		{"count negative", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":-1}}}`, false, 0, true},
		{"count too large", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":1e12}}}`, false, 0, true},
		{"count fractional", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":1.5}}}`, false, 0, true},
		{"details an array", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":[3]}}`, false, 0, true},
		{"later key wins", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":3},"prompt_tokens_details":{"cached_tokens":5}}}`, false, 5, true},
		{"Responses member name not read in chat", `{"usage":{"prompt_tokens":7,"completion_tokens":1,"input_tokens_details":{"cached_tokens":5}}}`, false, 0, true},
		{"Responses completed", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":64,"input_tokens_details":{"cached_tokens":48},"output_tokens":4,"total_tokens":68}}}`, true, 48, true},
		{"Responses details null", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":64,"input_tokens_details":null,"output_tokens":4}}}`, true, 0, true},
		{"Responses count a string", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":64,"input_tokens_details":{"cached_tokens":"48"},"output_tokens":4}}}`, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ch Chunk
			var err error
			if tc.responses {
				var r responsesChunk
				err = r.decodeEvent([]byte(tc.data), "response.completed", &ch)
			} else {
				var c openAIChunk
				err = c.decode([]byte(tc.data), &ch)
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if ch.CachedTokens != tc.cached || ch.HasUsage != tc.usage {
				t.Errorf("cached %d usage %v, want %d %v", ch.CachedTokens, ch.HasUsage, tc.cached, tc.usage)
			}
		})
	}
}

// TestSGLangCachedTokens: SGLang's meta_info.cached_tokens is read, and
// one of another type is absent.
func TestSGLangCachedTokens(t *testing.T) {
	for _, tc := range []struct {
		data   string
		cached int
	}{
		{`{"text":"a","meta_info":{"prompt_tokens":64,"completion_tokens":1,"cached_tokens":48}}`, 48},
		{`{"text":"a","meta_info":{"prompt_tokens":64,"completion_tokens":1,"cached_tokens":null}}`, 0},
		{`{"text":"a","meta_info":{"prompt_tokens":64,"completion_tokens":1,"cached_tokens":"48"}}`, 0},
		{`{"text":"a","meta_info":{"prompt_tokens":64,"completion_tokens":1}}`, 0},
	} {
		var p sglangParser
		var ch Chunk
		if err := p.parse([]byte(tc.data), &ch); err != nil {
			t.Fatalf("%s: %v", tc.data, err)
		}
		if ch.CachedTokens != tc.cached || !ch.HasUsage || ch.PromptTokens != 64 {
			t.Errorf("%s: cached %d usage %v prompt %d, want %d", tc.data, ch.CachedTokens, ch.HasUsage, ch.PromptTokens, tc.cached)
		}
	}
}

// TestCachedTokensObserved: a request's observation carries the cached
// count of its usage, and none when the count is above the prompt's.
func TestCachedTokensObserved(t *testing.T) {
	for _, tc := range []struct {
		prompt, cached, want int
	}{{1024, 1008, 1008}, {1024, 0, 0}, {16, 32, 0}, {0, 16, 0}} {
		s := &stream{r: &Request{}, usagePrompt: tc.prompt, usageCached: tc.cached, obs: &observation.Request{}}
		s.count()
		if s.obs.CachedTokens != tc.want {
			t.Errorf("prompt %d cached %d: observed %d, want %d", tc.prompt, tc.cached, s.obs.CachedTokens, tc.want)
		}
	}
}
