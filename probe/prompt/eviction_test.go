package prompt

import (
	"container/list"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestEvictionRule: the rule's bounds.
func TestEvictionRule(t *testing.T) {
	for _, tc := range []struct {
		server, best float64
		sent, pool   int
		want         bool
	}{
		{0.1, 0.8, 100, 16, true},
		{0.45, 0.8, 100, 16, false}, // above half the best
		{0.1, 0.8, 47, 16, false},   // not yet twice the pool past the warm-up
		{0, 0.04, 100, 16, false},   // a best too small to judge
		{0.39, 0.8, 48, 16, true},
	} {
		if got := Evicted(tc.server, tc.best, tc.sent, tc.pool); got != tc.want {
			t.Errorf("Evicted(%v, %v, %d, %d) = %v, want %v", tc.server, tc.best, tc.sent, tc.pool, got, tc.want)
		}
	}
}

// lruBlocks is a model of an engine's prefix cache: full blocks of
// blockSize tokens (here words: the estimate's unit), each keyed by its
// whole prefix (as vLLM's block hashes chain), evicted least recently used
// beyond capacity blocks.
type lruBlocks struct {
	capacity, blockSize int
	order               *list.List               // block keys, the most recent first
	at                  map[string]*list.Element // block key: its place in order
}

// admit looks up a prompt's full blocks, counts the leading ones cached,
// and keeps them all; it returns the hit and queried tokens.
func (c *lruBlocks) admit(words []string) (hits, queries int) {
	queries = len(words)
	chained := true
	var key strings.Builder
	for b := 0; (b+1)*c.blockSize <= len(words); b++ {
		for _, w := range words[b*c.blockSize : (b+1)*c.blockSize] {
			key.WriteString(w)
			key.WriteByte(' ')
		}
		k := key.String()
		if e, ok := c.at[k]; ok {
			if chained {
				hits += c.blockSize
			}
			c.order.MoveToFront(e)
		} else {
			chained = false
			c.at[k] = c.order.PushFront(k)
		}
	}
	for c.order.Len() > c.capacity {
		delete(c.at, c.order.Remove(c.order.Back()).(string))
	}
	return hits, queries
}

// evictionCase runs one seeded workload against the cache model and
// reports whether the rule flags it at the end, as the bench judges a
// repeat: the server's ratio and the best over every prompt sent.
func evictionCase(t *testing.T, rng *rand.Rand, shareLow, shareHigh float64) bool {
	t.Helper()
	const bs = 16
	n := 256 + 16*rng.IntN(49) // 256-1024 words
	rate := 0.3 + 0.65*rng.Float64()
	pool := 4 + rng.IntN(45)
	sp := config.Prompt{InputTokens: config.Distribution{Dist: "fixed", Mean: float64(n)},
		OutputTokens: config.Distribution{Dist: "fixed", Mean: 4}, Seed: rng.Int64(),
		CacheHitRate: rate, PrefixPool: pool, BlockSize: bs}
	gen, err := NewCalibrated(context.Background(), sp.InputTokens, sp.OutputTokens, sp.Seed, nil, TokenizerEstimate)
	if err != nil {
		t.Fatal(err)
	}
	gen.SharePrefixes(sp)
	poolBlocks := pool * sp.PrefixTokens(n) / bs
	share := shareLow + (shareHigh-shareLow)*rng.Float64() // the cache's size, in pools
	cache := &lruBlocks{capacity: max(1, int(share*float64(poolBlocks))), blockSize: bs, order: list.New(), at: map[string]*list.Element{}}
	prompts := pool * (3 + rng.IntN(6))
	var hits, queries, repeats, sent int
	for range prompts {
		p, err := gen.NextExact()
		if err != nil {
			t.Fatal(err)
		}
		h, q := cache.admit(strings.Fields(p.Text))
		hits, queries = hits+h, queries+q
		repeats, sent = repeats+p.RepeatTokens, sent+max(p.Tokens, p.InputTokens)
	}
	return Evicted(float64(hits)/float64(queries), float64(repeats)/float64(sent), prompts, pool)
}

// TestEvictionFlagRates measures the eviction flag over 200 seeded
// workloads (cache_hit_rate 0.3-0.95, prompts of 256-1024 tokens, pools of
// 4-48 prefixes, 3 to 8 times the pool sent) against a model of a block
// prefix cache with LRU eviction (lruBlocks; the simulator is too slow for
// as many cases): half whose cache holds 1.5 to 4 times the pool, half a
// twentieth to half of it. The false-alarm rate is the share of the first
// flagged, the detection rate the share of the second; docs/kinds.md
// quotes them. A third hundred, caches of half to one and a half pools,
// where a partial eviction may or may not be far enough below the best, is
// logged, not judged.
func TestEvictionFlagRates(t *testing.T) {
	const cases = 100
	rng := rand.New(rand.NewPCG(58, 1))
	var alarms, detections, between int
	for range cases {
		if evictionCase(t, rng, 1.5, 4) {
			alarms++
		}
		if evictionCase(t, rng, 0.05, 0.5) {
			detections++
		}
		if evictionCase(t, rng, 0.5, 1.5) {
			between++
		}
	}
	fa, det := float64(alarms)/cases, float64(detections)/cases
	t.Logf("eviction flag over %d + %d seeded cases: false alarms %.2f (%d), detection %.2f (%d); a cache of 0.5-1.5 pools (not judged): flagged %.2f",
		cases, cases, fa, alarms, det, detections, float64(between)/cases)
	if fa > 0.05 || det < 0.9 {
		t.Errorf("false-alarm rate %.2f (want at most 0.05), detection rate %.2f (want at least 0.9)", fa, det)
	}
}
