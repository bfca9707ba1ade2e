package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// stepClock advances by step at every reading: frame k of a body written at
// once is read at t0 + (1+k) × step, the send at t0 + step.
type stepClock struct {
	mu   sync.Mutex
	step time.Duration
	n    int
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return t0.Add(time.Duration(c.n) * c.step)
}

// doStepped sends one request of flavor to a server answering body, read
// on a clock of 20 ms a frame.
func doStepped(t *testing.T, flavor Flavor, body string) observation.Request {
	t.Helper()
	srv := httptest.NewServer(serveBody("text/event-stream", body))
	defer srv.Close()
	c := New(Options{Now: (&stepClock{step: 20 * time.Millisecond}).Now})
	defer c.Close()
	obs := observation.Request{Scheduled: t0}
	c.Do(context.Background(), &Target{BaseURL: srv.URL, Flavor: flavor, Model: "m"}, &Request{Prompt: "hi", KeepText: true}, &obs)
	if obs.Outcome != observation.Success {
		t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
	}
	return obs
}

// TestHiddenReasoningTPOT: OpenAI's reasoning models stream only their
// answer, while the usage counts the reasoning too. Hand-written in the
// APIs' shapes: 20 visible deltas 20 ms apart after hidden reasoning,
// usage 220 output tokens of which 200 reasoning; on chat
// (completion_tokens_details.reasoning_tokens) and on the Responses API (a
// reasoning output item without summary deltas,
// output_tokens_details.reasoning_tokens). TPOT is the visible pace, 20
// ms, where dividing the visible stream by all 219 tokens after the first
// gave 2.0 ms (chat) and 1.8 ms (Responses); the hidden reasoning is reported apart, and the first
// visible token is both TTFT and TTFA.
func TestHiddenReasoningTPOT(t *testing.T) {
	var chat, resp strings.Builder
	chat.WriteString(roleChunk)
	resp.WriteString(respEvent("response.created", `"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}`))
	// Three frames without a token before the answer in each: the
	// response created, and the reasoning item opened and closed; the
	// role chunk and two empty deltas.
	resp.WriteString(respEvent("response.output_item.added", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`))
	resp.WriteString(respEvent("response.output_item.done", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`))
	chat.WriteString(chatDelta(`{"content":""}`) + chatDelta(`{"content":null}`))
	for i := range 20 {
		w := fmt.Sprintf(" w%d", i)
		chat.WriteString(chatContent(w))
		resp.WriteString(respDelta("response.output_text.delta", w))
	}
	chat.WriteString(finishChunk)
	chat.WriteString(data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":220,"total_tokens":229,"completion_tokens_details":{"reasoning_tokens":200}}}`))
	chat.WriteString(done)
	resp.WriteString(respEnd("response.completed", 9, 220, 200))

	for _, tc := range []struct {
		name   string
		flavor Flavor
		body   string
	}{
		{"openai-chat", OpenAIChat, chat.String()},
		{"openai-responses", OpenAIResponses, resp.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := doStepped(t, tc.flavor, tc.body)
			if obs.ContentEvents != 20 || obs.ReasoningEvents != 0 || obs.OutputTokens != 220 || obs.ReasoningTokens != 200 ||
				obs.TokenSource != observation.TokensFromUsage {
				t.Fatalf("%d events (%d reasoning), %d output tokens (%d reasoning) from %s; want 20 (0), 220 (200) from usage",
					obs.ContentEvents, obs.ReasoningEvents, obs.OutputTokens, obs.ReasoningTokens, obs.TokenSource)
			}
			if d, ok := obs.TPOT(); !ok || d != 20*time.Millisecond {
				t.Errorf("TPOT %v %v, want the visible pace of 20ms", d, ok)
			}
			if got := obs.HiddenReasoning(); got != 200 {
				t.Errorf("hidden reasoning %d tokens, want 200", got)
			}
			if got := obs.Reasoning(); got != 200 {
				t.Errorf("reasoning %d tokens, want 200", got)
			}
			// The send at 20 ms, three frames without a token: the
			// first visible token is read at 100 ms.
			ttft, _ := obs.TTFT()
			if ttfa, ok := obs.TTFA(); !ok || ttfa != 100*time.Millisecond || ttft != ttfa {
				t.Errorf("TTFA %v %v, TTFT %v; want both the first visible token's 100ms", ttfa, ok, ttft)
			}
		})
	}
}

// TestToolCallSameThroughChatAndResponses: the same answer, a call of
// get_weather whose arguments come in three pieces, through chat (the name
// in a tool_calls delta of its own, as OpenAI and vLLM stream it) and
// through the Responses API (the name in response.output_item.added, then
// the argument deltas), each after one frame without a token. Both have
// their first answer at the name, the same tool-call events and tokens
// and the same kept call. Before, the Responses name was no token: its
// TTFA came one frame (a token's gap) later and it had one event fewer.
func TestToolCallSameThroughChatAndResponses(t *testing.T) {
	pieces := []string{`{"city":`, `"Par`, `is"}`}
	chat := roleChunk + toolDelta(`{"name":"get_weather","arguments":""}`)
	resp := respEvent("response.created", `"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}`) +
		respEvent("response.output_item.added", `"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"","status":"in_progress"}`)
	for _, p := range pieces {
		chat += toolDelta(`{"arguments":` + quote(p) + `}`)
		resp += respDelta("response.function_call_arguments.delta", p)
	}
	chat += usageChunk(20, 7) + done
	resp += respEnd("response.completed", 20, 7, 0)

	c := doStepped(t, OpenAIChat, chat)
	r := doStepped(t, OpenAIResponses, resp)
	ct, _ := c.TTFA()
	rt, _ := r.TTFA()
	// The send at 20 ms, one frame without a token at 40: the name at 60.
	if ct != 60*time.Millisecond || rt != ct {
		t.Errorf("TTFA: chat %v, responses %v; want both the name's 60ms", ct, rt)
	}
	if c.ContentEvents != 4 || r.ContentEvents != c.ContentEvents || r.ToolCallEvents != c.ToolCallEvents || r.OutputTokens != c.OutputTokens {
		t.Errorf("chat: %d events (%d tool calls), %d tokens; responses: %d (%d), %d; want 4 tool-call events each",
			c.ContentEvents, c.ToolCallEvents, c.OutputTokens, r.ContentEvents, r.ToolCallEvents, r.OutputTokens)
	}
	if want := `get_weather{"city":"Paris"}`; c.ToolCalls != want || r.ToolCalls != want {
		t.Errorf("kept calls: chat %q, responses %q; want %q", c.ToolCalls, r.ToolCalls, want)
	}
	var cg, rg []time.Duration
	c.ITLs(func(d time.Duration) { cg = append(cg, d) })
	r.ITLs(func(d time.Duration) { rg = append(rg, d) })
	if fmt.Sprint(cg) != fmt.Sprint(rg) {
		t.Errorf("ITLs: chat %v, responses %v", cg, rg)
	}
}
