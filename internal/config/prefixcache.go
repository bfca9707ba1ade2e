package config

import "fmt"

// A workload's declared prefix-cache hit rate (prompt.cache_hit_rate): each
// prompt opens with a prefix shared with other prompts, drawn from a pool of
// PrefixPool prefixes, and ends in a suffix of its own, so that the share
// CacheHitRate of its tokens is what a server's prefix cache can serve
// (probe/prompt builds them; docs/kinds.md says what the rate means
// exactly).

// Bounds of the prefix-cache options.
const (
	// MaxCacheHitRate: a prompt keeps at least one token of its own, and
	// a rate of 1 would be a cache that never computes.
	MaxCacheHitRate = 0.99
	// MaxPrefixPool bounds the pool's prefixes, which are kept in memory
	// as text once built: together at most MaxPrefixPoolTokens tokens.
	MaxPrefixPool       = 65536
	MaxPrefixPoolTokens = 1 << 22
	// MaxBlockSize bounds the block size a prefix is aligned to (vLLM's
	// largest is 256; a hybrid model's can be larger).
	MaxBlockSize = 4096
	// DefaultBlockSize is vLLM's default block size, to which prefixes are
	// aligned when the configuration gives none.
	DefaultBlockSize = 16
	// DefaultPrefixPoolTokens sizes the default pool where the server
	// does not describe its KV cache (SizedToServer sizes it where it
	// does): as many prefixes as fit in this many tokens, at least one,
	// a pool that any server's cache holds beside its running requests
	// (a small GPU's is some 100,000 tokens; the simulator's default
	// 131,072).
	DefaultPrefixPoolTokens = 32768
	// ServerCachePoolDivisor: a pool sized to a server's KV cache takes
	// 1/ServerCachePoolDivisor of it. The rest is room for the running
	// requests' own KV (their suffixes and outputs): a pool that filled
	// the cache would be evicted by every batch, and read as a cache that
	// does not keep it.
	ServerCachePoolDivisor = 2
)

// SizedToServer returns p with what it leaves unset taken from its
// server's KV cache of cacheTokens tokens in blocks of blockSize (0: not
// known): the block size the server's, and the pool as many prefixes of
// the typical prompt as fit in 1/ServerCachePoolDivisor of the cache, at
// least one, at most MaxPrefixPool and MaxPrefixPoolTokens in all. What
// the configuration sets stays; without a rate p is returned as it is.
func (p Prompt) SizedToServer(cacheTokens, blockSize int) Prompt {
	if p.CacheHitRate <= 0 {
		return p
	}
	if p.BlockSize == 0 && blockSize > 0 && blockSize <= MaxBlockSize {
		p.BlockSize = blockSize
	}
	if p.PrefixPool > 0 || cacheTokens <= 0 {
		return p
	}
	n := 1
	if s := p.PrefixTokens(typicalLength(p.InputTokens)); s > 0 {
		n = max(1, cacheTokens/ServerCachePoolDivisor/s)
	}
	if longest := p.PrefixTokens(min(largestLength(p.InputTokens), MaxTokens)); longest > 0 {
		n = min(n, max(1, MaxPrefixPoolTokens/longest))
	}
	p.PrefixPool = min(n, MaxPrefixPool)
	return p
}

// PrefixTokens is the shared prefix's length, in tokens, of a prompt of n
// tokens: round(rate × n) aligned down to the block size, and below n (a
// prompt keeps one token of its own); 0 when the rate is 0.
func (p *Prompt) PrefixTokens(n int) int {
	if p.CacheHitRate <= 0 || n <= 1 {
		return 0
	}
	bs := p.BlockSizeOrDefault()
	s := int(float64(n)*p.CacheHitRate+0.5) / bs * bs
	for s >= n {
		s -= bs
	}
	return max(s, 0)
}

// BlockSizeOrDefault is the block size prefixes are aligned to.
func (p *Prompt) BlockSizeOrDefault() int {
	if p.BlockSize > 0 {
		return p.BlockSize
	}
	return DefaultBlockSize
}

// PrefixPoolOrDefault is the number of distinct prefixes: PrefixPool, or
// as many prefixes of the typical prompt's as DefaultPrefixPoolTokens
// holds.
func (p *Prompt) PrefixPoolOrDefault() int {
	if p.PrefixPool > 0 {
		return p.PrefixPool
	}
	s := p.PrefixTokens(typicalLength(p.InputTokens))
	if s <= 0 {
		return 1
	}
	return max(1, DefaultPrefixPoolTokens/s)
}

// typicalLength is a distribution's mean length (the middle of a uniform).
func typicalLength(d Distribution) int {
	if d.Dist == "uniform" {
		return (d.Min + d.Max) / 2
	}
	return int(d.Mean + 0.5)
}

// largestLength is the longest prompt a distribution can draw.
func largestLength(d Distribution) int {
	switch {
	case d.Max > 0:
		return d.Max
	case d.Dist == "fixed" || d.Dist == "":
		return int(d.Mean + 0.5)
	}
	return MaxTokens
}

// validatePrefixCache checks a prompt block's prefix-cache options at p.
func validatePrefixCache(v *validator, p path, pr *Prompt) {
	if pr.CacheHitRate < 0 || pr.CacheHitRate > MaxCacheHitRate {
		v.add(p, "cache_hit_rate", fmt.Sprintf("must be in [0, %g], got %g", MaxCacheHitRate, pr.CacheHitRate))
	}
	if pr.BlockSize < 0 || pr.BlockSize > MaxBlockSize {
		v.add(p, "block_size", fmt.Sprintf("must be in [1, %d] (0: %d, vLLM's default), got %d", MaxBlockSize, DefaultBlockSize, pr.BlockSize))
	}
	if pr.PrefixPool < 0 || pr.PrefixPool > MaxPrefixPool {
		v.add(p, "prefix_pool", fmt.Sprintf("must be in [1, %d] (0: sized to %d tokens), got %d", MaxPrefixPool, DefaultPrefixPoolTokens, pr.PrefixPool))
		return
	}
	if pr.CacheHitRate <= 0 {
		if pr.PrefixPool > 0 || pr.BlockSize > 0 {
			v.add(p, "cache_hit_rate", "is required with prefix_pool or block_size (0 sends unique prompts)")
		}
		return
	}
	if pr.PrefixPool > 0 && pr.BlockSize >= 0 && pr.BlockSize <= MaxBlockSize {
		longest := min(largestLength(pr.InputTokens), MaxTokens)
		if tokens := int64(pr.PrefixPool) * int64(pr.PrefixTokens(longest)); tokens > MaxPrefixPoolTokens {
			v.add(p, "prefix_pool", fmt.Sprintf("%d prefixes of up to %d tokens are %d tokens; at most %d", pr.PrefixPool, pr.PrefixTokens(longest), tokens, MaxPrefixPoolTokens))
		}
	}
}

// CheckPrefixCache validates a prompt block's prefix-cache options
// (cache_hit_rate, prefix_pool, block_size, with its input_tokens), each
// problem at its path under the block: the bench's shapes are checked by
// it too, so that the options mean the same in both files.
func CheckPrefixCache(p *Prompt) []LengthProblem {
	v := &validator{}
	validatePrefixCache(v, path{}, p)
	out := make([]LengthProblem, len(v.paths))
	for i, pp := range v.paths {
		out[i] = LengthProblem{Path: pp.path, Reason: pp.reason}
	}
	return out
}
