// Package prompt generates synthetic prompts of chosen token lengths from a
// seeded generator, so that two runs with the same seed and spec send the same
// prompts in the same order.
//
// A prompt is a sequence of words drawn from a fixed vocabulary of short,
// common English words. In the embedded simulator's tokenizer every word is
// exactly one token. Real tokenizers split words differently; calibration
// against a server's /tokenize endpoint corrects for that.
package prompt

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/words"
)

// Prompt is one synthetic request body's variable part.
type Prompt struct {
	Text string
	// InputTokens is the requested prompt length, in words.
	InputTokens int
	// OutputTokens is the requested output length (max_tokens).
	OutputTokens int
	// Tokens is the prompt's length as the server's tokenizer counts it,
	// when it was calibrated (Calibrated); 0 for an estimate.
	Tokens int
	// PrefixTokens is the length of the prompt's shared prefix, in
	// tokens after the template's head (prompt.cache_hit_rate: prefix.go);
	// RepeatTokens is how many of them an earlier prompt sent, what a
	// prefix cache that holds every prefix serves (0 for a prefix's first
	// use). Both 0 without a shared prefix. RepeatTokens holds when every
	// prompt drawn before this one was sent; a PrefixLedger counts what
	// was.
	PrefixTokens, RepeatTokens int
	// PrefixIndex is the prefix's place in the pool, from 1; 0 without a
	// shared prefix.
	PrefixIndex int
}

// Generator draws prompts. It is not safe for concurrent use.
type Generator struct {
	rng     *rand.Rand
	in, out config.Distribution
	buf     strings.Builder
}

// New returns a generator for the given length distributions and seed.
func New(in, out config.Distribution, seed int64) *Generator {
	return &Generator{
		rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)),
		in:  in,
		out: out,
	}
}

// Next returns the next prompt.
func (g *Generator) Next() Prompt {
	n := g.sample(g.in)
	m := g.sample(g.out)
	g.buf.Reset()
	g.buf.Grow(n * 6)
	for i := 0; i < n; i++ {
		if i > 0 {
			g.buf.WriteByte(' ')
		}
		g.buf.WriteString(vocabulary[g.rng.IntN(len(vocabulary))])
	}
	return Prompt{Text: g.buf.String(), InputTokens: n, OutputTokens: m}
}

// sample draws a length from d, clamped to [max(1, Min), Max] when Max is set.
func (g *Generator) sample(d config.Distribution) int {
	var x float64
	switch d.Dist {
	case "uniform":
		return d.Min + g.rng.IntN(d.Max-d.Min+1)
	case "normal":
		x = d.Mean + d.Stddev*g.rng.NormFloat64()
	case "lognormal":
		// Parameterised by the distribution's own mean and standard
		// deviation, not those of the underlying normal.
		v := d.Stddev * d.Stddev
		sigma2 := math.Log(1 + v/(d.Mean*d.Mean))
		mu := math.Log(d.Mean) - sigma2/2
		x = math.Exp(mu + math.Sqrt(sigma2)*g.rng.NormFloat64())
	default: // fixed
		x = d.Mean
	}
	n := int(math.Round(x))
	lo := max(1, d.Min)
	if n < lo {
		n = lo
	}
	if d.Max > 0 && n > d.Max {
		n = d.Max
	}
	// The configuration refuses lengths above config.MaxTokens; a
	// distribution built in code is held to it too, so that no prompt is
	// ever built unbounded.
	return min(n, config.MaxTokens)
}

// Vocabulary returns the words synthetic prompts are made of, in their fixed
// order (a copy: the caller may change it). Prompts index this order, so
// appending, removing or reordering words changes every prompt and every
// prompt hash (HashPrompts); probe/replay's synthesised prompts and
// internal/shadow's fillers draw from it too.
func Vocabulary() []string { return slices.Clone(vocabulary) }

// vocabulary: internal/words' list, which probe/replay and internal/shadow
// read too.
var vocabulary = words.Vocabulary()
