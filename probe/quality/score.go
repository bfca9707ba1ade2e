package quality

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/client"
)

// Dialects: how a request for prompt log-probabilities is asked and read.
const (
	// DialectOpenAIEcho is POST /v1/completions with "echo": true,
	// "logprobs": 1 and "max_tokens": 1, read from
	// choices[0].logprobs.token_logprobs (the prompt's tokens, the first
	// null, then the generated one), cut at usage.prompt_tokens: vLLM, and
	// any server that implements the OpenAI completions API's echo.
	DialectOpenAIEcho = "openai-echo"
	// DialectSGLang is SGLang's POST /generate with "return_logprob": true
	// and "logprob_start_len": 0, read from meta_info.input_token_logprobs
	// ([logprob, id, text] per prompt token, the first null).
	DialectSGLang = "sglang"
	// DialectTGI is TGI's POST /generate with parameters.details and
	// parameters.decoder_input_details, read from details.prefill
	// ({id, text, logprob} per prompt token, the first null).
	DialectTGI = "tgi"
)

// Dialects lists every dialect. Which one a flavor's servers speak is a
// fact of the flavor (config.FlavorFacts.PerplexityDialect).
var Dialects = []string{DialectOpenAIEcho, DialectSGLang, DialectTGI}

// Failure reasons: the reason label of
// infer_probe_perplexity_failures_total, a closed set.
const (
	// ReasonUnsupported: the target's API cannot return prompt
	// log-probabilities (config.PerplexityUnsupported says why).
	ReasonUnsupported = "unsupported"
	// ReasonTimeout: the score's deadline passed first.
	ReasonTimeout = "timeout"
	// ReasonConnection: no answer: the connection could not be made or
	// broke.
	ReasonConnection = "connection"
	// ReasonHTTPStatus: the server answered with a status other than 200.
	ReasonHTTPStatus = "http_status"
	// ReasonBadResponse: the answer is not the dialect's JSON, is larger
	// than MaxResponseBytes, has more than MaxTokens entries, or holds a
	// value that is not a log-probability (positive, or not a number).
	ReasonBadResponse = "bad_response"
	// ReasonNoLogprobs: the answer carries no prompt log-probabilities: a
	// server that ignores echo, or TGI 3 and later started without
	// --enable-prefill-logprobs.
	ReasonNoLogprobs = "no_logprobs"
	// ReasonIncomplete: some token after the first has no log-probability
	// (a server that does not recompute its prefix cache's tokens), the
	// entries do not match the server's own prompt token count, or the
	// text is one token: the perplexity would be over a different set of
	// tokens, not comparable, so none is reported.
	ReasonIncomplete = "incomplete"
)

// Reasons lists every failure reason.
var Reasons = []string{ReasonUnsupported, ReasonTimeout, ReasonConnection, ReasonHTTPStatus,
	ReasonBadResponse, ReasonNoLogprobs, ReasonIncomplete}

// Bounds of one answer.
const (
	// MaxResponseBytes bounds the answer's body, which is read whole: a
	// score's memory is some 3.5 times its body (measured: 19 MB for a
	// 5.4 MB answer of MaxTokens entries; 175 kB for the reference text's).
	// vLLM's echo answer holds 80 to 150 bytes per token (the token, its
	// log-probability, its top log-probabilities and offset): MaxTokens
	// entries fit.
	MaxResponseBytes = 8 << 20
	// MaxTokens bounds the log-probability entries read from an answer.
	MaxTokens = 1 << 16
	// maxErrorBody bounds the part of an error body quoted in an Error.
	maxErrorBody = 512
	// maxLogprob tolerates the rounding of a log-probability of 0 (a
	// certain token) written as a tiny positive number.
	maxLogprob = 1e-6
)

// Error is a failed score, with its reason (one of Reasons).
type Error struct {
	Reason     string
	HTTPStatus int // the answer's status; 0 without one
	Err        error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(reason string, status int, format string, args ...any) *Error {
	return &Error{Reason: reason, HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// Score is one perplexity measurement: a text's tokens scored by a server.
type Score struct {
	// Perplexity is exp(-MeanLogprob): the server's model would be as
	// unsure of each token of the text as if it chose uniformly among
	// Perplexity tokens.
	Perplexity float64
	// MeanLogprob is the mean natural-log probability of the scored
	// tokens, in nats (at most 0).
	MeanLogprob float64
	// Tokens is how many tokens were scored: every token of the text as
	// the server tokenized it (a BOS token it adds included), but the
	// first, which has no context.
	Tokens  int
	Dialect string
	Text    Text
	// HTTPStatus is the answer's status (200).
	HTTPStatus int
	// Duration is the time from send to the last byte of the answer.
	Duration time.Duration
}

// Doer sends a request: an *http.Client, with the caller's transport (the
// prober's checks every address it dials).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// DialectFor is the dialect of a flavor, as its facts state it, or a
// ReasonUnsupported Error saying why the flavor has none.
func DialectFor(flavor string) (string, error) {
	if facts, ok := config.Flavor(flavor).Facts(); ok && facts.PerplexityDialect != "" {
		if !slices.Contains(Dialects, facts.PerplexityDialect) {
			// TestFlavorsAgree keeps this from happening.
			return "", fail(ReasonUnsupported, 0, "the %s flavor's perplexity dialect %q is not one this version speaks (%v)", flavor, facts.PerplexityDialect, Dialects)
		}
		return facts.PerplexityDialect, nil
	}
	_, why := config.PerplexityCapable(config.Flavor(flavor))
	return "", fail(ReasonUnsupported, 0, "the %s API cannot return prompt log-probabilities: %s", flavor, why)
}

// ScoreText asks t for the log-probabilities of text's tokens and computes
// their perplexity. It sends one request, bounded by ctx, and reads at most
// MaxResponseBytes of the answer and MaxTokens entries from it. A failure
// is an *Error; the target's bearer token never appears in it.
func ScoreText(ctx context.Context, d Doer, t *client.Target, text Text) (Score, error) {
	flavor := client.OpenAIChat.Name()
	if t.Flavor != nil {
		flavor = t.Flavor.Name()
	}
	dialect, err := DialectFor(flavor)
	if err != nil {
		return Score{}, err
	}
	req, err := newRequest(ctx, dialect, t, text)
	if err != nil {
		return Score{}, fail(ReasonBadResponse, 0, "building the request: %v", err)
	}
	start := time.Now()
	sc, err := send(ctx, d, req, dialect, t.BearerToken)
	if err != nil {
		return Score{}, err
	}
	sc.Duration, sc.Dialect, sc.Text = time.Since(start), dialect, text
	return sc, nil
}

// newRequest builds the dialect's request for text's log-probabilities.
// One token is generated (vLLM and TGI refuse fewer), greedily where the
// API lets the temperature be 0, so that the request is as short as the
// API allows.
func newRequest(ctx context.Context, dialect string, t *client.Target, text Text) (*http.Request, error) {
	root := config.RootURL(t.BaseURL)
	var url string
	var body map[string]any
	switch dialect {
	case DialectOpenAIEcho:
		url = root + "/v1/completions"
		body = map[string]any{"prompt": text.Body, "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0, "stream": false}
	case DialectSGLang:
		url = root + "/generate"
		body = map[string]any{"text": text.Body, "return_logprob": true, "logprob_start_len": 0, "stream": false,
			"sampling_params": map[string]any{"max_new_tokens": 1, "temperature": 0}}
	case DialectTGI:
		url = root + "/generate"
		body = map[string]any{"inputs": text.Body,
			"parameters": map[string]any{"max_new_tokens": 1, "details": true, "decoder_input_details": true}}
	}
	if t.Model != "" && dialect != DialectTGI {
		// TGI serves one model and has no model field in /generate;
		// SGLang routers pick the model by it.
		body["model"] = t.Model
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &buf)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	config.SetTargetHeaders(req, t.Headers, t.BearerToken)
	return req, nil
}

// send sends req and reads its answer into a Score (without the fields
// ScoreText fills).
func send(ctx context.Context, d Doer, req *http.Request, dialect, token string) (Score, error) {
	resp, err := d.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Score{}, fail(ReasonTimeout, 0, "%s", redact(err.Error(), token))
		}
		return Score{}, fail(ReasonConnection, 0, "%s", redact(err.Error(), token))
	}
	defer resp.Body.Close()
	status := resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Score{}, fail(ReasonTimeout, status, "reading the answer: %s", redact(err.Error(), token))
	case err != nil:
		return Score{}, fail(ReasonConnection, status, "reading the answer: %s", redact(err.Error(), token))
	case status != http.StatusOK:
		return Score{}, fail(ReasonHTTPStatus, status, "HTTP %d: %s", status, redact(excerpt(body, maxErrorBody), token))
	case len(body) > MaxResponseBytes:
		return Score{}, fail(ReasonBadResponse, status, "the answer is longer than %d bytes", MaxResponseBytes)
	}
	var acc accumulator
	switch dialect {
	case DialectOpenAIEcho:
		err = readOpenAIEcho(body, &acc)
	case DialectSGLang:
		err = readSGLang(body, &acc)
	case DialectTGI:
		err = readTGI(body, &acc)
	}
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.HTTPStatus = status
			return Score{}, e
		}
		return Score{}, fail(ReasonBadResponse, status, "%v", err)
	}
	return acc.score(status)
}

// accumulator sums the prompt's log-probabilities as they are read, so that
// no array of them is kept: entry 0 is skipped (no context), every other
// entry must be a log-probability.
type accumulator struct {
	entries int     // entries seen, the first included
	scored  int     // entries summed
	missing int     // entries after the first without a log-probability
	sum     float64 // of the scored log-probabilities, nats
}

// add takes entry i (entries come in order); lp nil is a null.
func (a *accumulator) add(lp *float64) error {
	i := a.entries
	if i >= MaxTokens {
		return fail(ReasonBadResponse, 0, "more than %d prompt log-probabilities", MaxTokens)
	}
	a.entries++
	switch {
	case i == 0:
		// The first token has no context; engines send null, and any
		// value sent is not part of the definition.
	case lp == nil:
		a.missing++
	case math.IsNaN(*lp) || math.IsInf(*lp, 0) || *lp > maxLogprob:
		return fail(ReasonBadResponse, 0, "prompt token %d has log-probability %v, not a log-probability", i, *lp)
	default:
		a.sum += min(*lp, 0)
		a.scored++
	}
	return nil
}

func (a *accumulator) score(status int) (Score, error) {
	switch {
	case a.entries == 0:
		return Score{}, fail(ReasonNoLogprobs, status, "the answer holds no prompt log-probabilities")
	case a.missing > 0:
		return Score{}, fail(ReasonIncomplete, status, "%d of the %d prompt tokens after the first have no log-probability", a.missing, a.entries-1)
	case a.scored == 0:
		return Score{}, fail(ReasonIncomplete, status, "the server tokenized the text as one token: nothing to score")
	}
	mean := a.sum / float64(a.scored)
	ppl := math.Exp(-mean)
	if math.IsInf(ppl, 0) || math.IsNaN(ppl) {
		// Finite log-probabilities whose mean is below about -709 nats a
		// token: exp overflows. No model that deserves a score says that;
		// reported as +Inf, the perplexity-rise alert (+Inf > 1.1 × +Inf)
		// would stop firing once the baseline is +Inf too.
		return Score{}, fail(ReasonBadResponse, status, "a mean log-probability of %g nats a token overflows the perplexity", mean)
	}
	return Score{Perplexity: ppl, MeanLogprob: mean, Tokens: a.scored, HTTPStatus: status}, nil
}

// walkArray calls each for every element of the JSON array raw, decoding
// one element at a time (so that memory holds one element, not the array).
// A null or absent raw is an empty array.
func walkArray(raw json.RawMessage, each func(dec *json.Decoder) error) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fmt.Errorf("expected an array, got %.40q", raw)
	}
	for dec.More() {
		if err := each(dec); err != nil {
			return err
		}
	}
	_, err := dec.Token() // ']'
	return err
}

// serverError turns an error member of an answer into a bad_response.
func serverError(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	return fail(ReasonBadResponse, 0, "the server reported an error: %s", excerpt(raw, maxErrorBody))
}

// readOpenAIEcho reads an echo answer: choices[0].logprobs.token_logprobs
// holds the prompt's tokens (usage.prompt_tokens of them) and then the
// generated token's.
func readOpenAIEcho(body []byte, acc *accumulator) error {
	var r struct {
		Choices []struct {
			Logprobs *struct {
				TokenLogprobs json.RawMessage `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens *int `json:"prompt_tokens"`
		} `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fail(ReasonBadResponse, 0, "not a completions answer: %v", err)
	}
	if err := serverError(r.Error); err != nil {
		return err
	}
	if len(r.Choices) == 0 || r.Choices[0].Logprobs == nil {
		return fail(ReasonNoLogprobs, 0, "the answer has no choices[0].logprobs: the server ignored echo or logprobs")
	}
	if r.Usage == nil || r.Usage.PromptTokens == nil {
		return fail(ReasonIncomplete, 0, "the answer has no usage.prompt_tokens: where the prompt's entries end is unknown")
	}
	prompt := *r.Usage.PromptTokens
	if prompt < 0 || prompt > MaxTokens {
		return fail(ReasonBadResponse, 0, "usage.prompt_tokens %d is not a token count", prompt)
	}
	i := 0
	err := walkArray(r.Choices[0].Logprobs.TokenLogprobs, func(dec *json.Decoder) error {
		var lp *float64
		if err := dec.Decode(&lp); err != nil {
			return fail(ReasonBadResponse, 0, "token_logprobs[%d]: %v", i, err)
		}
		i++
		if i > prompt {
			return nil // the generated token
		}
		return acc.add(lp)
	})
	if err != nil {
		return err
	}
	if i < prompt {
		// Without echo a server returns only the generated tokens: fewer
		// entries than the prompt has tokens.
		if i <= 1 {
			return fail(ReasonNoLogprobs, 0, "%d log-probabilities for a prompt of %d tokens: the server did not echo the prompt's", i, prompt)
		}
		return fail(ReasonIncomplete, 0, "%d log-probabilities for a prompt of %d tokens", i, prompt)
	}
	return nil
}

// readSGLang reads SGLang's meta_info.input_token_logprobs: [logprob, id,
// text] per prompt token, from position 0.
func readSGLang(body []byte, acc *accumulator) error {
	var r struct {
		MetaInfo *struct {
			PromptTokens       *int            `json:"prompt_tokens"`
			InputTokenLogprobs json.RawMessage `json:"input_token_logprobs"`
		} `json:"meta_info"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fail(ReasonBadResponse, 0, "not a /generate answer: %v", err)
	}
	if err := serverError(r.Error); err != nil {
		return err
	}
	if r.MetaInfo == nil {
		return fail(ReasonBadResponse, 0, "the answer has no meta_info")
	}
	i := 0
	err := walkArray(r.MetaInfo.InputTokenLogprobs, func(dec *json.Decoder) error {
		var e []json.RawMessage
		if err := dec.Decode(&e); err != nil || len(e) == 0 {
			return fail(ReasonBadResponse, 0, "input_token_logprobs[%d] is not [logprob, id, text]", i)
		}
		var lp *float64
		if err := json.Unmarshal(e[0], &lp); err != nil {
			return fail(ReasonBadResponse, 0, "input_token_logprobs[%d][0]: %v", i, err)
		}
		i++
		return acc.add(lp)
	})
	if err != nil {
		return err
	}
	if p := r.MetaInfo.PromptTokens; p != nil && acc.entries > 0 && acc.entries != *p {
		// logprob_start_len was not honoured: the window is not the whole
		// prompt.
		return fail(ReasonIncomplete, 0, "%d input log-probabilities for a prompt of %d tokens", acc.entries, *p)
	}
	return nil
}

// readTGI reads TGI's details.prefill: {id, text, logprob} per prompt
// token.
func readTGI(body []byte, acc *accumulator) error {
	var r struct {
		Details *struct {
			Prefill json.RawMessage `json:"prefill"`
		} `json:"details"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fail(ReasonBadResponse, 0, "not a /generate answer: %v", err)
	}
	if err := serverError(r.Error); err != nil {
		return err
	}
	if r.Details == nil {
		return fail(ReasonNoLogprobs, 0, "the answer has no details")
	}
	i := 0
	err := walkArray(r.Details.Prefill, func(dec *json.Decoder) error {
		var e struct {
			Logprob *float64 `json:"logprob"`
		}
		if err := dec.Decode(&e); err != nil {
			return fail(ReasonBadResponse, 0, "details.prefill[%d]: %v", i, err)
		}
		i++
		return acc.add(e.Logprob)
	})
	if err != nil {
		return err
	}
	if acc.entries == 0 {
		return fail(ReasonNoLogprobs, 0, "details.prefill is empty: TGI 3 and later return prefill log-probabilities only when started with --enable-prefill-logprobs")
	}
	return nil
}

// excerpt is the start of b, for an error message.
func excerpt(b []byte, n int) string {
	return textcut.Cut(strings.TrimSpace(string(b[:min(len(b), 4*n)])), n)
}

// redact removes the bearer token from a message: a server may echo it.
func redact(msg, token string) string {
	if token == "" {
		return msg
	}
	return strings.ReplaceAll(msg, token, "<redacted>")
}
