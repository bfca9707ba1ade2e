package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// PromptSet is the fixed set of prompts of a run: for each target and
// shape, Size prompts drawn in order from the exporter's exact-length
// generator (prompt.NewCalibrated, calibrated against the target's own
// tokenizer as an exporter workload is), with the run's seed. So every
// target gets prompts of the same token lengths, and a rerun with the same
// seed against the same servers sends byte-identical prompts.
type PromptSet struct {
	lists map[string][]prompt.Prompt
	Infos []report.PromptSetInfo
	// SHA256 is the SHA-256 of the lines "target shape sha256\n" of Infos,
	// in order, a shape with a cache_hit_rate with its prefix options
	// after the hash (Shape.prefixHashed): equal hashes mean every target got the same prompts as in
	// the other run.
	SHA256 string
	Size   int
}

func promptKey(target, shape string) string { return target + "\x00" + shape }

// NewPromptSet calibrates and draws the prompt set. A length the server
// cannot give (below its chat template) is an error.
//
// A shape with a cache_hit_rate gets a list per repeat: the first
// repeat's is the one hashed, and each later repeat's has the same
// lengths and pool draws in words of its own (prompt.Calibrated.SaltWords,
// the repeat's index the salt), so that a repeat meets a cache that the
// repeats before it filled with other prefixes and suffixes, as the first
// met an empty one, and reads the declared rate as the first does. A
// shape without a rate sends the same prompts in every repeat.
func NewPromptSet(ctx context.Context, targets []config.Target, shapes []Shape, size int, seed int64, repeats int) (*PromptSet, error) {
	ps := &PromptSet{lists: map[string][]prompt.Prompt{}, Size: size}
	if len(shapes) == 0 {
		// A matrix of replays alone: no set, and no hash of nothing.
		ps.Size = 0
		return ps, nil
	}
	var all strings.Builder
	for i := range targets {
		t := &targets[i]
		// The same calibration as the exporter's workloads (plan.Tokenizer).
		tok, err := plan.Tokenizer(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("target %q: prompt calibration: %w", t.Name, err)
		}
		for _, sh := range shapes {
			list, kind, err := drawPrompts(ctx, tok, &sh, size, seed, 0)
			if err != nil {
				return nil, fmt.Errorf("target %q, shape %q: %w", t.Name, sh.Name, err)
			}
			for r := 1; sh.CacheHitRate > 0 && r < repeats; r++ {
				salted, _, err := drawPrompts(ctx, tok, &sh, size, seed, r)
				if err != nil {
					return nil, fmt.Errorf("target %q, shape %q, repeat %d: %w", t.Name, sh.Name, r+1, err)
				}
				ps.lists[repeatKey(t.Name, sh.Name, r)] = salted
			}
			info := report.PromptSetInfo{Target: t.Name, Shape: sh.Name, Tokenizer: kind}
			info.SHA256 = withKinds(hashList(list, len(list)), &sh.RequestKinds)
			if len(list) >= prompt.HashedPrompts {
				info.SHA256First64 = withKinds(hashList(list, prompt.HashedPrompts), &sh.RequestKinds)
			}
			ps.lists[promptKey(t.Name, sh.Name)] = list
			ps.Infos = append(ps.Infos, info)
			fmt.Fprintf(&all, "%s %s %s%s\n", t.Name, sh.Name, info.SHA256, sh.prefixHashed())
		}
	}
	sum := sha256.Sum256([]byte(all.String()))
	ps.SHA256 = hex.EncodeToString(sum[:])
	return ps, nil
}

// drawPrompts draws size prompts of shape sh, calibrated with tok (nil:
// estimates), in the words of repeat's salt (0: the first repeat's); it
// returns them and the tokenizer's kind.
func drawPrompts(ctx context.Context, tok *prompt.ServerTokenizer, sh *Shape, size int, seed int64, repeat int) ([]prompt.Prompt, string, error) {
	gen, err := plan.Prompts(ctx, tok, sh.InputTokens.Distribution, sh.OutputTokens.Distribution, seed)
	if err != nil {
		return nil, "", fmt.Errorf("prompt calibration: %w", err)
	}
	gen.SharePrefixes(*sh.prefixPrompt(seed))
	gen.SaltWords(uint64(repeat))
	list := make([]prompt.Prompt, size)
	for j := range list {
		if list[j], err = gen.NextExact(); err != nil {
			return nil, "", fmt.Errorf("prompt %d: %w", j, err)
		}
	}
	return list, gen.Kind(), nil
}

// repeatKey is the key of a repeat's own list (a shape with a rate, past
// the first repeat).
func repeatKey(target, shape string, repeat int) string {
	return fmt.Sprintf("%s\x00%d", promptKey(target, shape), repeat)
}

// withKinds is a prompt list's hash joined with the kinds its shape sends
// (tools, response format, images): two shapes of the same texts but other
// kinds send other requests, so their hashes differ. A shape without kinds
// keeps its texts' hash, as before kinds were hashed.
func withKinds(sum string, k *config.RequestKinds) string {
	if !k.Any() {
		return sum
	}
	kinds, err := yaml.Marshal(k) // keys in order: the same kinds, the same bytes
	if err != nil {
		kinds = []byte(fmt.Sprintf("%+v", *k))
	}
	h := sha256.Sum256([]byte(sum + "\nkinds:\n" + string(kinds)))
	return hex.EncodeToString(h[:])
}

func hashList(list []prompt.Prompt, k int) string {
	i := 0
	sum, _ := prompt.HashPrompts(func() (prompt.Prompt, error) { p := list[i]; i++; return p, nil }, k)
	return sum
}

// Cursor returns a fresh cursor over one target's prompts of one shape for
// a repeat (0 the first), from the first: the repeat's own list where it
// has one (NewPromptSet), else the shape's.
func (ps *PromptSet) Cursor(target, shape string, repeat int) *PromptCursor {
	if list, ok := ps.lists[repeatKey(target, shape, repeat)]; ok {
		return &PromptCursor{list: list}
	}
	return &PromptCursor{list: ps.lists[promptKey(target, shape)]}
}

// PromptCursor hands out prompts in order, cycling. It implements the
// workload runner's Prompts; like the runner's generator it is used by one
// goroutine.
type PromptCursor struct {
	list []prompt.Prompt
	i    int
	// stride is how far each draw moves (a shard takes every Nth); 0 is 1.
	stride int
	// Drawn counts the prompts handed out.
	Drawn int
}

// Next returns the next prompt.
func (c *PromptCursor) Next() prompt.Prompt {
	p := c.list[c.i]
	c.i = (c.i + max(c.stride, 1)) % len(c.list)
	c.Drawn++
	return p
}
