package live

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// The Responses API tests send openai-responses requests, whose answer is
// typed events: a text answer's output_text deltas, a reasoning model's
// reasoning_text deltas, a tool call's function_call_arguments deltas,
// each one token, and the usage in response.completed.

// sendResponses sends n Responses requests, one at a time, through the
// series; tools, when set, offers a function so that the answer calls it.
func sendResponses(t *testing.T, target *client.Target, s *Series, n, maxTokens int, tools bool) []observation.Request {
	t.Helper()
	cl := client.New(client.Options{})
	defer cl.Close()
	out := make([]observation.Request, n)
	for i := range out {
		o := &out[i]
		o.Scheduled = time.Now()
		req := &client.Request{Prompt: fmt.Sprint("weather ", i), MaxTokens: maxTokens, IgnoreEOS: true, Timeout: time.Minute, Events: seriesEvents{s}}
		if tools {
			req.Extra = map[string]any{"tools": []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}}
		}
		cl.Do(t.Context(), target, req, o)
		s.Done(o)
	}
	return out
}

// TestResponsesStreamsCounted: against the simulator's /v1/responses,
// every text, reasoning and tool-call stream is a success with a TTFT, a
// first answer, a TPOT and token times; its events are counted by kind
// (content, reasoning, tool_call) and match the usage, reasoning tokens
// included. A logic test: no timing is asserted.
func TestResponsesStreamsCounted(t *testing.T) {
	const requests, tokens, reasoning = 4, 21, 5
	for _, tc := range []struct {
		name                      string
		reasoning                 int
		tools                     bool
		content, thought, toolSum int // streamed tokens of each kind, per request
	}{
		{"text", 0, false, tokens, 0, 0},
		{"reasoning then text", reasoning, false, tokens - reasoning, reasoning, 0},
		{"tool call", 0, true, 0, 0, tokens},
		{"reasoning then a tool call", reasoning, true, 0, reasoning, tokens - reasoning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.ReasoningTokens = tc.reasoning
			baseURL, _ := simulatortest.StartTest(t, cfg)
			s := NewMetrics(prometheus.NewRegistry()).Series("sim", cfg.Model, "responses", config.SLO{})
			target := &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIResponses}
			for _, o := range sendResponses(t, target, s, requests, tokens, tc.tools) {
				if o.Outcome != observation.Success {
					t.Fatalf("request %s: %v", o.Outcome, o.Err)
				}
				if o.ContentEvents != tokens || o.ToolCallEvents != tc.toolSum || o.ReasoningEvents != tc.reasoning {
					t.Errorf("%d events, %d tool calls, %d reasoning; want %d, %d, %d", o.ContentEvents, o.ToolCallEvents, o.ReasoningEvents,
						tokens, tc.toolSum, tc.reasoning)
				}
				if o.OutputTokens != tokens || o.TokenSource != observation.TokensFromUsage || o.ReasoningTokens != tc.reasoning {
					t.Errorf("output %d (%d reasoning) from %s, want %d (%d) from usage", o.OutputTokens, o.ReasoningTokens, o.TokenSource, tokens, tc.reasoning)
				}
				if _, ok := o.TTFT(); !ok {
					t.Error("no TTFT")
				}
				if first := o.TokenTimes[tc.reasoning]; !o.FirstAnswer.Equal(first) {
					t.Errorf("first answer %v, want the event after the reasoning, %v", o.FirstAnswer, first)
				}
				if _, ok := o.TPOT(); !ok {
					t.Error("no TPOT")
				}
			}
			for name, h := range map[string]prometheus.Observer{"TTFT": s.ttft, "TTFA": s.ttfa, "TPOT": s.tpot} {
				if n := histCount(t, h); n != requests {
					t.Errorf("%d %s observations, want %d", n, name, requests)
				}
			}
			if n := histCount(t, s.itl); n != requests*(tokens-1) {
				t.Errorf("%d ITL observations, want %d", n, requests*(tokens-1))
			}
			content, thought, calls := testutil.ToFloat64(s.streamedContent), testutil.ToFloat64(s.streamedReason), testutil.ToFloat64(s.streamedToolCall)
			if content != float64(requests*tc.content) || thought != float64(requests*tc.thought) || calls != float64(requests*tc.toolSum) ||
				content+thought+calls != testutil.ToFloat64(s.completionTokens) {
				t.Errorf("streamed tokens: content %v, reasoning %v, tool_call %v; usage %v; want %d, %d, %d",
					content, thought, calls, testutil.ToFloat64(s.completionTokens), requests*tc.content, requests*tc.thought, requests*tc.toolSum)
			}
			if got := testutil.ToFloat64(s.reasoningTokens); got != float64(requests*tc.reasoning) {
				t.Errorf("reasoning tokens %v, want %d", got, requests*tc.reasoning)
			}
		})
	}
}

// responsesServer streams a Responses answer with a known timing, as vLLM
// streams one: response.created at once; at first, the answer's item
// (a message, or a function call naming get_weather) and its first delta;
// then deltas more deltas step apart; then the done events and
// response.completed with the usage (1 + more output tokens). Each write is
// due at a fixed instant from the arrival, so a late one does not delay the
// rest.
func responsesServer(t *testing.T, first, step time.Duration, more int, call bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrival := time.Now()
		seq := 0
		event := func(typ, fields string) string {
			seq++
			return fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq-1, fields)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(at time.Duration, s string) {
			time.Sleep(time.Until(arrival.Add(at)))
			fmt.Fprint(w, s)
			fl.Flush()
		}
		send(0, event("response.created", `"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}`))
		delta, item := "response.output_text.delta", `{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}`
		if call {
			delta, item = "response.function_call_arguments.delta", `{"id":"fc_1","type":"function_call","call_id":"call_1","name":"get_weather","arguments":"","status":"in_progress"}`
		}
		deltaEvent := func(i int) string {
			return event(delta, fmt.Sprintf(`"item_id":"x","output_index":0,"content_index":0,"delta":"a%d"`, i))
		}
		send(first, event("response.output_item.added", `"output_index":0,"item":`+item)+deltaEvent(0))
		for i := 1; i <= more; i++ {
			send(first+time.Duration(i)*step, deltaEvent(i))
		}
		fmt.Fprint(w, event("response.output_item.done", `"output_index":0,"item":{"type":"message","content":[]}`)+
			event("response.completed", fmt.Sprintf(`"response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":5,"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`, more+1, more+6)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestResponsesAccuracy is the acceptance of the Responses API, for a text
// answer and a function call: the first delta at 200 ms, then 20 more 20
// ms apart. Every success has a TTFT within 10 ms of 200 ms and a TPOT
// within 3 ms of 20 ms, its output tokens from the usage (21), and the
// live histograms hold every one.
func TestResponsesAccuracy(t *testing.T) {
	testenv.Timing(t)
	const (
		first    = 200 * time.Millisecond
		step     = 20 * time.Millisecond
		more     = 20
		requests = 9
	)
	for _, call := range []bool{false, true} {
		name := map[bool]string{false: "text", true: "function call"}[call]
		t.Run(name, func(t *testing.T) {
			url := responsesServer(t, first, step, more, call)
			s := NewMetrics(prometheus.NewRegistry()).Series("stub", "m", "responses", config.SLO{})
			target := &client.Target{Name: "stub", BaseURL: url, Model: "m", Flavor: client.OpenAIResponses}
			var ttfts, tpots []string
			for _, o := range sendResponses(t, target, s, requests, 64, call) {
				if o.Outcome != observation.Success {
					t.Fatalf("request %s: %v", o.Outcome, o.Err)
				}
				ttft, _ := o.TTFT()
				tpot, _ := o.TPOT()
				ttfts, tpots = append(ttfts, ttft.String()), append(tpots, tpot.String())
				if d := ttft - first; d < -10*time.Millisecond || d > 10*time.Millisecond {
					t.Errorf("TTFT %v, want within 10 ms of %v", ttft, first)
				}
				if d := tpot - step; d < -3*time.Millisecond || d > 3*time.Millisecond {
					t.Errorf("TPOT %v, want within 3 ms of %v", tpot, step)
				}
				if o.OutputTokens != more+1 || o.TokenSource != observation.TokensFromUsage {
					t.Errorf("output %d from %s, want %d from usage", o.OutputTokens, o.TokenSource, more+1)
				}
				// A call's events: its name (the item added), as chat's name
				// delta, then the 1 + more argument deltas.
				if call != (o.ToolCallEvents == more+2) || !o.FirstAnswer.Equal(o.FirstToken) {
					t.Errorf("%d tool-call events, first answer %v, first token %v", o.ToolCallEvents, o.FirstAnswer, o.FirstToken)
				}
			}
			t.Logf("%s: TTFT %s; TPOT %s", name, strings.Join(ttfts, " "), strings.Join(tpots, " "))
			if n, m := histCount(t, s.ttft), histCount(t, s.tpot); n != requests || m != requests {
				t.Errorf("%d TTFT and %d TPOT observations, want %d each", n, m, requests)
			}
			if n := histCount(t, s.ttfa); n != requests {
				t.Errorf("%d TTFA observations, want %d: a call is an answer", n, requests)
			}
			if got := testutil.ToFloat64(s.completionTokens); got != requests*(more+1) {
				t.Errorf("completion tokens %v, want %d", got, requests*(more+1))
			}
		})
	}
}

// TestResponsesFaults: the simulator's faults on /v1/responses each give
// their outcome, as on chat: a cut stream disconnected after the events it
// carried, a malformed event a stream error, an injected status its class,
// a stall past the timeout a timeout.
func TestResponsesFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		faults  simulator.Faults
		timeout time.Duration
		want    observation.Outcome
		events  int
	}{
		{"disconnect mid-stream", simulator.Faults{DisconnectAfterTokens: 3}, 10 * time.Second, observation.Disconnected, 3},
		{"malformed event", simulator.Faults{MalformedAfterTokens: 3}, 10 * time.Second, observation.StreamError, 3},
		{"429", simulator.Faults{ErrorRate: 1, ErrorStatus: 429}, 10 * time.Second, observation.HTTP4xx, 0},
		{"stall mid-stream", simulator.Faults{StallMidStream: 5 * time.Second, StallAfterTokens: 3}, 500 * time.Millisecond, observation.Timeout, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			cfg.TimeScale = 0.05
			f := tc.faults
			f.Slowdown = 1
			if f.ErrorStatus == 0 {
				f.ErrorStatus = 503
			}
			cfg.Faults = f
			baseURL, _ := simulatortest.StartTest(t, cfg)
			cl := client.New(client.Options{MaxConnsPerHost: 1})
			defer cl.Close()
			o := &observation.Request{Scheduled: time.Now()}
			cl.Do(t.Context(), &client.Target{BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIResponses},
				&client.Request{Prompt: "a b c", MaxTokens: 12, IgnoreEOS: true, Timeout: tc.timeout}, o)
			if o.Outcome != tc.want || o.ContentEvents != tc.events {
				t.Errorf("outcome %s (%v) after %d events, want %s after %d", o.Outcome, o.Err, o.ContentEvents, tc.want, tc.events)
			}
		})
	}
}

// TestResponsesPromptsCalibrated: a prompt calibrated for an
// openai-responses target (counted as a chat message, template included)
// is exactly its length in the server's usage: /v1/responses templates its
// input as chat does.
func TestResponsesPromptsCalibrated(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	url, _ := simulatortest.StartTest(t, cfg)
	pm := NewCalibrator(NewPromptMetrics(prometheus.NewRegistry()))
	tg := &config.Target{Name: "t", URL: url, Model: cfg.Model, Flavor: "openai-responses"}
	const in = 100
	w := &config.Workload{Name: "w", Prompt: config.Prompt{Seed: 1,
		InputTokens: config.Distribution{Dist: "fixed", Mean: in}, OutputTokens: config.Distribution{Dist: "fixed", Mean: 4}}}
	ps, err := pm.Prompts(t.Context(), tg, w, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(client.Options{})
	defer cl.Close()
	for range 3 {
		p := ps.Next()
		o := &observation.Request{Scheduled: time.Now()}
		cl.Do(t.Context(), &client.Target{BaseURL: url, Model: cfg.Model, Flavor: client.OpenAIResponses},
			&client.Request{Prompt: p.Text, MaxTokens: p.OutputTokens, IgnoreEOS: true, Timeout: time.Minute}, o)
		if o.Outcome != observation.Success || o.PromptTokens != in || o.OutputTokens != 4 {
			t.Errorf("%s (%v): %d prompt and %d output tokens, want %d and 4", o.Outcome, o.Err, o.PromptTokens, o.OutputTokens, in)
		}
	}
}
