package prompt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Exact-length prompts. A synthetic prompt is made of words; how many tokens
// a word is depends on the server's tokenizer, and a chat request adds the
// template's tokens. The Calibrated generator asks the server's own
// tokenizer endpoint how many tokens a candidate prompt is, and adjusts the
// word count, then appends single-token fillers, until the count equals the
// requested length exactly. Where the server has no tokenizer endpoint
// (Ollama, Triton), the prompt is N words, an estimate, and says so.
//
// Purity: a prompt's words come from a generator seeded per prompt from the
// workload's seed, and the search takes, for a tokenizer whose count grows
// with every word (true of tokenizers that split at white space first), the
// unique longest word prefix that does not exceed N tokens, then a fixed
// filler sequence. So the prompt set is a pure function of the seed, the
// length distributions and the server's tokenizer.

// Tokenizer kinds, the values of the tokenizer label.
const (
	// TokenizerServer: the count is the server's, for the request as sent
	// (chat template included for chat APIs).
	TokenizerServer = "server"
	// TokenizerServerContent: the server counted the content, but its
	// endpoint cannot apply the chat template, so a chat request's template
	// tokens are not included (TGI and llama.cpp with a chat flavor).
	TokenizerServerContent = "server_content"
	// TokenizerEstimate: no tokenizer endpoint; a prompt of N tokens is N
	// words, which many tokenizers count as about N tokens.
	TokenizerEstimate = "estimate"
)

// Endpoint is the server whose tokenizer is asked.
type Endpoint struct {
	BaseURL     string // the server root; a trailing /v1 is dropped
	Model       string
	BearerToken string
	Headers     map[string]string
	// Chat: count the prompt as the single user message of a chat request,
	// with the server's chat template and generation prompt.
	Chat   bool
	Client *http.Client // nil: http.DefaultClient
}

// ServerTokenizer counts tokens with a server's POST /tokenize, in one of
// three dialects: vLLM and SGLang ({"prompt"} or {"messages"} -> {"count"}),
// TGI ({"inputs"} -> [tokens]) and llama.cpp ({"content"} -> {"tokens"}).
type ServerTokenizer struct {
	ep      Endpoint
	url     string
	dialect string // vllm, tgi, llamacpp
	// maxModelLen is the context length the server's answer gave (vLLM and
	// SGLang answer max_model_len beside the count); 0 when unknown.
	maxModelLen atomic.Int64
}

// MaxModelLen returns the target's context length (prompt plus output
// tokens) as its /tokenize answer stated it, or 0 when it states none.
func (t *ServerTokenizer) MaxModelLen() int { return int(t.maxModelLen.Load()) }

// Kind is TokenizerServer, or TokenizerServerContent for a chat endpoint
// whose tokenizer cannot apply the template.
func (t *ServerTokenizer) Kind() string {
	if t.ep.Chat && t.dialect != "vllm" {
		return TokenizerServerContent
	}
	return TokenizerServer
}

// Dialect names the endpoint's format.
func (t *ServerTokenizer) Dialect() string { return t.dialect }

// DetectTokenizer finds the server's tokenizer endpoint by asking
// POST /tokenize in each dialect until one answers in its shape. It returns
// nil and no error when the server has none (a 404, or no dialect fits).
func DetectTokenizer(ctx context.Context, ep Endpoint) (*ServerTokenizer, error) {
	root := config.RootURL(ep.BaseURL)
	var last error
	for _, d := range []string{"vllm", "tgi", "llamacpp"} {
		t := &ServerTokenizer{ep: ep, url: root + "/tokenize", dialect: d}
		_, err := t.Count(ctx, "hello world")
		if err == nil {
			return t, nil
		}
		var se *statusError
		if errors.As(err, &se) {
			if se.status == http.StatusNotFound {
				return nil, nil
			}
			if se.status >= 500 {
				// A server loading its model answers 503 to everything
				// (llama.cpp, the simulator's unready load): it has not
				// answered yet, which says nothing of its tokenizer.
				last = err
			}
			continue // this dialect's body was refused; try the next
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = err
	}
	if last != nil {
		// No answer (connection refused, timeout, a 5xx): the server may
		// not be up yet, which is not the same as having no tokenizer.
		return nil, fmt.Errorf("%w: %v", ErrTokenizerUnreachable, last)
	}
	return nil, nil
}

// ErrTokenizerUnreachable: the server did not answer the tokenizer probe at
// all, so whether it has a tokenizer is unknown.
var ErrTokenizerUnreachable = errors.New("tokenizer endpoint unreachable")

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("tokenize: HTTP %d: %s", e.status, e.body) }

// tokenizeClient bounds every /tokenize call: the calls sit in the
// dispatcher's path, and a server that stalls must cost a bounded delay,
// after which the prompt goes out as an estimate (and Calibrated.Next
// reports the failure to OnFailure).
var tokenizeClient = &http.Client{
	Timeout: 5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// Count returns the number of tokens of text as the server counts it.
func (t *ServerTokenizer) Count(ctx context.Context, text string) (int, error) {
	var body any
	switch t.dialect {
	case "vllm":
		m := map[string]any{}
		if t.ep.Model != "" {
			m["model"] = t.ep.Model
		}
		if t.ep.Chat {
			m["messages"] = []map[string]string{{"role": "user", "content": text}}
			m["add_generation_prompt"] = true
		} else {
			m["prompt"] = text
		}
		body = m
	case "tgi":
		body = map[string]any{"inputs": text}
	case "llamacpp":
		// /completion adds the BOS token; /tokenize does only when asked.
		body = map[string]any{"content": text, "add_special": true}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	config.SetTargetHeaders(req, t.ep.Headers, t.ep.BearerToken)
	cl := t.ep.Client
	if cl == nil {
		cl = tokenizeClient
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, &statusError{status: resp.StatusCode, body: string(data[:min(len(data), 256)])}
	}
	switch t.dialect {
	case "vllm":
		var r struct {
			Count       *int `json:"count"`
			MaxModelLen int  `json:"max_model_len"`
		}
		if json.Unmarshal(data, &r) != nil || r.Count == nil {
			return 0, errors.New("tokenize: no count in the answer")
		}
		if r.MaxModelLen > 0 {
			t.maxModelLen.Store(int64(r.MaxModelLen))
		}
		return *r.Count, nil
	case "tgi":
		var r []json.RawMessage
		if json.Unmarshal(data, &r) != nil || !bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
			return 0, errors.New("tokenize: the answer is not a token array")
		}
		return len(r), nil
	default:
		var r struct {
			Tokens *[]json.RawMessage `json:"tokens"`
		}
		if json.Unmarshal(data, &r) != nil || r.Tokens == nil {
			return 0, errors.New("tokenize: no tokens in the answer")
		}
		return len(*r.Tokens), nil
	}
}

// Counter counts tokens; *ServerTokenizer is one.
type Counter interface {
	Count(ctx context.Context, text string) (int, error)
}

// fillers are appended one at a time to reach the exact count when no word
// count gives it: short words that are one token in common tokenizers.
var fillers = []string{" a", " I", " the", " of", " and", " to", " in", " it", " is", " on"}

// ErrBelowOverhead is the error of a length the template alone exceeds.
var ErrBelowOverhead = errors.New("requested prompt length is not above the server's fixed token overhead")

// Calibrated draws prompts of exactly the requested token count as a server
// counts them. It is not safe for concurrent use.
type Calibrated struct {
	ctx      context.Context
	rng      *rand.Rand
	in, out  config.Distribution
	tok      Counter
	kind     string
	overhead int
	// prefixes is the pool of shared prefixes (prefix.go); nil: every
	// prompt is unique.
	prefixes *prefixPool
	// wordSalt changes the words of every prompt and prefix, not their
	// lengths nor the pool's draws (SaltWords); 0 keeps them.
	wordSalt uint64
	// OnFailure, when set, is called with each calibration failure of
	// Next (for a metric and a log line): the prompt could not be
	// calibrated (the tokenizer failed) and is sent as an estimate.
	OnFailure func(error)
}

// NewCalibrated returns a generator of exact-length prompts. tok nil gives
// estimates (kind TokenizerEstimate). The overhead (the tokens of an empty
// prompt: special tokens, chat template) is measured once; a distribution
// whose smallest length does not exceed it is refused.
func NewCalibrated(ctx context.Context, in, out config.Distribution, seed int64, tok Counter, kind string) (*Calibrated, error) {
	c := &Calibrated{ctx: ctx, rng: rand.New(rand.NewPCG(uint64(seed), 0x5ca1ab1e)), in: in, out: out, tok: tok, kind: kind}
	if tok == nil {
		c.kind = TokenizerEstimate
		return c, nil
	}
	n, err := tok.Count(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("measuring the tokenizer's overhead: %w", err)
	}
	c.overhead = n
	if lo := minLength(in); lo <= n {
		return nil, fmt.Errorf("%w: input_tokens can be %d, but an empty prompt is already %d tokens on this server (template and special tokens); ask for at least %d",
			ErrBelowOverhead, lo, n, n+1)
	}
	return c, nil
}

// minLength is the smallest length a distribution can draw.
func minLength(d config.Distribution) int {
	switch d.Dist {
	case "uniform":
		return max(1, d.Min)
	case "fixed":
		return max(1, int(d.Mean+0.5), d.Min)
	}
	return max(1, d.Min)
}

// Kind is the tokenizer label value.
func (c *Calibrated) Kind() string { return c.kind }

// Overhead is the token count of an empty prompt.
func (c *Calibrated) Overhead() int { return c.overhead }

// Next returns the next prompt. A prompt that cannot be calibrated now (the
// tokenizer failed, or no prompt has the length) is returned as an estimate
// and its error is passed to OnFailure; NextExact returns the error instead.
func (c *Calibrated) Next() Prompt {
	p, err := c.NextExact()
	if err != nil && c.OnFailure != nil {
		c.OnFailure(err)
	}
	return p
}

// NextExact draws the next prompt and calibrates it. Prompt.Tokens is the
// server's count (0 for an estimate).
func (c *Calibrated) NextExact() (Prompt, error) {
	g := Generator{rng: c.rng}
	n, m := g.sample(c.in), g.sample(c.out)
	words := newWordStream(salted(c.rng.Uint64(), c.wordSalt))
	p := Prompt{InputTokens: n, OutputTokens: m}
	base := c.overhead
	if c.prefixes != nil {
		lead, shared, err := c.sharedPrefix(n, &p)
		if err != nil {
			p.Text = words.text(max(1, n-c.overhead))
			return p, err
		}
		words.lead, base = lead, c.overhead+shared
	}
	if c.tok == nil {
		p.Text = words.text(n - p.PrefixTokens)
		return p, nil
	}
	text, err := c.exact(n, words, base)
	if err != nil {
		p.Text = words.text(max(1, n-base))
		return p, err
	}
	p.Text, p.Tokens = text, n
	return p, nil
}

// exact finds the prompt of n tokens: the longest word prefix not above n,
// then fillers. base is the count of no words: the overhead, with the
// stream's lead (a shared prefix) when it has one.
func (c *Calibrated) exact(n int, words *wordStream, base int) (string, error) {
	if n <= base {
		return "", fmt.Errorf("%w: %d tokens asked, %d taken by the template and special tokens", ErrBelowOverhead, n, base)
	}
	count := func(k int) (int, error) { return c.tok.Count(c.ctx, words.text(k)) }
	// lo: a word count known to be at most n tokens (0 words: the
	// overhead and the lead); hi: one known to be above n (0: none yet).
	lo, loCount, hi := 0, base, 0
	k := n - base // most words are one token
	for calls := 0; calls < 64; calls++ {
		cnt, err := count(k)
		if err != nil {
			return "", err
		}
		if cnt == n {
			// The longest prefix of n tokens: a word that adds no token
			// would make the prefix ambiguous, so keep extending while the
			// count stays n.
			for {
				c2, err := count(k + 1)
				if err != nil {
					return "", err
				}
				if c2 != n {
					return words.text(k), nil
				}
				k++
			}
		}
		if cnt < n {
			lo, loCount = k, cnt
		} else {
			hi = k
		}
		if hi != 0 && hi == lo+1 {
			break
		}
		switch {
		case hi == 0:
			k = lo + max(1, n-loCount)
		default:
			k = lo + max(1, (hi-lo)/2)
		}
	}
	if hi != lo+1 {
		return "", fmt.Errorf("no word count gives %d tokens within 64 tokenizer calls", n)
	}
	// No word count gives n: the next word adds more than one token. Add
	// single-token fillers to the longest prefix below n.
	text, cnt := words.text(lo), loCount
	for _, f := range fillers {
		for cnt < n {
			c2, err := c.tok.Count(c.ctx, text+f)
			if err != nil {
				return "", err
			}
			if c2 > n || c2 <= cnt {
				break // this filler overshoots (or adds nothing): try the next
			}
			text, cnt = text+f, c2
		}
		if cnt == n {
			return text, nil
		}
	}
	return "", fmt.Errorf("could not build a prompt of exactly %d tokens: %d is the closest below", n, cnt)
}

// wordStream is one prompt's words, drawn from its own generator so that
// calibration can take as many as it needs without shifting later prompts.
// lead, when set, opens every text: the prompt's shared prefix.
type wordStream struct {
	rng   *rand.Rand
	words []string
	lead  string
}

func newWordStream(seed uint64) *wordStream {
	return &wordStream{rng: rand.New(rand.NewPCG(seed, 0x0dd5eed))}
}

// text is the lead and the first k words, joined by spaces.
func (w *wordStream) text(k int) string {
	for len(w.words) < k {
		w.words = append(w.words, vocabulary[w.rng.IntN(len(vocabulary))])
	}
	switch {
	case w.lead == "":
		return strings.Join(w.words[:k], " ")
	case k == 0:
		return w.lead
	}
	return w.lead + " " + strings.Join(w.words[:k], " ")
}

// HashPrompts is the SHA-256 of the prompt set: of the first k prompts a
// generator yields, each written as "<input tokens requested> <max tokens>
// <text length>:<text>\n". Two runs whose generators have the same seed,
// distributions and tokenizer show the same hash: it proves they sent the
// same prompts in the same order (the first k of them; a longer run sends
// more of the same sequence).
func HashPrompts(next func() (Prompt, error), k int) (string, error) {
	h := sha256.New()
	for range k {
		p, err := next()
		if err != nil {
			return "", err
		}
		h.Write([]byte(strconv.Itoa(p.InputTokens) + " " + strconv.Itoa(p.OutputTokens) + " " + strconv.Itoa(len(p.Text)) + ":"))
		h.Write([]byte(p.Text))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HashedPrompts is the number of prompts HashPrompts covers in the info
// metric.
const HashedPrompts = 64
