package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/groundtruth"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// The reasoning tests run the real client against the simulator in
// reasoning mode (--sim.reasoning-tokens): N reasoning tokens, then the
// answer. The simulator stamps every chunk, reasoning or answer, with its
// emit instant, so the client's first token, first answer and counts can
// be checked against what the server did.

// Reasoning requests of these tests: 30 reasoning tokens, then 20 answer
// tokens.
const (
	reasoningN      = 30
	reasoningAnswer = 20
)

// emittedEvent is one content-bearing chunk the server wrote.
type emittedEvent struct {
	emit      int64 // sim_emit_unix_nano
	reasoning bool  // it carried reasoning text only
}

// reasoningEmits reads a captured body (OpenAI SSE or Ollama NDJSON) into
// the server's content events, in order, told apart as the server marked
// them.
func reasoningEmits(t *testing.T, body []byte) []emittedEvent {
	t.Helper()
	var out []emittedEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "data:"); ok {
			line = strings.TrimSpace(rest)
		}
		if line == "" || line == "[DONE]" {
			continue
		}
		type texts struct {
			Content          string `json:"content"`
			Reasoning        string `json:"reasoning"`
			ReasoningContent string `json:"reasoning_content"`
			Thinking         string `json:"thinking"`
		}
		var f struct {
			Emit    int64 `json:"sim_emit_unix_nano"`
			Choices []struct {
				Delta texts `json:"delta"`
			} `json:"choices"`
			Message  texts  `json:"message"`
			Response string `json:"response"`
			Thinking string `json:"thinking"`
		}
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		answer := f.Message.Content + f.Response
		reasoning := f.Message.Thinking + f.Thinking
		for _, c := range f.Choices {
			answer += c.Delta.Content
			reasoning += c.Delta.Reasoning + c.Delta.ReasoningContent
		}
		if answer == "" && reasoning == "" {
			continue
		}
		out = append(out, emittedEvent{emit: f.Emit, reasoning: answer == ""})
	}
	return out
}

// sendReasoning sends one request of n output tokens through the real
// client and returns its observation and the server's content events.
func sendReasoning(t *testing.T, cl *client.Client, target *client.Target, n int, salt string) (observation.Request, []emittedEvent) {
	t.Helper()
	var buf bytes.Buffer
	obs := observation.Request{Scheduled: time.Now()}
	// A 64-word prompt (64 tokens to the simulator), distinct per salt.
	req := &client.Request{Prompt: salt + strings.Repeat(" word", 63), MaxTokens: n, IgnoreEOS: true, Timeout: time.Minute}
	cl.Do(groundtruth.WithCapture(context.Background(), &buf), target, req, &obs)
	if obs.Outcome != observation.Success {
		t.Fatalf("request failed: %s: %v", obs.Outcome, obs.Err)
	}
	return obs, reasoningEmits(t, buf.Bytes())
}

// TestReasoningCountsAgainstSimulator: for each way a server marks
// reasoning, the client counts the reasoning and answer events the server
// emitted, takes the first answer at the first answer event, and reads the
// server's reasoning-token count where it sends one. Ollama has no
// ignore_eos: its requests stop at the simulator's EOS point, after the
// reasoning and at least one answer token.
func TestReasoningCountsAgainstSimulator(t *testing.T) {
	for _, tc := range []struct {
		name, field, engine string
		flavor              client.Flavor
		usageReasoning      bool // the server reports a reasoning-token count
	}{
		{name: "openai-chat reasoning", field: simulator.ReasoningFieldReasoning, flavor: client.OpenAIChat, usageReasoning: true},
		{name: "openai-chat reasoning_content", field: simulator.ReasoningFieldReasoningContent, flavor: client.OpenAIChat, usageReasoning: true},
		{name: "ollama-chat thinking", engine: simulator.EngineOllama, flavor: client.OllamaChat},
		{name: "ollama-generate thinking", engine: simulator.EngineOllama, flavor: client.OllamaGenerate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.ReasoningTokens, cfg.ReasoningField = reasoningN, tc.field
			if tc.engine != "" {
				cfg.Engine = tc.engine
			}
			baseURL, _ := simulatortest.StartTest(t, cfg)
			cl := client.New(client.Options{Transport: groundtruth.Transport{Inner: http.DefaultTransport.(*http.Transport).Clone()}})
			defer cl.Close()
			target := &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: tc.flavor}
			obs, emits := sendReasoning(t, cl, target, reasoningN+reasoningAnswer, tc.name)

			output, answer := reasoningN+reasoningAnswer, reasoningAnswer
			if tc.engine == simulator.EngineOllama {
				output, answer = len(emits), len(emits)-reasoningN
			}
			if len(emits) != output || obs.ContentEvents != len(emits) || answer < 1 {
				t.Fatalf("client saw %d content events, server emitted %d, want %d with an answer", obs.ContentEvents, len(emits), output)
			}
			for i, e := range emits {
				if e.reasoning != (i < reasoningN) {
					t.Fatalf("server event %d: reasoning %v", i, e.reasoning)
				}
			}
			if obs.ReasoningEvents != reasoningN || obs.ContentEvents-obs.ReasoningEvents != answer {
				t.Errorf("%d reasoning and %d answer events, want %d and %d", obs.ReasoningEvents, obs.ContentEvents-obs.ReasoningEvents, reasoningN, answer)
			}
			if obs.OutputTokens != output || obs.TokenSource != observation.TokensFromUsage {
				t.Errorf("output tokens %d from %s, want %d from usage", obs.OutputTokens, obs.TokenSource, output)
			}
			wantUsage := 0
			if tc.usageReasoning {
				wantUsage = reasoningN
			}
			if obs.ReasoningTokens != wantUsage {
				t.Errorf("usage reasoning tokens %d, want %d", obs.ReasoningTokens, wantUsage)
			}
			if !obs.FirstToken.Equal(obs.TokenTimes[0]) || !obs.FirstAnswer.Equal(obs.TokenTimes[reasoningN]) || obs.LastReasoning {
				t.Errorf("first token %v, first answer %v (event %d at %v), last reasoning %v",
					obs.FirstToken, obs.FirstAnswer, reasoningN, obs.TokenTimes[reasoningN], obs.LastReasoning)
			}
			ttft, _ := obs.TTFT()
			if ttfa, ok := obs.TTFA(); !ok || ttfa <= ttft {
				t.Errorf("TTFA %v %v, want it after TTFT %v", ttfa, ok, ttft)
			}
		})
	}
}

// TestReasoningAccuracyAgainstGroundTruth: at one stream, with a decode
// step of 20 ms, the client's TTFT is the server's first reasoning emit and
// its TTFA the first answer emit, each within the one-stream tolerance of
// TestAccuracyAgainstGroundTruth (p99 over the requests, as there). No
// event is read before it was emitted; the per-event error is logged
// (TestAccuracyAgainstGroundTruth bounds it).
func TestReasoningAccuracyAgainstGroundTruth(t *testing.T) {
	testenv.Timing(t)
	cfg := simulator.DefaultConfig() // real time, 20 ms per decode step
	cfg.ReasoningTokens = reasoningN
	floor := measureFloor(t, cfg.DecodeStep)
	baseURL, _ := simulatortest.StartTest(t, cfg)
	cl := client.New(client.Options{Transport: groundtruth.Transport{Inner: http.DefaultTransport.(*http.Transport).Clone()}})
	defer cl.Close()
	target := &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIChat}

	const requests = 3 // about 1 s each: 50 tokens at 20 ms
	var ttftErr, ttfaErr, tokenErr []time.Duration
	for i := range requests {
		obs, emits := sendReasoning(t, cl, target, reasoningN+reasoningAnswer, fmt.Sprint("r", i))
		if len(emits) != len(obs.TokenTimes) || len(emits) != reasoningN+reasoningAnswer || obs.ReasoningEvents != reasoningN {
			t.Fatalf("client saw %d content events (%d reasoning), server emitted %d, want %d (%d reasoning)",
				len(obs.TokenTimes), obs.ReasoningEvents, len(emits), reasoningN+reasoningAnswer, reasoningN)
		}
		for j, e := range emits {
			d := time.Duration(obs.TokenTimes[j].UnixNano() - e.emit)
			if d < 0 {
				t.Fatalf("client read event %d %v before the server emitted it", j, d)
			}
			tokenErr = append(tokenErr, d)
		}
		ttftErr = append(ttftErr, time.Duration(obs.FirstToken.UnixNano()-emits[0].emit))
		ttfaErr = append(ttfaErr, time.Duration(obs.FirstAnswer.UnixNano()-emits[reasoningN].emit))
		// The answer starts N decode steps after the first token: the
		// truth, as the client measured it.
		if gap := obs.FirstAnswer.Sub(obs.FirstToken); gap < time.Duration(reasoningN)*cfg.DecodeStep*9/10 {
			t.Errorf("first answer %v after the first token, want about %d steps of %v", gap, reasoningN, cfg.DecodeStep)
		}
	}
	t.Logf("%d requests: TTFT error %v, TTFA error %v, token error p50 %v p99 %v max %v",
		requests, ttftErr, ttfaErr, quantile(tokenErr, .5), quantile(tokenErr, .99), quantile(tokenErr, 1))
	floor.checkRead(t, "TTFT error", ttftErr)
	floor.checkRead(t, "TTFA error", ttfaErr)
	floor.checkRead(t, "token error", tokenErr)
}
