package live

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/memwatch"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// TestOversizedAnswersBounded: workloads that keep answer text (known-answer
// checks, multi-turn sessions) against a server sending far more text a
// token than any tokenizer does (the simulator's pad_content_bytes). Each
// kept answer stops at its bound as it streams, ends as a stream error,
// and the run's heap stays far below what the answers would have held: a
// sessions workload of 64-token turns and 200 KiB events peaked at 267 MB
// before, against a conversation bound of 256 KiB (16 bytes a token of
// max_conversation_tokens 16384), because the bound was checked only
// before the next turn.
func TestOversizedAnswersBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workload string
		// check reads the run's outcome, given the observations of the
		// measured requests.
		check func(t *testing.T, r *workload.Runner, obs []observation.Request)
	}{
		{
			name: "checks",
			workload: `    duration: 300ms
    arrival: {process: constant, rate: 40}
    prompt:
      output_tokens: {dist: fixed, mean: 4}
    checks:
      - prompt: "Say some words."
        expect: "words"
        max_tokens: 512
        every: 2
`,
			check: func(t *testing.T, r *workload.Runner, _ []observation.Request) {
				errs := testutil.ToFloat64(liveSeries(r).m.checks.WithLabelValues("t", "sim-model", "w", workload.CheckError))
				pass := testutil.ToFloat64(liveSeries(r).m.checks.WithLabelValues("t", "sim-model", "w", workload.CheckPass))
				if errs < 1 || pass != 0 {
					t.Errorf("checks: %v error, %v pass; want every check an error", errs, pass)
				}
			},
		},
		{
			name: "sessions",
			workload: `    duration: 300ms
    arrival: {process: constant, rate: 40}
    sampling: {ignore_eos: true}
    sessions:
      turns: {dist: fixed, mean: 4}
      user_tokens: {dist: fixed, mean: 64}
      output_tokens: {dist: fixed, mean: 64}
      think_time: {dist: fixed, mean: 1ms}
`,
			check: func(t *testing.T, _ *workload.Runner, obs []observation.Request) {
				if len(obs) == 0 {
					t.Fatal("no turn was sent")
				}
				for _, o := range obs {
					if o.Outcome != observation.StreamError || o.Err == nil || !strings.Contains(o.Err.Error(), "answer text over its bound") {
						t.Fatalf("turn %d: outcome %s (%v), want a stream error at the answer's bound", o.Seq, o.Outcome, o.Err)
					}
					if len(o.Text) > config.SessionBytesPerToken*config.DefaultMaxConversationTokens {
						t.Errorf("turn %d kept %d bytes, over the conversation's bound", o.Seq, len(o.Text))
					}
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.Faults.PadContentBytes = 200 << 10
			url, _ := simulatortest.StartTest(t, cfg)
			c, err := config.Parse([]byte(fmt.Sprintf(`
targets:
  - {name: t, url: %q, model: sim-model, timeout: 10s}
workloads:
  - name: w
    target: t
%s`, url, tc.workload)), filepath.Join(t.TempDir(), "c.yml"))
			if err != nil {
				t.Fatal(err)
			}
			runners, clients, err := Build(context.Background(), c, NewMetrics(prometheus.NewRegistry()), Options{DegradedLag: time.Second}, slog.New(slog.DiscardHandler))
			t.Cleanup(func() {
				for _, cl := range clients {
					cl.Close()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			r := runners[0]
			var mu sync.Mutex
			var obs []observation.Request
			onResult(r, func(o *observation.Request) {
				mu.Lock()
				obs = append(obs, *o)
				mu.Unlock()
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			w := memwatch.Start(64<<20, cancel)
			r.Run(ctx)
			peak, over := w.Stop()
			t.Logf("heap growth peak %d KB", peak>>10)
			if over {
				t.Fatalf("the run grew the heap by %d MB", peak>>20)
			}
			mu.Lock()
			defer mu.Unlock()
			tc.check(t, r, obs)
		})
	}
}
