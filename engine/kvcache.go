package engine

import (
	"context"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// KVCache is an engine's KV cache as it describes itself: BlockSize tokens
// per block, Blocks blocks. The zero value is a cache the engine does not
// describe.
type KVCache struct {
	BlockSize, Blocks int
}

// Tokens is the cache's capacity in tokens.
func (k KVCache) Tokens() int { return k.BlockSize * k.Blocks }

// Known reports whether the engine described its cache.
func (k KVCache) Known() bool { return k.BlockSize > 0 && k.Blocks > 0 }

// kvCacheSource is an engine's static description of its KV cache: vLLM's
// vllm:cache_config_info, an info gauge (value 1) whose labels are its
// CacheConfig's fields as strings (vllm/v1/metrics/loggers.py,
// log_metrics_info): block_size, the tokens per block, and num_gpu_blocks,
// the blocks the memory profiler left room for ("None" before it ran).
type kvCacheSource struct {
	family, blockSize, blocks string
}

// Bounds of a believed cache description: a block size above vLLM's
// largest times 16 (a hybrid model's attention block is larger than the
// configured one), or a block count whose capacity overflows 2^40 tokens,
// is not a cache anyone has, and is left out.
const (
	maxKVBlockSize   = 1 << 16
	maxKVCacheTokens = 1 << 40
)

// readKVCache reads the cache description of vs's engine. With several
// data-parallel ranks (an engine label), each has a cache of its own and
// a request meets one of them, so the smallest is the target's; ranks
// that disagree on the block size are not believed.
func readKVCache(vs *values, mf *dto.MetricFamily, ks kvCacheSource, modelLabel, model string) {
	var kv KVCache
	for _, m := range pick(mf, nil, modelLabel, model) {
		bs, okBS := positiveLabel(m, ks.blockSize)
		n, okN := positiveLabel(m, ks.blocks)
		if !okBS || !okN || bs > maxKVBlockSize || int64(bs)*int64(n) > maxKVCacheTokens {
			continue
		}
		switch {
		case kv.BlockSize == 0:
			kv = KVCache{BlockSize: bs, Blocks: n}
		case kv.BlockSize != bs:
			return
		default:
			kv.Blocks = min(kv.Blocks, n)
		}
	}
	vs.kvCache = kv
}

// positiveLabel is a label's value read as a whole number above 0.
func positiveLabel(m *dto.Metric, name string) (int, bool) {
	v, ok := labelValue(m, name)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	return n, err == nil && n > 0
}

// KVCache returns target's KV cache as its engine describes it: the latest
// scrape's, or, where none has described it yet (the scraper's first poll
// has not finished), that of one read of the target's metrics now, within
// the scrape timeout. It is false where the target is not scraped or its
// engine does not describe its cache.
func (s *Scraper) KVCache(ctx context.Context, target string) (KVCache, bool) {
	s.mu.Lock()
	sc := s.scrapers[target]
	s.mu.Unlock()
	if sc == nil {
		return KVCache{}, false
	}
	if snap := sc.snap.Load(); snap != nil && snap.up && snap.values.kvCache.Known() {
		return snap.values.kvCache, true
	}
	ctx, cancel := context.WithTimeout(ctx, sc.t.timeout)
	defer cancel()
	// The scraper goroutine owns sc.metricsURL; the configured URL is
	// read-only.
	pm, _, err := sc.readURL(ctx, sc.t.metricsURL)
	if err != nil {
		return KVCache{}, false
	}
	engine := sc.t.engine
	if engine == config.ServerEngineAuto {
		engine = pm.engine
	}
	kv := normalize(engine, pm.fams, sc.t.model).kvCache
	return kv, kv.Known()
}
