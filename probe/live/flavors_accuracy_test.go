package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

// nativeEmits extracts sim_emit_unix_nano of each content-bearing frame of
// a native stream, reading each engine's shape independently of the
// client's decoders.
func nativeEmits(flavor string, body []byte) []int64 {
	var out []int64
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "data:"); ok {
			line = strings.TrimSpace(rest)
		}
		if line == "" || line == "[DONE]" {
			continue
		}
		var f struct {
			Emit  int64 `json:"sim_emit_unix_nano"`
			Token struct {
				Text    string `json:"text"`
				Special bool   `json:"special"`
			} `json:"token"`
			Content  string `json:"content"`
			Response string `json:"response"`
			Message  struct {
				Content string `json:"content"`
			} `json:"message"`
			TextOutput string `json:"text_output"`
			Text       string `json:"text"`
			Type       string `json:"type"`
			Delta      string `json:"delta"`
		}
		if json.Unmarshal([]byte(line), &f) != nil {
			continue
		}
		content := false
		switch flavor {
		case "tgi":
			content = f.Token.Text != "" && !f.Token.Special
		case "llamacpp":
			content = f.Content != ""
		case "ollama-generate":
			content = f.Response != ""
		case "ollama-chat":
			content = f.Message.Content != ""
		case "triton":
			content = f.TextOutput != ""
		case "sglang":
			content = len(f.Text) > len(prev)
			prev = f.Text
		case "openai-responses":
			switch f.Type {
			case "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta":
				content = f.Delta != ""
			}
		}
		if content {
			out = append(out, f.Emit)
		}
	}
	return out
}

// TestFlavorAccuracyAgainstGroundTruth: for every native flavor, and the
// Responses API (whose typed events are a shape of their own), the probe
// against the simulator's emulation of its engine measures each token's
// read instant within the tolerance of TestAccuracyAgainstGroundTruth at one
// stream (against the bare-read floor of floor_test.go, TTFT and ITL
// alike), and
// counts the tokens the server generated.
func TestFlavorAccuracyAgainstGroundTruth(t *testing.T) {
	testenv.Timing(t)
	// 12 requests of 24 tokens: 276 gaps, so that the p99 is not one
	// outlier. The simulator runs at half its real-time step (10 ms).
	const requests, tokens = 12, 24
	floor := measureFloor(t, simulator.DefaultConfig().DecodeStep/2)
	for _, tc := range []struct{ flavor, engine string }{
		{"tgi", simulator.EngineTGI},
		{"llamacpp", simulator.EngineLlamaCpp},
		{"ollama-generate", simulator.EngineOllama},
		{"ollama-chat", simulator.EngineOllama},
		{"triton", simulator.EngineTriton},
		{"sglang", simulator.EngineSGLang},
		{"openai-responses", simulator.EngineVLLM},
	} {
		t.Run(tc.flavor, func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			cfg.TimeScale = 0.5
			cfg.Engine = tc.engine
			baseURL, _ := simulatortest.StartTest(t, cfg)
			f, err := client.ParseFlavor(tc.flavor)
			if err != nil {
				t.Fatal(err)
			}
			cl := client.New(client.Options{MaxConnsPerHost: 1, Transport: groundtruth.Transport{Inner: http.DefaultTransport.(*http.Transport).Clone()}})
			defer cl.Close()
			target := &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: f}
			var a accuracy
			for i := range requests {
				var buf bytes.Buffer
				obs := observation.Request{Scheduled: time.Now()}
				prompt := strings.Repeat("word ", 32) + string(rune('a'+i))
				cl.Do(groundtruth.WithCapture(context.Background(), &buf), target,
					&client.Request{Prompt: prompt, MaxTokens: tokens, IgnoreEOS: true, Timeout: time.Minute}, &obs)
				if obs.Outcome != observation.Success {
					t.Fatalf("request %d: %s: %v", i, obs.Outcome, obs.Err)
				}
				emits := nativeEmits(tc.flavor, buf.Bytes())
				if len(emits) != len(obs.TokenTimes) || len(emits) == 0 {
					t.Fatalf("client saw %d content events, server emitted %d", len(obs.TokenTimes), len(emits))
				}
				// Where the engine reports a count, it is the server's: the
				// simulator generates one token per content frame.
				if obs.TokenSource == observation.TokensFromUsage && obs.OutputTokens != len(emits) {
					t.Errorf("usage says %d tokens, the server emitted %d", obs.OutputTokens, len(emits))
				}
				a.requests++
				for k, e := range emits {
					a.tokenErr = append(a.tokenErr, time.Duration(obs.TokenTimes[k].UnixNano()-e))
					if k > 0 {
						a.itlErr = append(a.itlErr, obs.TokenTimes[k].Sub(obs.TokenTimes[k-1])-time.Duration(e-emits[k-1]))
					}
				}
				a.ttftErr = append(a.ttftErr, time.Duration(obs.FirstToken.UnixNano()-emits[0]))
			}
			for _, d := range a.tokenErr {
				if d < 0 {
					t.Fatalf("client read an event %v before the server emitted it", d)
				}
			}
			t.Logf("%s: %d requests, token error p50 %v p99 %v; TTFT error p99 %v; ITL |error| p99 %v", tc.flavor, a.requests,
				quantile(a.tokenErr, .5), quantile(a.tokenErr, .99), quantile(a.ttftErr, .99), absQuantile(a.itlErr, .99))
			floor.checkRead(t, "TTFT error", a.ttftErr)
			floor.checkRead(t, "token error", a.tokenErr)
			floor.checkITL(t, "ITL |error|", a.itlErr)
		})
	}
}
