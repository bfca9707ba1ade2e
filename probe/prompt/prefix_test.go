package prompt

import (
	"context"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// quirkyCounter counts as quirkyTokenizer does for a completions prompt: a
// BOS token, one token a word, two for a word of more than five letters.
type quirkyCounter struct{}

func (quirkyCounter) Count(_ context.Context, text string) (int, error) {
	n := 1
	for _, w := range strings.Fields(text) {
		n++
		if len(w) > 5 {
			n++
		}
	}
	return n, nil
}

// TestSharedPrefixes: with a cache-hit rate, each prompt has its exact
// length and opens with a pool prefix of the declared share aligned down
// to the block; the first use of each prefix repeats nothing, every later
// one its whole prefix; prompts that share a prefix share it word for
// word and nothing past it.
func TestSharedPrefixes(t *testing.T) {
	in := config.Distribution{Dist: "fixed", Mean: 1024}
	out := config.Distribution{Dist: "fixed", Mean: 8}
	for _, tc := range []struct {
		name string
		tok  Counter
	}{{"estimate", nil}, {"calibrated", quirkyCounter{}}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCalibrated(context.Background(), in, out, 7, tc.tok, TokenizerServer)
			if err != nil {
				t.Fatal(err)
			}
			spec := config.Prompt{InputTokens: in, Seed: 7, CacheHitRate: 0.9, PrefixPool: 4}
			c.SharePrefixes(spec)
			seen := map[string]bool{}
			for i := range 40 {
				p, err := c.NextExact()
				if err != nil {
					t.Fatal(err)
				}
				if p.PrefixTokens != 912 {
					t.Fatalf("prompt %d: prefix of %d tokens, want 912", i, p.PrefixTokens)
				}
				if want := 912; i < 4 && p.RepeatTokens != 0 || i >= 4 && p.RepeatTokens != want {
					t.Errorf("prompt %d: repeats %d tokens", i, p.RepeatTokens)
				}
				if tc.tok != nil {
					if n, _ := tc.tok.Count(context.Background(), p.Text); n != 1024 || p.Tokens != 1024 {
						t.Errorf("prompt %d: %d tokens (says %d), want 1024", i, n, p.Tokens)
					}
					// The prefix is 912 tokens past the BOS.
					w := strings.Fields(p.Text)
					for k := 1; k <= len(w); k++ {
						if n, _ := tc.tok.Count(context.Background(), strings.Join(w[:k], " ")); n == 913 {
							seen[strings.Join(w[:k], " ")] = true
							break
						}
					}
				} else {
					w := strings.Fields(p.Text)
					if len(w) != 1024 {
						t.Errorf("prompt %d: %d words", i, len(w))
					}
					seen[strings.Join(w[:912], " ")] = true
				}
			}
			if len(seen) != 4 {
				t.Errorf("%d distinct prefixes, want the pool's 4", len(seen))
			}
		})
	}
}

// TestSharedPrefixesOff: a rate of 0 sends the prompts of a workload
// without one, byte for byte.
func TestSharedPrefixesOff(t *testing.T) {
	in := config.Distribution{Dist: "uniform", Min: 20, Max: 200}
	out := config.Distribution{Dist: "fixed", Mean: 8}
	a, _ := NewCalibrated(context.Background(), in, out, 3, quirkyCounter{}, TokenizerServer)
	b, _ := NewCalibrated(context.Background(), in, out, 3, quirkyCounter{}, TokenizerServer)
	b.SharePrefixes(config.Prompt{InputTokens: in, Seed: 3})
	ha, err := HashPrompts(a.NextExact, 16)
	if err != nil {
		t.Fatal(err)
	}
	if hb, _ := HashPrompts(b.NextExact, 16); ha != hb {
		t.Errorf("a rate of 0 changed the prompts: %s, %s", ha, hb)
	}
}

// TestSharedPrefixSuffixUnique: two prompts of one prefix differ from
// the prefix's end on, so that no block past it is shared.
func TestSharedPrefixSuffixUnique(t *testing.T) {
	in := config.Distribution{Dist: "fixed", Mean: 256}
	c, _ := NewCalibrated(context.Background(), in, config.Distribution{Dist: "fixed", Mean: 1}, 1, nil, "")
	c.SharePrefixes(config.Prompt{InputTokens: in, Seed: 1, CacheHitRate: 0.5, PrefixPool: 1})
	a, b := c.Next(), c.Next()
	wa, wb := strings.Fields(a.Text), strings.Fields(b.Text)
	if strings.Join(wa[:128], " ") != strings.Join(wb[:128], " ") {
		t.Fatal("the prompts do not share their prefix")
	}
	same := 0
	for i := 128; i < 128+16; i++ {
		if wa[i] == wb[i] {
			same++
		}
	}
	if same == 16 {
		t.Error("the prompts share the block after their prefix")
	}
}

// TestSaltWords: a salted generator draws prompts of the same lengths,
// prefix lengths and pool uses as the unsalted one, with other words: no
// prompt of one shares its first 16 words with any of the other's; salt 0
// keeps the words.
func TestSaltWords(t *testing.T) {
	in := config.Distribution{Dist: "uniform", Min: 512, Max: 1024}
	out := config.Distribution{Dist: "fixed", Mean: 8}
	spec := config.Prompt{InputTokens: in, Seed: 7, CacheHitRate: 0.5, PrefixPool: 4}
	draw := func(salt uint64) []Prompt {
		c, err := NewCalibrated(context.Background(), in, out, 7, quirkyCounter{}, TokenizerServer)
		if err != nil {
			t.Fatal(err)
		}
		c.SharePrefixes(spec)
		c.SaltWords(salt)
		ps := make([]Prompt, 24)
		for i := range ps {
			if ps[i], err = c.NextExact(); err != nil {
				t.Fatal(err)
			}
		}
		return ps
	}
	head := func(p Prompt) string { return strings.Join(strings.Fields(p.Text)[:16], " ") }
	base, zero, salted := draw(0), draw(0), draw(1)
	heads := map[string]bool{}
	for _, p := range base {
		heads[head(p)] = true
	}
	for i := range base {
		if zero[i] != base[i] {
			t.Fatalf("prompt %d differs under salt 0", i)
		}
		b, s := base[i], salted[i]
		if s.InputTokens != b.InputTokens || s.Tokens != b.Tokens || s.PrefixTokens != b.PrefixTokens || s.RepeatTokens != b.RepeatTokens {
			t.Errorf("prompt %d: salted %+v, unsalted %+v: lengths differ", i, s, b)
		}
		if heads[head(s)] {
			t.Errorf("prompt %d: the salted prompt opens as an unsalted one", i)
		}
	}
}
