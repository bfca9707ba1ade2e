package replay

import (
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
	"github.com/infer-exporter/infer_exporter/internal/words"
)

// WordTokenizer is the embedded simulator's tokenizer (see
// internal/simulator/tokenizer.go), the one synthesised prompts are exact
// in: a token is a whitespace-separated word, and a single-message chat
// prompt adds 2 template tokens before the content (<|im_start|> <|user|>)
// and 2 after it (<|im_end|>, then the generation prompt <|assistant|>).
// Another server counts the same prompt in its own tokenizer and template,
// so there the lengths are close, not exact.
type WordTokenizer struct{}

// Word returns the word of key: one of a fixed vocabulary of short common
// English words, each one token in the simulator, also after another word
// and a space. The same key always gives the same word.
func (WordTokenizer) Word(key uint64) string { return words.Word(key) }

// TemplateTokens is how many tokens the simulator's chat template adds
// before and after the content of a single user message (the generation
// prompt included), as it counts them in usage.prompt_tokens: 2 and 2.
func (WordTokenizer) TemplateTokens() (before, after int) { return 2, 2 }

// key3 hashes three words into one key.
func key3(a, b, c uint64) uint64 {
	return hashmix.Mix64(hashmix.Mix64(hashmix.Mix64(a)^b) ^ c)
}

// synthesizer builds prompts of exact token lengths.
type synthesizer struct {
	tok       WordTokenizer
	chat      bool
	blockSize int
	seed      uint64
	buf       strings.Builder
}

// template returns the template tokens around the content, as the target
// counts them: none for a completions prompt.
func (s *synthesizer) template() (before, after int) {
	if !s.chat {
		return 0, 0
	}
	return s.tok.TemplateTokens()
}

// prompt returns the content of a prompt of exactly rec.InputTokens tokens,
// template included. Token positions are those of the server's token
// sequence: positions [0, before) and [n-after, n) are the template, the
// rest are words. A Mooncake record's position p lies in block p/blockSize,
// and its word depends only on that block's hash id and p's place in it, so
// two prompts whose leading hash ids are equal have equal leading blocks
// token for token, template included (it is the same for every prompt).
// Other records get words of their own, keyed by the record's line, so
// that they share no prefix by accident. pass (a loop's pass number) is in
// every key, so passes do not share prefixes with each other.
func (s *synthesizer) prompt(rec *Record, pass int) string {
	before, after := s.template()
	n := rec.InputTokens
	s.buf.Reset()
	// n is at most maxTokens (NewSource refuses longer records), so a
	// prompt is at most a few MB, whatever the trace says.
	s.buf.Grow(max(n-before-after, 0) * 7)
	passKey := key3(s.seed, uint64(pass), 0x5eed)
	first := true
	for p := before; p < n-after; p++ {
		var k uint64
		if rec.HashIDs != nil {
			b := p / s.blockSize
			k = key3(passKey, uint64(rec.HashIDs[b]), uint64(p%s.blockSize))
		} else {
			k = key3(passKey^0xa11ce, uint64(rec.Line), uint64(p))
		}
		if !first {
			s.buf.WriteByte(' ')
		}
		first = false
		s.buf.WriteString(s.tok.Word(k))
	}
	return s.buf.String()
}

// vocabulary is the words of synthesised prompts (internal/words.Replay):
// prompt.Vocabulary, in its order, less the words of a few left out.
// Synthesised prompts, and the fillers of shadow captures, index it.
var vocabulary = words.Replay()
