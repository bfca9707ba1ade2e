package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
)

// Log-probabilities. The simulated model gives every token after the first
// a deterministic log-probability, a function of the seed, the token and
// every token before it (its context), so that a client's perplexity over a
// fixed text can be checked against the value the simulator computes itself
// (ExpectedPerplexity). The first token of a sequence has no context and no
// log-probability, as in every engine.
//
// Token i >= 1 of ids gets
//
//	logprob(i) = -(LogprobBase + LogprobSpread*u(i)) - penalty
//
// where u(i) in [0, 1) is the top 53 bits, over 2^53, of SplitMix64 of the
// context hash xor the token's id times 0x9e3779b97f4a7c15; the context
// hash is the FNV-1a 64 step of the block hashes (tokenizer.go: xor a byte,
// multiply by 1099511628211), from 14695981039317130211, over the 8
// little-endian bytes of the seed xor 0x10960b5a17, then the 4
// little-endian bytes of each of ids[0..i-1]; and
// penalty is Faults.LogprobPenalty, the degradation fault: a model that
// lost penalty nats on every token has a perplexity exp(penalty) times
// higher. Generated tokens get theirs from the same rule, over the prompt
// and the tokens generated before them.

// The range of the simulated log-probabilities, in nats: every value lies in
// (-(LogprobBase+LogprobSpread), -LogprobBase] before the penalty. The mean
// is about -(LogprobBase + LogprobSpread/2), a perplexity near 12, the order
// of a mid-size model's on plain prose.
const (
	LogprobBase   = 0.25
	LogprobSpread = 4.5
)

// MaxLogprobPenalty bounds Faults.LogprobPenalty (nats per token): beyond
// it a perplexity overflows nothing but means nothing either.
const MaxLogprobPenalty = 50

// logprobSalt separates the context hash from the other hashes of a prompt
// (promptKey, the block hashes), which start from the same offset.
const logprobSalt = 0x10960b5a17

// contextStart is the context hash of a sequence before its first token.
func contextStart(seed uint64) uint64 { return fnv64aUint(fnv64Offset, seed^logprobSalt, 8) }

// tokenLogprob is the log-probability of token id after the context whose
// hash is ctx, before any penalty.
func tokenLogprob(ctx uint64, id int) float64 {
	u := float64(hashmix.Mix64(ctx^uint64(id)*0x9e3779b97f4a7c15)>>11) / (1 << 53)
	return -(LogprobBase + LogprobSpread*u)
}

// TokenLogprobs returns the log-probability of every token of ids under
// seed, with penalty nats subtracted from each: out[0] is NaN (the first
// token has no context), out[i] for i >= 1 is as the package documentation
// defines it.
func TokenLogprobs(seed uint64, ids []int, penalty float64) []float64 {
	out := make([]float64, len(ids))
	ctx := contextStart(seed)
	for i, id := range ids {
		if i == 0 {
			out[i] = math.NaN()
		} else {
			out[i] = tokenLogprob(ctx, id) - penalty
		}
		ctx = fnv64aUint(ctx, uint64(id), 4)
	}
	return out
}

// ExpectedPerplexity is the ground truth of a perplexity probe: the
// perplexity, exp of minus the mean log-probability, of the tokens of the
// completion prompt text after the first, as the simulator with this seed
// and LogprobPenalty penalty scores them, and how many tokens that is. A
// text of fewer than two tokens has no perplexity (NaN, 0).
func ExpectedPerplexity(seed uint64, text string, penalty float64) (perplexity float64, scored int) {
	lps := TokenLogprobs(seed, AppendTokenIDs(nil, text), penalty)
	if len(lps) < 2 {
		return math.NaN(), 0
	}
	var sum float64
	for _, lp := range lps[1:] {
		sum += lp
	}
	n := len(lps) - 1
	return math.Exp(-sum / float64(n)), n
}

// ExpectedPerplexity is the package's ExpectedPerplexity for this
// simulator: its seed and the fault injection in force now.
func (s *Simulator) ExpectedPerplexity(text string) (perplexity float64, scored int) {
	return ExpectedPerplexity(s.cfg.Seed, text, s.Faults().LogprobPenalty)
}

// sequenceLogprobs is the log-probability of every token of a request whose
// content key is key: its prompt ids, then its generated tokens
// 0..produced-1 (whose ids are their words' ids), under the request's
// penalty. Index 0 is NaN.
func sequenceLogprobs(seed, key uint64, prompt []int, produced int, penalty float64) []float64 {
	ids := make([]int, 0, len(prompt)+produced)
	ids = append(ids, prompt...)
	for i := range produced {
		ids = append(ids, TokenID(outputPiece(key, i)[1:]))
	}
	return TokenLogprobs(seed, ids, penalty)
}

// appendLogprob renders a log-probability as JSON: null for NaN (the first
// token), else the shortest decimal that reads back to it.
func appendLogprob(b []byte, lp float64) []byte {
	if math.IsNaN(lp) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, lp, 'g', -1, 64)
}

// promptPieces are the texts of a completion prompt's tokens, as a response
// that echoes them lists them: the words of the prompt text; for a prompt
// sent as token ids, "token_id:N", as vLLM writes tokens it does not
// detokenize.
func promptPieces(text *string, ids []int) []string {
	if text != nil {
		return strings.Fields(*text)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "token_id:" + strconv.Itoa(id)
	}
	return out
}

// completionLogprobParams reads a completions request's echo, logprobs and
// prompt_logprobs into p, as vLLM validates them: counts from 0 to
// maxLogprobsParam. The simulator renders log-probabilities in
// non-streamed answers only, so a streamed request that asks for them is
// refused rather than answered without them.
func completionLogprobParams(p *genParams, req *generateRequest) error {
	p.echo = req.Echo
	if raw := bytes.TrimSpace(req.Logprobs); len(raw) > 0 && string(raw) != "null" {
		n, err := strconv.Atoi(string(raw))
		if err != nil || n < 0 || n > maxLogprobsParam {
			return fmt.Errorf("logprobs must be an integer between 0 and %d", maxLogprobsParam)
		}
		p.logprobs = n
	}
	if req.PromptLogprobs != nil {
		if n := *req.PromptLogprobs; n < 0 || n > maxLogprobsParam {
			return fmt.Errorf("prompt_logprobs must be between 0 and %d, got %d", maxLogprobsParam, n)
		}
		p.promptLogprobs = *req.PromptLogprobs
	}
	if !p.wantsLogprobs() {
		return nil
	}
	if p.stream {
		return errors.New("the simulator serves echo, logprobs and prompt_logprobs without streaming only (\"stream\": false)")
	}
	p.promptIDs = p.ids
	p.promptText = promptString(req.Prompt)
	return nil
}

// promptString is a completions prompt's text when it was sent as a string
// (or an array of one string); nil for token ids.
func promptString(raw json.RawMessage) *string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return &s
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil && len(ss) == 1 {
		return &ss[0]
	}
	return nil
}

// completionLogprobsJSON is vLLM's CompletionLogProbs: one entry per token
// of the answer's text (the echoed prompt's, then the generated ones).
// top_logprobs holds the token itself only: the simulated model has no
// distribution over alternatives.
type completionLogprobsJSON struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

// appendCompletionLogprobs renders a completions choice's logprobs member:
// null when the request did not ask for them; else the prompt's tokens
// when it echoes them, then the produced tokens, each with its
// log-probability (null for the first token of the sequence).
func (s *Simulator) appendCompletionLogprobs(b []byte, p *genParams, produced int, penalty float64) []byte {
	if p.logprobs < 0 {
		return append(b, "null"...)
	}
	lps := sequenceLogprobs(s.cfg.Seed, p.key, p.promptIDs, produced, penalty)
	var out completionLogprobsJSON
	offset := 0
	add := func(token string, at int, lp float64) {
		out.Tokens = append(out.Tokens, token)
		out.TextOffset = append(out.TextOffset, at)
		if math.IsNaN(lp) {
			out.TokenLogprobs = append(out.TokenLogprobs, nil)
			out.TopLogprobs = append(out.TopLogprobs, nil)
			return
		}
		v := lp
		out.TokenLogprobs = append(out.TokenLogprobs, &v)
		out.TopLogprobs = append(out.TopLogprobs, map[string]float64{token: lp})
	}
	if p.echo {
		pieces := promptPieces(p.promptText, p.promptIDs)
		text := ""
		if p.promptText != nil {
			text = *p.promptText
		}
		pos := 0
		for i, w := range pieces {
			at := pos
			if j := strings.Index(text[pos:], w); p.promptText != nil && j >= 0 {
				at = pos + j
				pos = at + len(w)
			}
			add(w, at, lps[i])
		}
		offset = len(text)
	}
	for i := range produced {
		piece := outputPiece(p.key, i)
		add(piece, offset, lps[len(p.promptIDs)+i])
		offset += len(piece)
	}
	j, _ := json.Marshal(out)
	return append(b, j...)
}

// promptLogprobJSON is one entry of vLLM's prompt_logprobs: the prompt
// token's log-probability, its rank (1: the simulated model has no
// alternatives to rank it against) and its text.
type promptLogprobJSON struct {
	Logprob      float64 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// appendPromptLogprobs renders vLLM's prompt_logprobs: null for the first
// token, then for each prompt token {"<id>": {logprob, rank, decoded_token}}.
func (s *Simulator) appendPromptLogprobs(b []byte, p *genParams, penalty float64) []byte {
	lps := TokenLogprobs(s.cfg.Seed, p.promptIDs, penalty)
	pieces := promptPieces(p.promptText, p.promptIDs)
	out := make([]map[string]promptLogprobJSON, len(lps))
	for i, lp := range lps {
		if i == 0 {
			continue
		}
		out[i] = map[string]promptLogprobJSON{strconv.Itoa(p.promptIDs[i]): {Logprob: lp, Rank: 1, DecodedToken: pieces[i]}}
	}
	j, _ := json.Marshal(out)
	return append(b, j...)
}
