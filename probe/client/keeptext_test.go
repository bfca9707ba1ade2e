package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/memwatch"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestKeepTextBound: a server whose every token carries a large text (the
// simulator's pad_content_bytes) ends a request that keeps its answer as a
// stream error once the kept text would pass its bound, in every flavor,
// and the process never holds much more than that bound. Before the bound,
// 512 tokens of 1,000,000-byte events were kept whole: 512 MB for one
// request, copied once more into the observation.
func TestKeepTextBound(t *testing.T) {
	tests := []struct {
		name     string
		pad      int
		maxBytes int // Request.MaxTextBytes
		wantOK   bool
		bound    int // the bound the error names
	}{
		{"no padding keeps the whole answer", 0, 0, true, DefaultMaxTextBytes},
		{"1,000,000-byte tokens, default bound", 1_000_000, 0, false, DefaultMaxTextBytes},
		{"200 KiB tokens, default bound", 200 << 10, 0, false, DefaultMaxTextBytes},
		{"1 KiB tokens, a 4 KiB bound", 1 << 10, 4 << 10, false, 4 << 10},
		{"1 KiB tokens, a bound that holds them", 1 << 10, 1 << 20, true, 1 << 20},
	}
	engines := map[string]string{
		"openai-chat": simulator.EngineVLLM, "openai-completions": simulator.EngineVLLM, "openai-responses": simulator.EngineVLLM,
		"tgi": simulator.EngineTGI, "llamacpp": simulator.EngineLlamaCpp,
		"ollama-generate": simulator.EngineOllama, "ollama-chat": simulator.EngineOllama,
		"triton": simulator.EngineTriton, "sglang": simulator.EngineSGLang,
	}
	for _, name := range FlavorNames() {
		flavor, _ := ParseFlavor(name)
		engine, ok := engines[name]
		if !ok {
			t.Fatalf("flavor %s has no simulated engine in this test", name)
		}
		t.Run(name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					cfg := simulatortest.InstantConfig()
					cfg.Faults.PadContentBytes = tc.pad
					cfg.Engine = engine
					base, _ := simulatortest.StartTest(t, cfg)
					c := New(Options{MaxConnsPerHost: 1})
					defer c.Close()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					// 64 MB above the baseline is far above the bound and
					// below what an unbounded copy of 128 tokens of 1 MB
					// holds. 128 tokens, not 512: SGLang's events carry the
					// whole text so far, and 512 of 1 KiB (131 MB read) ran
					// out of the 30 s under the race detector on a busy
					// machine.
					w := memwatch.Start(64<<20, cancel)
					obs := &observation.Request{Scheduled: time.Now()}
					c.Do(ctx, &Target{BaseURL: base, Flavor: flavor, Model: cfg.Model},
						&Request{Prompt: "p", MaxTokens: 128, IgnoreEOS: true, KeepText: true, MaxTextBytes: tc.maxBytes}, obs)
					peak, over := w.Stop()
					t.Logf("heap growth peak %d KB", peak>>10)
					if over {
						t.Fatalf("the heap grew %d MB while one request kept its answer", peak>>20)
					}
					if len(obs.Text) > tc.bound {
						t.Errorf("kept %d bytes of text, over the bound of %d", len(obs.Text), tc.bound)
					}
					if tc.wantOK {
						// Native engines stop at their end of sequence:
						// any length will do.
						if obs.Outcome != observation.Success || obs.OutputTokens < 1 {
							t.Fatalf("outcome %s (%v), %d tokens; want success", obs.Outcome, obs.Err, obs.OutputTokens)
						}
						if tc.pad == 0 && len(obs.Text) == 0 {
							t.Error("no text kept")
						}
						return
					}
					if obs.Outcome != observation.StreamError || obs.Err == nil || !strings.Contains(obs.Err.Error(), "answer text over its bound") {
						t.Fatalf("outcome %s (%v), want stream_error for the answer's bound", obs.Outcome, obs.Err)
					}
				})
			}
		})
	}
}
