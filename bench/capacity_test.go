package bench

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// TestSweepSuccessCapacity: capacity as the highest rate held at 99.9%
// success, with no SLO. The simulator runs 2 sequences of 8 tokens at 20
// ms a step: 12.5 req/s at most in steady state. Requests time out after
// 0.5 s, so a rate above 12.5 req/s fails once its queue holds more than
// about 4 requests; over a 3.5 s point that is above about 13.7 req/s.
// The sweep (4, 8, 16, then bisection) must find the boundary between 12
// and 14 req/s, and report the success ratio there and the first failing
// rate.
func TestSweepSuccessCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 25 s")
	}
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
    rates: [4]
    shapes: [{input_tokens: 8, output_tokens: 8}]
  warmup: 100ms
  duration: 300ms
  repeats: 1
  prompt_set_size: 32
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  sweep: {pass: success, start: 4, factor: 2, max_rate: 64, refine: 3, duration: 3s, warmup: 500ms}
  ranking: {resamples: 100}
`, st.URL)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+writeTestFile(t, dir, "b.yml", yml), "--output.dir="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	sw := readReport(t, out).Sweeps
	if len(sw) != 1 {
		t.Fatalf("sweeps %+v", sw)
	}
	s := sw[0]
	t.Logf("rule %s: max %v req/s (success %v), first failing %v; points %+v; %s", s.Rule, s.MaxRate, s.SuccessRatio, s.FirstFailingRate, s.Points, s.Note)
	if s.Rule != "success >= 0.999" || s.MaxRate < 12 || s.MaxRate >= 14 || s.FirstFailingRate <= s.MaxRate || s.FirstFailingRate > 14 {
		t.Errorf("rule %q, max rate %v, first failing %v: want the boundary between 12 and 14 req/s", s.Rule, s.MaxRate, s.FirstFailingRate)
	}
	for _, p := range s.Points {
		if p.Pass != (p.SuccessRatio >= 0.999) || p.Requests == 0 {
			t.Errorf("point %+v: pass does not follow its success ratio", p)
		}
		if p.Rate == s.MaxRate && p.SuccessRatio != s.SuccessRatio {
			t.Errorf("the result's success ratio %v is not its point's %v", s.SuccessRatio, p.SuccessRatio)
		}
	}
	// About 40 requests per point cannot resolve 99.9%: the note says so.
	if !strings.Contains(s.Note, "needs at least 1000") {
		t.Errorf("note %q", s.Note)
	}
}
