package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// usageWithReasoning is a final usage chunk that counts reasoning tokens
// among the completion's (completion_tokens_details.reasoning_tokens).
func usageWithReasoning(prompt, completion, reasoning int) string {
	return data(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"completion_tokens_details":{"reasoning_tokens":%d}}}`,
		prompt, prompt+completion, completion, reasoning))
}

// TestUsageNotBelieved: a server's usage count of output tokens is taken
// only when it can be true of the request and of what was streamed
// (UsageBelievable); otherwise the content events are counted, the
// request says so (UsageNotBelieved), and its TPOT is the events' own, not
// 0. The server claims 1e9 tokens for 4 streamed ones.
//
// A request is credited with the max_tokens it asked for at most: a usage
// count above it is not believed however many events came, and more
// events than it (a server that ignored it) count as max_tokens. A
// recorded body's own cap is the one (its max_completion_tokens,
// max_tokens or max_output_tokens), not MaxTokens, which a replay sets to
// the trace's observed length and does not send.
func TestUsageNotBelieved(t *testing.T) {
	four := chatContent("one") + chatContent(" two") + chatContent(" three") + chatContent(" four")
	events := func(n int) string { return strings.Repeat(chatContent(" w"), n) }
	for _, tc := range []struct {
		name      string
		maxTokens int
		raw       string // a recorded body (RawBody), or none
		body      string
		output    int
		reasoning int
		source    observation.TokenSource
		lied      bool
	}{
		{"1e9 for 4 streamed, max_tokens 16", 16, "", four + usageChunk(5, 1e9) + done, 4, 0, observation.TokensFromEvents, true},
		{"1e9 for 4 streamed, no max_tokens", 0, "", four + usageChunk(5, 1e9) + done, 4, 0, observation.TokensFromEvents, true},
		{"17 of max_tokens 16", 16, "", four + usageChunk(5, 17) + done, 4, 0, observation.TokensFromEvents, true},
		{"16 of max_tokens 16, 4 a chunk", 16, "", four + usageChunk(5, 16) + done, 16, 0, observation.TokensFromUsage, false},
		// 4 events of 18 bytes: a token a byte and the slack for the
		// end marker, the bound, believed; one more is not.
		{"34 for 4 events of 18 bytes", 0, "", four + usageChunk(5, 34) + done, 34, 0, observation.TokensFromUsage, false},
		{"35 for 4 events of 18 bytes", 0, "", four + usageChunk(5, 35) + done, 4, 0, observation.TokensFromEvents, true},
		// A chunk of many tokens (a server's stream interval): a token
		// is at least a byte of its text.
		{"100 in one chunk of 200 bytes", 128, "", chatContent(strings.Repeat("ab", 100)) + usageChunk(5, 100) + done, 100, 0, observation.TokensFromUsage, false},
		// Reasoning the server hid (counted, not streamed) is allowed
		// on top; more reasoning than output is not believed.
		{"hidden reasoning", 1024, "", four + usageWithReasoning(5, 500, 480) + done, 500, 480, observation.TokensFromUsage, false},
		{"reasoning above output", 64, "", four + usageWithReasoning(5, 8, 9) + done, 4, 0, observation.TokensFromEvents, true},
		// Above max_tokens, though the events could carry it.
		{"20 of max_tokens 16, 16 streamed", 16, "", events(16) + usageChunk(5, 20) + done, 16, 0, observation.TokensFromEvents, true},
		{"20 of max_tokens 16, 20 streamed", 16, "", events(20) + usageChunk(5, 20) + done, 16, 0, observation.TokensFromEvents, true},
		{"20 streamed of max_tokens 16, no usage", 16, "", events(20) + done, 16, 0, observation.TokensFromEvents, false},
		{"20 streamed, no max_tokens, no usage", 0, "", events(20) + done, 20, 0, observation.TokensFromEvents, false},
		{"recorded max_tokens 16: 20 of 16 streamed", 0, `{"messages":[{"role":"user","content":"p"}],"max_tokens":16}`,
			events(16) + usageChunk(5, 20) + done, 16, 0, observation.TokensFromEvents, true},
		{"recorded max_completion_tokens 8, MaxTokens the trace's 4", 4, `{"messages":[{"role":"user","content":"p"}],"max_tokens":2,"max_completion_tokens":8}`,
			events(8) + usageChunk(5, 8) + done, 8, 0, observation.TokensFromUsage, false},
		{"recorded body without a cap: 1e9 for 4", 0, `{"messages":[{"role":"user","content":"p"}]}`,
			four + usageChunk(5, 1e9) + done, 4, 0, observation.TokensFromEvents, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(streamHandler(tc.body))
			defer srv.Close()
			c := New(Options{Now: (&fakeClock{}).Now})
			defer c.Close()
			obs := observation.Request{Scheduled: t0}
			r := &Request{Prompt: "p", MaxTokens: tc.maxTokens}
			if tc.raw != "" {
				r.RawBody = []byte(tc.raw)
			}
			c.Do(context.Background(), &Target{BaseURL: srv.URL}, r, &obs)
			if obs.Outcome != observation.Success {
				t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
			}
			if obs.OutputTokens != tc.output || obs.ReasoningTokens != tc.reasoning || obs.TokenSource != tc.source || obs.UsageNotBelieved != tc.lied {
				t.Errorf("output %d (%d reasoning) from %s, not believed %v; want %d (%d) from %s, %v",
					obs.OutputTokens, obs.ReasoningTokens, obs.TokenSource, obs.UsageNotBelieved, tc.output, tc.reasoning, tc.source, tc.lied)
			}
			if limit := r.sentMaxTokens(); limit > 0 && obs.OutputTokens > limit {
				t.Errorf("output %d above max_tokens %d", obs.OutputTokens, limit)
			}
			// The fake clock ticks a millisecond a read: TPOT is the
			// events' (end - first) / (output - 1), never 0.
			if d, ok := obs.TPOT(); obs.ContentEvents > 1 && (!ok || d <= 0) {
				t.Errorf("TPOT %v %v, want a positive one", d, ok)
			}
		})
	}
}

// TestUsageBelievable is the bound on counts alone.
func TestUsageBelievable(t *testing.T) {
	for _, tc := range []struct {
		usage, maxTokens, events, bytes int
		want                            bool
	}{
		{4, 16, 4, 10, true},
		{16, 16, 4, 10, true},
		{17, 16, 4, 10, false},
		{32, 0, 4, 10, true}, // 4 × 4 + 16
		{33, 0, 4, 10, false},
		{1e9, 0, 4, 10, false},
		{216, 0, 1, 200, true}, // 200 bytes + 16
		{217, 0, 1, 200, false},
		{16, 0, 0, 0, true}, // nothing streamed: the slack
		{17, 0, 0, 0, false},
	} {
		if got := UsageBelievable(tc.usage, tc.maxTokens, tc.events, tc.bytes); got != tc.want {
			t.Errorf("UsageBelievable(%d, max %d, %d events, %d bytes) = %v, want %v", tc.usage, tc.maxTokens, tc.events, tc.bytes, got, tc.want)
		}
	}
}
