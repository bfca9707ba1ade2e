package live

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// simPrefixCounters reads the simulator's vllm:prefix_cache_hits_total and
// queries_total from its /metrics, as the engine scraper would.
func simPrefixCounters(url string) (hits, queries float64, ok bool) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for name, dst := range map[string]*float64{"vllm:prefix_cache_hits_total": &hits, "vllm:prefix_cache_queries_total": &queries} {
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
				f := strings.Fields(line)
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
					*dst, found = v, found+1
				}
			}
		}
	}
	return hits, queries, found == 2
}

// prefixRun is one workload's run with a declared cache-hit rate.
type prefixRun struct {
	obs          []observation.Request // by Seq
	sim          *simulator.Simulator
	url          string
	reg          *prometheus.Registry
	metrics      *Metrics
	series       *Series
	hits, querys float64 // the server's counters at the end
}

// runPrefix runs a workload of 1,024-token prompts at rate req/s for
// prompts arrivals against a simulator with cfg, with the prompt block's
// extra lines, through Build as the exporter does.
// With mod, the Options are changed before the build, knowing the
// simulator's URL.
func runPrefix(t *testing.T, cfg simulator.Config, flavor string, rate float64, prompts int, extra string, mod ...func(o *Options, url string)) prefixRun {
	t.Helper()
	url, sim := simulatortest.StartTest(t, cfg)
	duration := time.Duration((float64(prompts) + 0.5) / rate * float64(time.Second))
	c, err := config.Parse([]byte(fmt.Sprintf(`
targets:
  - {name: t, url: %q, model: sim-model, flavor: %s, timeout: 10s, metrics: {engine: none}}
workloads:
  - name: w
    target: t
    duration: %s
    arrival: {process: constant, rate: %g}
    sampling: {ignore_eos: true}
    prompt:
      input_tokens: {mean: 1024}
      output_tokens: {mean: 4}
      seed: 5
%s`, url, flavor, duration, rate, extra)), filepath.Join(t.TempDir(), "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	read := func(string) (float64, float64, time.Time, bool) {
		h, q, ok := simPrefixCounters(url)
		return h, q, time.Now(), ok
	}
	opts := Options{DegradedLag: time.Second, ServerPrefixCache: read}
	for _, m := range mod {
		m(&opts, url)
	}
	runners, clients, err := Build(context.Background(), c, metrics, opts, slog.New(slog.DiscardHandler))
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
	run := prefixRun{sim: sim, url: url, reg: reg, metrics: metrics, series: liveSeries(r), obs: make([]observation.Request, prompts)}
	onResult(r, func(o *observation.Request) {
		mu.Lock()
		if o.Seq < uint64(len(run.obs)) {
			run.obs[o.Seq] = *o
		}
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.Run(ctx)
	var ok bool
	if run.hits, run.querys, ok = simPrefixCounters(url); !ok {
		t.Fatal("the simulator's prefix-cache counters are missing")
	}
	for i, o := range run.obs {
		if o.Outcome != observation.Success {
			t.Fatalf("request %d: %s %v", i, o.Outcome, o.Err)
		}
	}
	return run
}

// gauge is the workload's value of a gauge, and whether it exists.
func (r prefixRun) gauge(t *testing.T, name string) (float64, bool) {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestDeclaredCacheHitRate: workloads of 1,024-token prompts at
// cache_hit_rate 0, 0.5 and 0.9 against simulators with 16-token blocks.
// Past the warm-up (each pool prefix's first use), the server's hits over
// its queries read each declared rate within 2 points; the cached tokens
// the client read from the usage equal the server's hits counter, and
// infer_probe_cached_prompt_tokens_total counts them; the live server
// and best ratios agree and no eviction is flagged.
//
// Time is scaled tenfold: the acceptance's 4 req/s over 15 s after the
// warm-up are 40 req/s over 1.5 s here, the same 60 requests; the engine
// steps cost no wall time, and every figure compared is an exact count.
func TestDeclaredCacheHitRate(t *testing.T) {
	const pool, after = 16, 60
	for _, tc := range []struct {
		flavor string
		rate   float64
	}{
		{"openai-completions", 0}, {"openai-completions", 0.5}, {"openai-completions", 0.9},
		{"openai-chat", 0.9},
	} {
		t.Run(fmt.Sprintf("%s %g", tc.flavor, tc.rate), func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.BlockSize = 16
			extra := ""
			if tc.rate > 0 {
				extra = fmt.Sprintf("      cache_hit_rate: %g\n      prefix_pool: %d\n", tc.rate, pool)
			}
			run := runPrefix(t, cfg, tc.flavor, 40, pool+after, extra)
			var hit, prompt, cached float64
			var allHit, allCached float64
			for i, o := range run.obs {
				rec, ok := run.sim.PrefixRecord(o.RequestID)
				if !ok {
					t.Fatalf("request %d (%q) not in the prefix log", i, o.RequestID)
				}
				if o.PromptTokens != 1024 {
					t.Fatalf("request %d: %d prompt tokens, want 1024", i, o.PromptTokens)
				}
				allHit += float64(rec.HitTokens)
				allCached += float64(o.CachedTokens)
				if i >= pool {
					hit += float64(rec.HitTokens)
					prompt += float64(rec.PromptTokens)
					cached += float64(o.CachedTokens)
				}
			}
			measured := hit / prompt
			t.Logf("rate %g: server %.4f after the warm-up (%v of %v tokens), client cached %v, server hits %v (counter %v)",
				tc.rate, measured, hit, prompt, allCached, allHit, run.hits)
			if d := measured - tc.rate; d > 0.02 || d < -0.02 {
				t.Errorf("the server's hit rate is %.4f, declared %g", measured, tc.rate)
			}
			if allHit != run.hits {
				t.Errorf("the prefix log's hits %v differ from the hits counter %v", allHit, run.hits)
			}
			if d := allCached - run.hits; d > 0.01*run.hits || d < -0.01*run.hits {
				t.Errorf("the client's cached tokens %v are not the server's hits %v within 1%%", allCached, run.hits)
			}
			if got := testutil.ToFloat64(run.series.cachedPromptTokens); got != allCached {
				t.Errorf("infer_probe_cached_prompt_tokens_total is %v, the observations %v", got, allCached)
			}
			best, hasBest := run.gauge(t, "infer_probe_prefix_cache_best_hit_ratio")
			server, hasServer := run.gauge(t, "infer_probe_server_prefix_cache_hit_ratio")
			evict, _ := run.gauge(t, "infer_probe_prefix_cache_eviction")
			if tc.rate == 0 {
				if hasBest || hasServer {
					t.Errorf("a workload without a declared rate has the ratios: best %v, server %v", hasBest, hasServer)
				}
				return
			}
			// Over the whole span, warm-up included, the server met the
			// best exactly: every repeat was a hit.
			if !hasBest || !hasServer || server-best > 0.001 || best-server > 0.001 || evict != 0 {
				t.Errorf("best %v (%v), server %v (%v), eviction %v: want equal, no eviction", best, hasBest, server, hasServer, evict)
			}
		})
	}
}

// TestPrefixPoolEvicted: a pool of prefixes larger than the simulator's
// KV cache: the server's ratio falls far below the best the workload
// allows, both are reported, and the eviction is flagged.
func TestPrefixPoolEvicted(t *testing.T) {
	const pool = 32 // 32 × 912 tokens against a cache of 8,192
	cfg := simulatortest.InstantConfig()
	cfg.BlockSize, cfg.KVBlocks, cfg.MaxModelLen = 16, 512, 2048
	run := runPrefix(t, cfg, "openai-completions", 40, 4*pool, fmt.Sprintf("      cache_hit_rate: 0.9\n      prefix_pool: %d\n", pool))
	best, hasBest := run.gauge(t, "infer_probe_prefix_cache_best_hit_ratio")
	server, hasServer := run.gauge(t, "infer_probe_server_prefix_cache_hit_ratio")
	evict, _ := run.gauge(t, "infer_probe_prefix_cache_eviction")
	t.Logf("best %.4f, server %.4f, eviction %v", best, server, evict)
	if !hasBest || !hasServer {
		t.Fatalf("best reported %v, server reported %v", hasBest, hasServer)
	}
	if want := 912.0 / 1024 * 3 / 4; best < want-0.001 || best > want+0.001 {
		t.Errorf("best %v, want %v (every prompt after the 32 first uses repeats 912 tokens)", best, want)
	}
	if server >= best/2 || evict != 1 {
		t.Errorf("server %v against best %v: eviction %v, want 1", server, best, evict)
	}
}

// TestPrefixPoolSizedToServer: a workload that leaves prefix_pool and
// block_size unset takes them from its server's KV cache, as the engine
// scraper reads vLLM's cache_config_info: against a simulator of 512
// blocks of 32 tokens (16,384 tokens), 1,024-token prompts at rate 0.5
// share 512-token prefixes, 16 of which fill half the cache (the
// default without the server's cache would be 64 of 32,768 tokens). The
// first 16 prompts are the pool's first uses; every later one hits its
// 512 tokens, most of them from the cache.
func TestPrefixPoolSizedToServer(t *testing.T) {
	const prompts, pool, prefix = 48, 16, 512
	cfg := simulatortest.InstantConfig()
	cfg.BlockSize, cfg.KVBlocks, cfg.MaxModelLen = 32, 512, 2048
	run := runPrefix(t, cfg, "openai-completions", 40, prompts, "      cache_hit_rate: 0.5\n", func(o *Options, url string) {
		sm := engine.NewScraper(nil)
		t.Cleanup(sm.Close)
		c, err := config.Parse([]byte("targets:\n  - name: t\n    url: "+url+"\n    model: sim-model\n"), "s.yml")
		if err != nil {
			t.Fatal(err)
		}
		if err := sm.ApplyConfig(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		o.ServerKVCache = func(ctx context.Context, target string) (int, int, bool) {
			kv, ok := sm.KVCache(ctx, target)
			return kv.Tokens(), kv.BlockSize, ok
		}
	})
	run.metrics.prefixCache.mu.Lock()
	tr := run.metrics.prefixCache.workloads[[3]string{"t", "sim-model", "w"}]
	run.metrics.prefixCache.mu.Unlock()
	if tr == nil {
		t.Fatal("the workload is not tracked")
	}
	tr.mu.Lock()
	got := tr.pool
	tr.mu.Unlock()
	t.Logf("pool %d; server hits %v of %v", got, run.hits, run.querys)
	if got != pool {
		t.Errorf("pool %d, want %d (half the server's 16,384 tokens in prefixes of 512)", got, pool)
	}
	// With the default pool every prompt would be a first use and hit
	// nothing; the server's LRU cache also keeps the finished requests'
	// suffixes, which take some prefixes out, so the hits are most, not
	// all, of the best's.
	if best := float64((prompts - pool) * prefix); run.hits < 0.75*best || run.hits > best {
		t.Errorf("server hits %v, want at least 3/4 of %v: %d prompts past the pool's first uses, %d tokens each", run.hits, best, prompts-pool, prefix)
	}
	if evict, _ := run.gauge(t, "infer_probe_prefix_cache_eviction"); evict != 0 {
		t.Errorf("eviction flagged for a pool sized to half the cache")
	}
}
