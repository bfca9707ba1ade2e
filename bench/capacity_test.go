package bench

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// TestSweepSuccessCapacityAccuracy: capacity as the highest rate the server
// sustains at 99.9% success, with no SLO. The simulator runs 2 sequences
// of 8 tokens at 20 ms a step: 12.5 req/s at most in steady state, and the
// test measures it too, as the closed loop of 4 clients the bench runs
// beside the sweep (C: with 4 clients both sequences stay busy; 2 clients
// leave a step idle between turns and read 11 req/s). Requests time out after 0.5 s, so a rate just
// above C (13 req/s) keeps every request within the timeout over a short
// point while its queue builds: the old sweep passed it. A point passes
// only in steady state (not overloaded, not degraded, its median E2E not
// rising window over window), so the reported capacity lies between 0.9·C
// and C, for short points (2 s) and long ones (4 s) alike; the result
// gives the success ratio there and the first failing rate, and a point
// that failed for growth says so. The capacity is the real-time
// simulator's, and a point fails when the client is late, so it is a timing
// test (make test-timing), alone on the machine.
func TestSweepSuccessCapacityAccuracy(t *testing.T) {
	testenv.Timing(t)
	for _, point := range []time.Duration{2 * time.Second, 4 * time.Second} {
		t.Run(fmt.Sprint("points=", point), func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			cfg.DecodeStep, cfg.DecodePerSeq, cfg.MaxNumSeqs, cfg.PrefillTokensPerSecond = 20*time.Millisecond, 0, 2, 1e6
			sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			st := wrapSim(t, sim)
			dir := t.TempDir()
			yml := fmt.Sprintf(`targets:
  - {name: sim, url: %s, model: sim-model, flavor: openai-completions, timeout: 500ms, metrics: {interval: 1s, timeout: 1s}}
bench:
  matrix:
    process: constant
    concurrencies: [4]
    shapes: [{input_tokens: 8, output_tokens: 8}]
  warmup: 300ms
  duration: 2s
  repeats: 1
  prompt_set_size: 32
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  sweep: {pass: success, start: 4, factor: 2, max_rate: 64, refine: 3, duration: %s, warmup: 500ms}
  ranking: {resamples: 100}
`, st.URL, point)
			out, _ := runBenchOK(t, dir, yml)
			rep := readReport(t, out)
			capacity := rep.Cells[0].Summary.RequestsPerSecond
			sw := rep.Sweeps
			if len(sw) != 1 {
				t.Fatalf("sweeps %+v", sw)
			}
			s := sw[0]
			t.Logf("closed loop of 4: %.2f req/s; rule %s: max %v req/s (success %v), first failing %v; %s", capacity, s.Rule, s.MaxRate, s.SuccessRatio, s.FirstFailingRate, s.Note)
			for _, p := range s.Points {
				t.Logf("  %g req/s: success %.3f, pass %v %s", p.Rate, p.SuccessRatio, p.Pass, p.Note)
			}
			// [0.9, 1] of the closed loop, as the comment above argues; it
			// failed at 0.9 only under the race detector beside other
			// packages' tests, where it no longer runs.
			if s.Rule != "success >= 0.999" || s.MaxRate < 0.9*capacity || s.MaxRate > capacity || s.FirstFailingRate <= s.MaxRate {
				t.Errorf("rule %q, max rate %v, first failing %v: want a capacity within [0.9, 1] of the closed loop's %.2f req/s", s.Rule, s.MaxRate, s.FirstFailingRate, capacity)
			}
			for _, p := range s.Points {
				if p.Requests == 0 || p.Pass && p.SuccessRatio < 0.999 || !p.Pass && p.SuccessRatio >= 0.999 && !strings.HasPrefix(p.Note, "failed for growth") && !strings.HasPrefix(p.Note, "failed: the client") {
					t.Errorf("point %+v: its pass follows neither its success ratio nor its steady state", p)
				}
				if p.Rate == s.MaxRate && p.SuccessRatio != s.SuccessRatio {
					t.Errorf("the result's success ratio %v is not its point's %v", s.SuccessRatio, p.SuccessRatio)
				}
			}
			// Some 30-50 requests per point cannot resolve 99.9%: the note
			// says so.
			if !strings.Contains(s.Note, "needs at least 1000") {
				t.Errorf("note %q", s.Note)
			}
		})
	}
}
