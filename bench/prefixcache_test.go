package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// TestBenchDeclaredCacheHitRateAccuracy: shapes of 1,024-token prompts at
// cache_hit_rate 0, 0.5 and 0.9 against the simulator with 16-token
// blocks. Each cell's server and client views read the declared rate, as
// aligned down to the block, within 2 points, and equal each other within
// 1%; the best is the declared rate (the pool's first uses fall in the
// warm-up); no eviction; the 0.5 and 0.9 cells are paired with the cell
// at rate 0 and say what the cache bought.
//
// Time is scaled tenfold as in the live exporter's test: 40 req/s over
// 1.5 s measured are the acceptance's 4 req/s over 15 s, the same 60
// requests; the simulator's steps cost no wall time.
func TestBenchDeclaredCacheHitRateAccuracy(t *testing.T) {
	// The server's view is its counters' increase over the measured
	// window, read every 100 ms and interpolated to the window's ends: a
	// busy machine (the race step beside the tools' build) moved it by
	// 3 points where the client's, counted per request, held.
	testenv.Timing(t)
	cfg := simulatortest.InstantConfig()
	cfg.BlockSize = 16
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := wrapSim(t, sim)
	shape := func(name string, rate float64) string {
		s := fmt.Sprintf("{name: %s, input_tokens: 1024, output_tokens: 4", name)
		if rate > 0 {
			s += fmt.Sprintf(", cache_hit_rate: %g, prefix_pool: 8, block_size: 16", rate)
		}
		return s + "}"
	}
	yml := targetsYAML([]string{"sim"}, []*simTarget{st}) + `
bench:
  seed: 11
  matrix:
    process: constant
    rates: [40]
    shapes: [` + strings.Join([]string{shape("c0", 0), shape("c50", 0.5), shape("c90", 0.9)}, ", ") + `]
  warmup: 500ms
  duration: 1500ms
  repeats: 1
  prompt_set_size: 150
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	out, _ := runBenchOK(t, t.TempDir(), yml)
	rep := readReport(t, out)
	if md, err := os.ReadFile(filepath.Join(out, "report.md")); err != nil || !strings.Contains(string(md), "## Prefix cache") || !strings.Contains(string(md), "| sim/rate=40/c90 | 0.9 | ") {
		t.Errorf("report.md has no prefix-cache table with the 0.9 cell (%v):\n%s", err, md)
	}
	if len(rep.Cells) != 3 {
		t.Fatalf("%d cells, want 3", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		pc := c.PrefixCache
		if pc == nil {
			t.Fatalf("cell %s: no prefix_cache", c.Key)
		}
		sp := config.Prompt{CacheHitRate: pc.DeclaredRate, BlockSize: 16}
		want := float64(sp.PrefixTokens(1024)) / 1024
		t.Logf("%s: declared %.4f, client %.4f (%d of %d), server %.4f (%v of %v), best %.4f, sent %d, evicted %v, bought: throughput x%.3f, TTFT p50 x%.3f against %q",
			c.Shape, want, pc.ClientRatio, pc.CachedTokens, pc.PromptTokens, pc.ServerRatio, pc.ServerHits, pc.ServerQueries, pc.BestRatio,
			pc.PromptsSent, pc.Evicted, pc.ThroughputRatio, pc.TTFTP50Ratio, pc.Paired)
		for name, v := range map[string]report.Num{"server": pc.ServerRatio, "client": pc.ClientRatio} {
			if !v.Valid() || float64(v)-want > 0.02 || want-float64(v) > 0.02 {
				t.Errorf("%s: the %s's ratio %v, declared %.4f", c.Shape, name, v, want)
			}
		}
		if s, cl := float64(pc.ServerRatio), float64(pc.ClientRatio); s-cl > 0.01*s || cl-s > 0.01*s {
			t.Errorf("%s: client %v and server %v differ by more than 1%%", c.Shape, cl, s)
		}
		if pc.Evicted {
			t.Errorf("%s: eviction flagged on a cache that holds the pool", c.Shape)
		}
		if pc.DeclaredRate == 0 {
			if pc.Paired != "" {
				t.Errorf("%s: a cell at rate 0 paired with %q", c.Shape, pc.Paired)
			}
			continue
		}
		if b := float64(pc.BestRatio); b-want > 0.001 || want-b > 0.001 {
			t.Errorf("%s: best %v, want %.4f", c.Shape, b, want)
		}
		if pc.Paired != report.CellKey(c.Target, c.Load, "c0") || !pc.ThroughputRatio.Valid() || !pc.TTFTP50Ratio.Valid() {
			t.Errorf("%s: paired %q, throughput ratio %v, TTFT p50 ratio %v", c.Shape, pc.Paired, pc.ThroughputRatio, pc.TTFTP50Ratio)
		}
	}
}

// TestBenchCacheHitRateRepeats: two repeats of a shape at cache_hit_rate
// 0.5 each read 0.5 within 2 points, by the client's count per request
// (the server's, interpolated to the window's ends, depends on a quiet
// machine: TestBenchDeclaredCacheHitRateAccuracy holds it): the second
// repeat's prompts are the first's lengths in other words, so that the
// prefixes and suffixes the first left in the cache serve none of them.
// Without, the second repeat would hit the first's whole prompts.
func TestBenchCacheHitRateRepeats(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.BlockSize = 16
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := wrapSim(t, sim)
	yml := targetsYAML([]string{"sim"}, []*simTarget{st}) + `
bench:
  seed: 11
  matrix:
    process: constant
    rates: [40]
    shapes: [{name: c50, input_tokens: 1024, output_tokens: 4, cache_hit_rate: 0.5, prefix_pool: 8, block_size: 16}]
  warmup: 500ms
  duration: 1500ms
  repeats: 2
  prompt_set_size: 150
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	// The command's log, to say why when a repeat has no server view.
	var log syncBuffer
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLILogged(t, context.Background(), slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		"bench", "--config.file="+writeTestFile(t, dir, "b.yml", yml), "--output.dir="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	defer func() {
		if t.Failed() {
			for _, l := range strings.Split(log.String(), "\n") {
				if strings.Contains(l, "server metrics") || strings.Contains(l, "prefix cache") {
					t.Log(l)
				}
			}
		}
	}()
	rep := readReport(t, out)
	if len(rep.Cells) != 1 || len(rep.Cells[0].Repeats) != 2 {
		t.Fatalf("%d cells, want 1 of 2 repeats", len(rep.Cells))
	}
	for i, r := range rep.Cells[0].Repeats {
		pc := r.PrefixCache
		if pc == nil {
			t.Fatalf("repeat %d: no prefix_cache", i+1)
		}
		t.Logf("repeat %d: client %.4f (%d of %d), server %.4f (%v of %v), best %.4f",
			i+1, pc.ClientRatio, pc.CachedTokens, pc.PromptTokens, pc.ServerRatio, pc.ServerHits, pc.ServerQueries, pc.BestRatio)
		if v := pc.ClientRatio; !v.Valid() || float64(v)-0.5 > 0.02 || 0.5-float64(v) > 0.02 {
			t.Errorf("repeat %d: the client's ratio %v, declared 0.5", i+1, v)
		}
		if !pc.ServerRatio.Valid() {
			t.Errorf("repeat %d: no server view", i+1)
		}
	}
}
