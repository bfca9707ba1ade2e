package client

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestReasoningFieldsOfStreams reads recorded streams (testdata/SOURCES.md),
// which come from models that do not reason, and hand-written streams in the
// shapes reasoning servers send (named handwritten_*: no recording of a
// reasoning stream was available), and checks the reasoning figures: the
// first answer event, the reasoning-only events, and the server's
// reasoning-token count. Frame k of a body written at once is read at tick
// 1+k.
func TestReasoningFieldsOfStreams(t *testing.T) {
	cases := []struct {
		file, contentType string
		flavor            Flavor
		// Ticks of the first token and of the first answer event (0: none).
		first, answer int
		// Content events that carried reasoning only, and the others.
		reasoningEvents, answerEvents int
		reasoningTokens, output       int
		text                          string
	}{
		// Recorded, no reasoning: the first answer is the first token.
		{file: "ollama_v1_chat_completions_stream.sse", contentType: "text/event-stream", flavor: OpenAIChat,
			first: 2, answer: 2, answerEvents: 6, output: 8, text: "qqqqqq"},
		{file: "ollama_v1_completions_stream.sse", contentType: "text/event-stream", flavor: OpenAICompletions,
			first: 2, answer: 2, answerEvents: 6, output: 8, text: "qqqqqq"},
		// Its author elided the chunks between (SOURCES.md): the usage
		// of 50 cannot be true of the one event kept, so it is counted.
		{file: "stream_openai_chat_llamacpp.sse", contentType: "text/event-stream", flavor: OpenAIChat,
			first: 3, answer: 3, answerEvents: 1, output: 1, text: " climb"},
		{file: "ollama_api_generate_stream.ndjson", contentType: "application/x-ndjson", flavor: OllamaGenerate,
			first: 2, answer: 2, answerEvents: 4, output: 8, text: `q"qq`},
		{file: "ollama_api_chat_stream.ndjson", contentType: "application/x-ndjson", flavor: OllamaChat,
			first: 2, answer: 2, answerEvents: 6, output: 8, text: "qqqqqq"},
		{file: "stream_ollama_generate.ndjson", contentType: "application/x-ndjson", flavor: OllamaGenerate,
			first: 2, answer: 2, answerEvents: 24, output: 25,
			text: "A rabbit is a small, furry animal with long ears and a short tail, often associated with agility and quick movements."},
		{file: "ollama_v1_chat_completions.json", contentType: "application/json", flavor: OpenAIChat,
			first: 2, answer: 2, answerEvents: 1, output: 8, text: "qqqqqq"},

		// Hand-written. vLLM >= 0.11 (delta.reasoning): a role chunk (frame
		// 1), 7 reasoning deltas (frames 2-8), then 8 content deltas; usage
		// without a reasoning count.
		{file: "handwritten_vllm_chat_reasoning_stream.sse", contentType: "text/event-stream", flavor: OpenAIChat,
			first: 3, answer: 10, reasoningEvents: 7, answerEvents: 8, output: 18, text: "\n\nHello! How can I help?"},
		// DeepSeek's API shape (delta.reasoning_content beside a null
		// content; usage completion_tokens_details.reasoning_tokens): the
		// role chunk's empty reasoning_content is no event.
		{file: "handwritten_deepseek_chat_reasoning_content_stream.sse", contentType: "text/event-stream", flavor: OpenAIChat,
			first: 3, answer: 9, reasoningEvents: 6, answerEvents: 5, reasoningTokens: 6, output: 11, text: "2+2=4"},
		// Ollama /api/chat with "think": 7 message.thinking lines, then 7
		// message.content lines; eval_count counts both, Ollama reports no
		// reasoning count.
		{file: "handwritten_ollama_api_chat_thinking_stream.ndjson", contentType: "application/x-ndjson", flavor: OllamaChat,
			first: 2, answer: 9, reasoningEvents: 7, answerEvents: 7, output: 16, text: "Hello! How can I help?"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(serveBody(tc.contentType, string(body)))
			defer srv.Close()
			c := New(Options{Now: (&fakeClock{}).Now})
			defer c.Close()
			obs := observation.Request{Scheduled: t0}
			c.Do(context.Background(), &Target{BaseURL: srv.URL, Flavor: tc.flavor, Model: "m"}, &Request{Prompt: "hi", KeepText: true}, &obs)
			if obs.Outcome != observation.Success {
				t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
			}
			if obs.FirstToken != tick(tc.first) {
				t.Errorf("first token at %v, want tick %d", obs.FirstToken.Sub(t0), tc.first)
			}
			if obs.FirstAnswer != tick(tc.answer) {
				t.Errorf("first answer at %v, want tick %d", obs.FirstAnswer.Sub(t0), tc.answer)
			}
			if d, ok := obs.TTFA(); !ok || d != tick(tc.answer).Sub(t0) {
				t.Errorf("TTFA = %v %v", d, ok)
			}
			if obs.ReasoningEvents != tc.reasoningEvents || obs.ContentEvents-obs.ReasoningEvents != tc.answerEvents {
				t.Errorf("%d reasoning and %d answer events, want %d and %d",
					obs.ReasoningEvents, obs.ContentEvents-obs.ReasoningEvents, tc.reasoningEvents, tc.answerEvents)
			}
			if obs.ReasoningTokens != tc.reasoningTokens || obs.OutputTokens != tc.output {
				t.Errorf("%d reasoning tokens of %d, want %d of %d", obs.ReasoningTokens, obs.OutputTokens, tc.reasoningTokens, tc.output)
			}
			if obs.LastReasoning {
				t.Error("LastReasoning set after an answer")
			}
			if obs.Text != tc.text {
				t.Errorf("text %q, want %q (reasoning is not answer text)", obs.Text, tc.text)
			}
		})
	}
}

// liveEvents records what an observer can read at each content event.
type liveEvents struct {
	last      []bool
	reasoning []int
	answered  []bool
}

func (*liveEvents) Sent(*observation.Request) {}

func (e *liveEvents) Content(o *observation.Request) {
	e.last = append(e.last, o.LastReasoning)
	e.reasoning = append(e.reasoning, o.ReasoningEvents)
	e.answered = append(e.answered, !o.FirstAnswer.IsZero() && !o.FirstAnswer.After(o.TokenTimes[len(o.TokenTimes)-1]))
}

// TestReasoningFieldsAreLive: an observer hearing each content event reads
// that event's kind in LastReasoning, and the running counts, at once.
func TestReasoningFieldsAreLive(t *testing.T) {
	body := chatDelta(`{"role":"assistant","content":""}`) + chatDelta(`{"reasoning":"a"}`) + chatDelta(`{"reasoning_content":"b"}`) +
		chatContent("c") + chatDelta(`{"reasoning":"d"}`) + chatDelta(`{"reasoning":"e","content":"f"}`) + done
	srv := httptest.NewServer(serveBody("text/event-stream", body))
	defer srv.Close()
	c := New(Options{})
	defer c.Close()
	ev := &liveEvents{}
	var obs observation.Request
	c.Do(context.Background(), &Target{BaseURL: srv.URL}, &Request{Prompt: "hi", Events: ev}, &obs)
	if obs.Outcome != observation.Success {
		t.Fatalf("outcome %s: %v", obs.Outcome, obs.Err)
	}
	wantLast := []bool{true, true, false, true, false}
	wantReasoning := []int{1, 2, 2, 3, 3}
	wantAnswered := []bool{false, false, true, true, true}
	for i := range wantLast {
		if i >= len(ev.last) || ev.last[i] != wantLast[i] || ev.reasoning[i] != wantReasoning[i] || ev.answered[i] != wantAnswered[i] {
			t.Fatalf("live: last %v reasoning %v answered %v, want %v %v %v", ev.last, ev.reasoning, ev.answered, wantLast, wantReasoning, wantAnswered)
		}
	}
	if obs.FirstAnswer != obs.TokenTimes[2] || obs.ReasoningEvents != 3 || obs.LastReasoning {
		t.Errorf("final: first answer %v (event 3 at %v), %d reasoning events, last reasoning %v",
			obs.FirstAnswer, obs.TokenTimes[2], obs.ReasoningEvents, obs.LastReasoning)
	}
}
