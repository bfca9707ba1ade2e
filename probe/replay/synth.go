package replay

import (
	"strings"
)

// Tokenizer is what prompt synthesis needs to know about the target's
// tokenizer and chat template, so that a synthesised prompt is exactly the
// trace's length in the server's own count.
//
// WordTokenizer, the default, is the embedded simulator's (every
// whitespace-separated word is one token). A tokenizer calibrated against a
// real server's /tokenize endpoint plugs in here: it supplies words it has
// verified to be one token each when joined by single spaces, and the
// template overhead it measured.
type Tokenizer interface {
	// Word returns a word that is exactly one token, also after another
	// such word and a space. The same key always gives the same word, and
	// different keys should spread over many words.
	Word(key uint64) string
	// TemplateTokens returns how many tokens the server's chat template adds
	// before and after the content of a single user message (the generation
	// prompt included), as the server counts them in usage.prompt_tokens.
	TemplateTokens() (before, after int)
}

// WordTokenizer is the embedded simulator's tokenizer (see
// internal/simulator/tokenizer.go): a token is a whitespace-separated word,
// and a single-message chat prompt adds 2 template tokens before the content
// (<|im_start|> <|user|>) and 2 after it (<|im_end|>, then the generation
// prompt <|assistant|>).
type WordTokenizer struct{}

// Word picks one word of a fixed vocabulary of short common English words.
func (WordTokenizer) Word(key uint64) string {
	return vocabulary[key%uint64(len(vocabulary))]
}

// TemplateTokens is 2 before and 2 after.
func (WordTokenizer) TemplateTokens() (before, after int) { return 2, 2 }

// mix64 is the splitmix64 finalizer: a cheap bijective scrambler that turns
// structured keys (seed, pass, block id, position) into well-spread ones.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// key3 hashes three words into one key.
func key3(a, b, c uint64) uint64 {
	return mix64(mix64(mix64(a)^b) ^ c)
}

// synthesizer builds prompts of exact token lengths.
type synthesizer struct {
	tok       Tokenizer
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

// vocabulary: short common English words, each one token in most BPE
// tokenizers too (with a leading space).
var vocabulary = strings.Fields(`the of and to in is it you that he was for on are with as his they be at one have this from or had by word but what some we can out other were all there when up use your how said an each she which do their time if will way about many then them write would like so these her long make thing see him two has look more day could go come did number sound no most people my over know water than call first who may down side been now find any new work part take get place made live where after back little only round man year came show every good me give our under name very through just form great think say help low line turn cause much mean before move right boy old too same tell does set three want air well also play small end put home read hand port large spell add even land here must big high such follow act why ask men change went light kind off need house picture try us again animal point mother world near build self earth father head stand own page should country found answer school grow study still learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start might story saw far sea draw left late run while press close night real life few north open seem together next white children begin got walk example ease paper group always music those both mark often letter until mile river car feet care second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song measure door product black short class wind question happen complete ship area half rock order fire south problem piece told knew pass since top whole king space heard best hour better true during hundred five remember step early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several toward war lay against pattern slow center love person money serve appear road map rain rule pull cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound done beauty drive stood contain front teach week final gave green quick develop ocean warm free minute strong special mind behind clear tail produce fact street inch nothing course stay wheel full force blue object decide surface deep moon island foot system busy test record boat common gold possible plane dry wonder laugh thousand ago ran check game shape hot miss brought heat snow tire bring yes distant fill east paint language among`)
