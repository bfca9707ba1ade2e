// Package plan builds what a load sends, the same way for the live
// workloads, /probe modules, bench repeats and the load harness: the
// open-loop schedule and its wire ceiling, the request template that turns a
// prompt into a request (the sampling parameters, the timeout), and the
// known-answer requests with their judge.
//
// The flow is one way: configuration -> plan -> schedule and requests ->
// client -> observation -> observers.
package plan

import (
	"context"
	"hash/fnv"
	"regexp"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/arrival"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// DefaultDegradedLag is the schedule lag p99 above which a measurement is
// flagged degraded, and the slack the wire ceiling gives a late client
// (--probe.degraded-lag's default; bench and the load harness use it).
const DefaultDegradedLag = 10 * time.Millisecond

// OpenLoop is an open-loop arrival schedule with its rate ceiling: the
// schedule spaces arrivals at least 1/MaxRate apart, and the ceiling refuses
// a late client's overdue arrivals rather than sending them in a burst.
type OpenLoop struct {
	Schedule *arrival.Schedule
	// Ceiling says whether one more request may go now (never blocks).
	Ceiling interface{ Allow() bool }
	MaxRate float64
}

// Open builds the schedule of a (validated) arrival configuration from seed,
// and its wire ceiling with the slack of degradedLag.
func Open(c config.Arrival, seed int64, degradedLag time.Duration) (OpenLoop, error) {
	s, err := arrival.New(c, seed)
	if err != nil {
		return OpenLoop{}, err
	}
	return OpenLoop{Schedule: s, Ceiling: Ceiling(s.MaxRate(), degradedLag), MaxRate: s.MaxRate()}, nil
}

// ArrivalSeed is the seed of a live workload's arrival stream: its prompt
// seed mixed with its name (FNV-1a), so that two workloads of one rate and
// one prompt seed do not send in lockstep, each still the same stream on
// every start. The bench seeds its cells its own way (bench.seed).
func ArrivalSeed(promptSeed int64, workload string) int64 {
	h := fnv.New64a()
	h.Write([]byte(workload))
	return promptSeed ^ int64(h.Sum64())
}

// Ceiling is the wire ceiling of a load whose schedule never exceeds
// maxRate (an open loop's, a replay's): a client late by less than
// degradedLag loses nothing; a later one has its overdue arrivals refused.
func Ceiling(maxRate float64, degradedLag time.Duration) interface{ Allow() bool } {
	return arrival.NewWireCeiling(maxRate, degradedLag)
}

// ReplayCeiling is Ceiling with room for burst sends at one instant (a
// replay's rows that share an instant in its trace: replay.Source.Burst).
func ReplayCeiling(maxRate float64, degradedLag time.Duration, burst int) interface{ Allow() bool } {
	return arrival.NewWireCeilingBurst(maxRate, degradedLag, burst)
}

// Template turns prompts into the requests the client sends.
type Template struct {
	Sampling config.Sampling
	// Timeout bounds each request, send to last byte; 0: only the context.
	Timeout time.Duration
	// Kinds, when set, are the tools, response format and images every
	// request carries, and the judge of its answer (NewKinds).
	Kinds *Kinds
}

// Request is the request of a synthetic prompt: its text, its output length
// as max_tokens, and the sampling parameters.
func (t Template) Request(p prompt.Prompt) *client.Request {
	r := &client.Request{
		Prompt:      p.Text,
		MaxTokens:   p.OutputTokens,
		IgnoreEOS:   t.Sampling.IgnoreEOS,
		MinTokens:   t.Sampling.MinTokens,
		Temperature: t.Sampling.Temperature,
		TopP:        t.Sampling.TopP,
		Seed:        t.Sampling.Seed,
		Timeout:     t.Timeout,
	}
	t.Kinds.apply(r)
	return r
}

// KnownAnswer is the request of a known-answer check. Temperature is 0
// unless the sampling sets one: a known answer wants the most likely
// answer. The vLLM length extensions are not sent: the answer ends where the
// model ends it. The answer's text is kept for Judge.
func (t Template) KnownAnswer(text string, maxTokens int) *client.Request {
	temp := t.Sampling.Temperature
	if temp == nil {
		zero := 0.0
		temp = &zero
	}
	return &client.Request{
		Prompt:      text,
		MaxTokens:   maxTokens,
		Temperature: temp,
		TopP:        t.Sampling.TopP,
		Seed:        t.Sampling.Seed,
		KeepText:    true,
		Timeout:     t.Timeout,
	}
}

// Results of a known-answer check.
const (
	// Pass: a successful answer matched the pattern.
	Pass = "pass"
	// Fail: a successful answer that did not match.
	Fail = "fail"
	// Error: no successful answer.
	Error = "error"
)

// Judge classifies a finished known-answer request: Pass when a successful
// answer matches pattern anywhere (Go RE2), Fail when it does not, Error when
// no successful answer came. pattern nil compiles expect (a configuration
// built in code rather than parsed).
func Judge(pattern *regexp.Regexp, expect string, o *observation.Request) string {
	if o.Outcome != observation.Success {
		return Error
	}
	if pattern == nil {
		pattern = regexp.MustCompile(expect)
	}
	if pattern.MatchString(o.Text) {
		return Pass
	}
	return Fail
}

// Tokenizer finds target t's tokenizer endpoint, the one prompt calibration
// counts against (its flavor says whether prompts go through a chat
// template): nil and no error when the server has none;
// prompt.ErrTokenizerUnreachable when it did not answer at all.
func Tokenizer(ctx context.Context, t *config.Target) (*prompt.ServerTokenizer, error) {
	flavor, err := client.ParseFlavor(string(t.Flavor))
	if err != nil {
		return nil, err
	}
	return prompt.DetectTokenizer(ctx, prompt.Endpoint{BaseURL: t.URL, Model: t.Model,
		BearerToken: string(t.BearerToken), Headers: t.Headers, Chat: flavor.Chat()})
}

// Prompts is the seeded generator of prompts of exact lengths drawn from in
// and out, calibrated against tok (nil: estimates, N words for N tokens).
// ctx bounds its tokenizer calls for as long as it is used.
func Prompts(ctx context.Context, tok *prompt.ServerTokenizer, in, out config.Distribution, seed int64) (*prompt.Calibrated, error) {
	var counter prompt.Counter
	kind := prompt.TokenizerEstimate
	if tok != nil {
		counter, kind = tok, tok.Kind()
	}
	return prompt.NewCalibrated(ctx, in, out, seed, counter, kind)
}
