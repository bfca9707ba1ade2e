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

// vocabulary: short common words, each one token in most BPE tokenizers too.
var vocabulary = strings.Fields(`the of and to in is it you that he was for on are with as his they be at one have this from or had by word but what some we can out other were all there when up use your how said an each she which do their time if will way about many then them write would like so these her long make thing see him two has look more day could go come did number sound no most people my over know water than call first who may down side been now find any new work part take get place made live where after back little only round man year came show every good me give our under name very through just form sentence great think say help low line differ turn cause much mean before move right boy old too same tell does set three want air well also play small end put home read hand port large spell add even land here must big high such follow act why ask men change went light kind off need house picture try us again animal point mother world near build self earth father head stand own page should country found answer school grow study still learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start might story saw far sea draw left late run while press close night real life few north open seem together next white children begin got walk example ease paper group always music those both mark often letter until mile river car feet care second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song measure door product black short numeral class wind question happen complete ship area half rock order fire south problem piece told knew pass since top whole king space heard best hour better true during hundred five remember step early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several vowel toward war lay against pattern slow center love person money serve appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound done beauty drive stood contain front teach week final gave green oh quick develop ocean warm free minute strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object decide surface deep moon island foot system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill east paint language among`)
