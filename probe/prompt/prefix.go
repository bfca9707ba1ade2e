package prompt

import (
	"fmt"
	"math/rand/v2"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Shared prefixes (prompt.cache_hit_rate). A prompt of n tokens opens with
// a prefix of S = round(rate × n) tokens aligned down to the block size
// (config.Prompt.PrefixTokens), taken from a pool of PrefixPool prefixes,
// and goes on with words of its own, so that a server's prefix cache can
// serve S tokens of it and no more: the suffix's first block is the
// prompt's own.
//
// S counts the prefix's own tokens, as the server's tokenizer counts them
// (the count of the prefix alone less the tokenizer's overhead); the
// template's head (a BOS token, a chat template's user header) comes
// before it in every request, so the tokens the server finds shared are
// head + S, and with a head shorter than a block, S of them are in full
// blocks: exactly what an engine that caches full blocks serves.
//
// The pool is warmed in order: the first PrefixPool prompts use prefixes
// 0, 1, ... once each (their first uses, which no cache can serve); every
// later prompt draws its prefix uniformly from the pool, seeded. A
// prefix's text is a pure function of the seed, its index, its length and
// the server's tokenizer; prefixes of one index and different lengths
// are the same words, so the shorter is the longer's prefix.

// prefixPool is a workload's pool of shared prefixes, and what each has
// been sent at: the longest of each prefix sent so far.
type prefixPool struct {
	spec    config.Prompt
	size    int
	seed    uint64
	rng     *rand.Rand // the draw after the warm-up
	drawn   int
	longest []int
	// texts are the prefixes built so far, by index and length, up to
	// config.MaxPrefixPoolTokens tokens in all; beyond, a prefix is built
	// again each time.
	texts      map[[2]int]string
	textTokens int
}

// SharePrefixes makes each prompt open with a prefix shared with others,
// as p's cache_hit_rate, prefix_pool and block_size say; a rate of 0
// changes nothing. Call it before the first prompt.
func (c *Calibrated) SharePrefixes(p config.Prompt) {
	if p.CacheHitRate <= 0 {
		c.prefixes = nil
		return
	}
	size := p.PrefixPoolOrDefault()
	seed := uint64(p.Seed) ^ 0x7072656669787300
	c.prefixes = &prefixPool{
		spec: p, size: size, seed: seed,
		rng:     rand.New(rand.NewPCG(seed, 0xcac4e)),
		longest: make([]int, size),
		texts:   map[[2]int]string{},
	}
}

// PrefixPool is the number of distinct prefixes; 0 without shared ones.
func (c *Calibrated) PrefixPool() int {
	if c.prefixes == nil {
		return 0
	}
	return c.prefixes.size
}

// next is the index of the next prompt's prefix.
func (pp *prefixPool) next() int {
	i := pp.drawn
	pp.drawn++
	if i < pp.size {
		return i
	}
	return pp.rng.IntN(pp.size)
}

// sharedPrefix picks the prefix of a prompt of n tokens and builds it: its
// text, and its length in tokens (0 and "" for a prompt too short to share
// a block); it sets p's PrefixTokens and RepeatTokens.
func (c *Calibrated) sharedPrefix(n int, p *Prompt) (string, int, error) {
	pp := c.prefixes
	bs := pp.spec.BlockSizeOrDefault()
	s := pp.spec.PrefixTokens(n)
	// The prompt keeps one token of its own past the overhead.
	if room := (n - c.overhead - 1) / bs * bs; s > room {
		s = max(room, 0)
	}
	if s == 0 {
		return "", 0, nil
	}
	i := pp.next()
	text, err := c.prefixText(i, s)
	if err != nil {
		return "", 0, fmt.Errorf("shared prefix %d of %d tokens: %w", i, s, err)
	}
	p.PrefixTokens, p.RepeatTokens, p.PrefixIndex = s, min(s, pp.longest[i]), i+1
	pp.longest[i] = max(pp.longest[i], s)
	return text, s, nil
}

// prefixText is prefix i's text of s tokens: s words for an estimate, else
// the longest word prefix of its stream whose count is s past the
// overhead.
func (c *Calibrated) prefixText(i, s int) (string, error) {
	pp := c.prefixes
	key := [2]int{i, s}
	if t, ok := pp.texts[key]; ok {
		return t, nil
	}
	words := newWordStream(salted(pp.seed+uint64(i)*0x9e3779b97f4a7c15, c.wordSalt))
	var text string
	if c.tok == nil {
		text = words.text(s)
	} else {
		var err error
		if text, err = c.exact(c.overhead+s, words, c.overhead); err != nil {
			return "", err
		}
	}
	if pp.textTokens+s <= config.MaxPrefixPoolTokens {
		pp.texts[key] = text
		pp.textTokens += s
	}
	return text, nil
}

// SaltWords gives every prompt and shared prefix other words, salt's: the
// same lengths, the same pool draws, words no other salt's prompts share
// (as far as seeded words go), so that a server's cache that kept another
// salt's prompts serves none of these. Salt 0 keeps the words. Call it
// before the first prompt. The bench gives each repeat of a shape with a
// cache-hit rate its own salt, so that every repeat meets the cache as
// the first did.
func (c *Calibrated) SaltWords(salt uint64) { c.wordSalt = salt }

// salted is a word stream's seed under a salt: the seed itself under 0.
func salted(seed, salt uint64) uint64 {
	if salt == 0 {
		return seed
	}
	return seed ^ (salt * 0xbf58476d1ce4e5b9)
}
