package live

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// The tool-call tests send chat requests whose answer is a tool call: a
// stream with no content, its tokens in tool_calls[].function.name and
// arguments. Before, such a request was counted success with no TTFT and
// no TPOT: it vanished from the latency histograms, the SLOs and the
// alerts.

// weatherTools offers one function, so that the simulator answers with a
// call of it.
var weatherTools = map[string]any{"tools": []any{map[string]any{"type": "function",
	"function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}}}

// seriesEvents hands a request's client events to a live series, as the
// workload runner does (probe/workload requestEvents).
type seriesEvents struct{ s *Series }

func (e seriesEvents) Sent(o *observation.Request) { e.s.Sent(o) }

func (e seriesEvents) Content(o *observation.Request) {
	if o.ContentEvents == 1 {
		e.s.FirstToken(o)
	}
	e.s.Token(o)
}

// sendToolCalls sends n chat requests that offer tools, one at a time,
// through the series, and returns their observations.
func sendToolCalls(t *testing.T, target *client.Target, s *Series, n, maxTokens int) []observation.Request {
	t.Helper()
	cl := client.New(client.Options{})
	defer cl.Close()
	out := make([]observation.Request, n)
	for i := range out {
		o := &out[i]
		o.Scheduled = time.Now()
		req := &client.Request{Prompt: fmt.Sprint("weather ", i), MaxTokens: maxTokens, IgnoreEOS: true, Extra: weatherTools,
			Timeout: time.Minute, Events: seriesEvents{s}}
		cl.Do(context.Background(), target, req, o)
		s.Done(o)
	}
	return out
}

// TestToolCallStreamsCounted: against the simulator, every tool-call
// stream is a success with a TTFT, a first answer (the call), a TPOT and
// token times; its events are counted as tool_call tokens, none as
// content, and match the usage. A logic test: no timing is asserted.
func TestToolCallStreamsCounted(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	baseURL, _ := simulatortest.StartTest(t, cfg)
	s := NewMetrics(prometheus.NewRegistry()).Series("sim", cfg.Model, "tools", config.SLO{})
	target := &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIChat}
	const requests, tokens = 5, 21
	for _, o := range sendToolCalls(t, target, s, requests, tokens) {
		if o.Outcome != observation.Success {
			t.Fatalf("request %s: %v", o.Outcome, o.Err)
		}
		if o.ToolCallEvents != tokens || o.ContentEvents != tokens || o.ReasoningEvents != 0 {
			t.Errorf("%d events, %d tool calls, %d reasoning; want %d tool-call events", o.ContentEvents, o.ToolCallEvents, o.ReasoningEvents, tokens)
		}
		if o.OutputTokens != tokens || o.TokenSource != observation.TokensFromUsage {
			t.Errorf("output %d from %s, want %d from usage", o.OutputTokens, o.TokenSource, tokens)
		}
		if _, ok := o.TTFT(); !ok || !o.FirstAnswer.Equal(o.FirstToken) {
			t.Errorf("TTFT %v, first answer %v, first token %v: the call is the first answer", ok, o.FirstAnswer, o.FirstToken)
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
	calls, content, reasoning := testutil.ToFloat64(s.streamedToolCall), testutil.ToFloat64(s.streamedContent), testutil.ToFloat64(s.streamedReason)
	if calls != requests*tokens || content != 0 || reasoning != 0 || calls != testutil.ToFloat64(s.completionTokens) {
		t.Errorf("streamed tokens: tool_call %v, content %v, reasoning %v; usage %v; want %d tool_call",
			calls, content, reasoning, testutil.ToFloat64(s.completionTokens), requests*tokens)
	}
}

// toolCallServer streams a tool call with a known timing, as vLLM, SGLang
// and OpenAI stream one: the delta naming the function at first (after
// the request's arrival), then args argument deltas step apart, then the
// usage (1 + args completion tokens) and [DONE]. Each write is due at a
// fixed instant from the arrival, so a late one does not delay the rest.
func toolCallServer(t *testing.T, first, step time.Duration, args int) string {
	t.Helper()
	chunk := func(delta string) string {
		return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrival := time.Now()
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(at time.Duration, s string) {
			time.Sleep(time.Until(arrival.Add(at)))
			fmt.Fprint(w, s)
			fl.Flush()
		}
		send(first, chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`))
		for i := 1; i <= args; i++ {
			send(first+time.Duration(i)*step, chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":"a%d"}}]}`, i)))
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", args+1, args+6)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestToolCallAccuracy is the acceptance of tool-call streams: first delta
// at 200 ms, then 20 argument deltas 20 ms apart. Every success has a TTFT
// within 10 ms of 200 ms and a TPOT within 3 ms of 20 ms, its output tokens
// from the usage (21), and the live histograms hold every one.
func TestToolCallAccuracy(t *testing.T) {
	testenv.Timing(t)
	const (
		first    = 200 * time.Millisecond
		step     = 20 * time.Millisecond
		args     = 20
		requests = 9
	)
	url := toolCallServer(t, first, step, args)
	s := NewMetrics(prometheus.NewRegistry()).Series("stub", "m", "tools", config.SLO{})
	target := &client.Target{Name: "stub", BaseURL: url, Model: "m", Flavor: client.OpenAIChat}
	var ttfts, tpots []string
	for _, o := range sendToolCalls(t, target, s, requests, 64) {
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
		if o.OutputTokens != args+1 || o.TokenSource != observation.TokensFromUsage {
			t.Errorf("output %d from %s, want %d from usage", o.OutputTokens, o.TokenSource, args+1)
		}
	}
	t.Logf("TTFT %s; TPOT %s", strings.Join(ttfts, " "), strings.Join(tpots, " "))
	if n, m := histCount(t, s.ttft), histCount(t, s.tpot); n != requests || m != requests {
		t.Errorf("%d TTFT and %d TPOT observations, want %d each", n, m, requests)
	}
	if got := testutil.ToFloat64(s.completionTokens); got != requests*(args+1) {
		t.Errorf("completion tokens %v, want %d", got, requests*(args+1))
	}
}
