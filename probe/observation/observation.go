// Package observation defines what the client saw of one request. It is the
// single record that every consumer reads: the continuous probe's metrics, the
// one-shot /probe registry and the bench report, so that all three tell the same
// truth. Clocks are absolute time.Time values taken from the monotonic clock of
// the process that sent the request.
package observation

import "time"

// Outcome classifies how a request ended. The set is closed and small so that it
// can be a label value with bounded cardinality.
type Outcome string

const (
	// Success: HTTP 2xx and a well-formed stream that reached the protocol's
	// end marker (for OpenAI SSE, data: [DONE]), or HTTP 2xx and one
	// well-formed JSON body: a server that ignored "stream": true and sent
	// its whole answer at once. Such an answer is complete, so it is a
	// success; it has no TPOT and no ITL (see Request.TPOT).
	Success Outcome = "success"
	// HTTP4xx and HTTP5xx: the server answered with a non-2xx status.
	HTTP4xx Outcome = "http_4xx"
	HTTP5xx Outcome = "http_5xx"
	// Timeout: the request's deadline passed before the stream ended.
	Timeout Outcome = "timeout"
	// StreamError: the body could not be parsed (malformed event, over-long
	// line, an error object inside the stream).
	StreamError Outcome = "stream_error"
	// Disconnected: the connection failed or closed before the stream ended,
	// or could not be made at all.
	Disconnected Outcome = "disconnected"
	// Dropped: the request was never sent (for example the in-flight cap was
	// full at its scheduled instant). DropReason says why.
	Dropped Outcome = "dropped"
	// Cancelled: the request was sent, and the exporter itself ended it
	// before the server did: its workload was stopped (a reload that
	// changed or removed it, a shutdown) and the request was still in
	// flight when the drain's grace period (--workload.drain-timeout)
	// ran out. The server did nothing wrong: it is not an error.
	Cancelled Outcome = "cancelled"
)

// Outcomes lists every outcome, for pre-initialising counters so that a
// series exists at zero before its first event (ByOutcome).
var Outcomes = outcomes[:]

// outcomes is Outcomes as an array, whose length sizes ByOutcome.
var outcomes = [...]Outcome{Success, HTTP4xx, HTTP5xx, Timeout, StreamError, Disconnected, Dropped, Cancelled}

// TokenSource says where OutputTokens came from.
type TokenSource string

const (
	// TokensFromUsage: the server's own count (usage chunk, details, eval_count).
	TokensFromUsage TokenSource = "usage"
	// TokensFromEvents: the client counted content-bearing events, because the
	// server reported no count. One event may carry more than one token.
	TokensFromEvents TokenSource = "events"
)

// Request is everything measured about one request, from its scheduled
// instant to its last byte.
type Request struct {
	// Seq numbers the request among its workload's arrivals, from 0 (the
	// runner sets it): it ties the request's events together for an
	// observer that follows each request (a replay's progress).
	Seq uint64
	// Scheduled is the instant the arrival process chose. Latencies start here,
	// so that a client that sends late cannot hide the server's latency
	// (coordinated omission).
	Scheduled time.Time
	// Sent is when the client began writing the request. Sent-Scheduled is the
	// schedule lag.
	Sent time.Time
	// FirstToken is when the first token was read (answer text, reasoning
	// or a tool call's name or arguments); zero if none arrived. Role-only
	// and empty chunks do not count.
	FirstToken time.Time
	// TokenTimes holds the read instant of every content-bearing event, the
	// first included. ITL is the gaps between consecutive entries.
	TokenTimes []time.Time
	// End is when the last byte of the response was read (or the failure
	// happened).
	End time.Time
	// FirstAnswer is when the first content event carrying answer text or
	// a tool call (not only reasoning) was read; zero if none. For a model
	// that reasons first, FirstToken is its first reasoning token and
	// FirstAnswer its first answer token (AIPerf's time to first output
	// token). A tool call is an answer: the turn of an agent that calls a
	// tool ends there.
	FirstAnswer time.Time
	// ReasoningEvents counts the content events that carried reasoning
	// text only (reasoning_content, reasoning, Ollama thinking).
	ReasoningEvents int
	// LastReasoning: the latest content event carried reasoning text only
	// (for an observer that hears each event as it arrives).
	LastReasoning bool
	// ToolCallEvents counts the content events that carried tool-call text
	// (a function's name or arguments). They are answer events: an event
	// is reasoning, or answer, and among the answer events some carry a
	// tool call.
	ToolCallEvents int
	// LastToolCall: the latest content event carried tool-call text.
	LastToolCall bool

	Outcome    Outcome
	DropReason string // set when Outcome is Dropped
	HTTPStatus int    // 0 when no response arrived
	Err        error  // the failure, for logs and /probe debug output

	PromptTokens int // from usage; 0 when unknown
	// CachedTokens is the server's count of the prompt tokens its prefix
	// cache served (usage prompt_tokens_details.cached_tokens, the
	// Responses API's input_tokens_details.cached_tokens, SGLang's
	// meta_info.cached_tokens); 0 when it reports none, or more than
	// PromptTokens (probe/client).
	CachedTokens int
	// OutputTokens is the server's usage count when it can be true, else
	// the content events (TokenSource), and never more than the
	// max_tokens the request asked for, when it asked for one (probe/client).
	OutputTokens int
	// ReasoningTokens is the server's count of reasoning tokens among the
	// output tokens (usage completion_tokens_details.reasoning_tokens); 0
	// when it reports none.
	ReasoningTokens int
	TokenSource     TokenSource
	// UsageNotBelieved: the server's usage count of output tokens (or of
	// reasoning tokens among them) cannot be true of the request: above
	// its max_tokens, or beyond what its content events could carry (the
	// client's bound, probe/client). OutputTokens is then the content
	// events counted (TokenSource events; at most max_tokens), and
	// ReasoningTokens 0, so that
	// a server that claims a billion tokens for four streamed ones reports
	// no billion tokens a second.
	UsageNotBelieved bool
	// ContentEvents is the number of content-bearing events, whatever the
	// token source. A response that was not streamed (one JSON body) has
	// exactly one: its whole answer.
	ContentEvents int
	// Text is the generated text, kept only when the caller asked for it
	// (known-answer checks).
	Text string
	// ToolCalls is the tool-call text the answer carried, each call's name
	// then its arguments, in the order the calls began, kept with Text (a
	// tool call is not answer text).
	ToolCalls string
	// Calls are the same calls one by one, each put together from its own
	// fragments however they were interleaved; their texts are
	// substrings of ToolCalls.
	Calls []ToolCall
	// StructuredCheck and ToolCallCheck are the validity of a structured
	// answer and of a tool call (one of ValidityResults), set for a
	// successful request whose workload asked for one (probe/validity); ""
	// when it was not checked.
	StructuredCheck string
	ToolCallCheck   string

	// RequestID is the X-Request-Id the request was sent with ("" when
	// none), by which the server's logs and spans name it.
	RequestID string
	// Trace is the W3C trace context it was sent with (zero: none), for
	// the OTLP spans (probe/otlp).
	Trace Trace
	// Stalled: the runner's stall scan found the request silent for
	// longer than its workload's stall_threshold at least once (what
	// infer_probe_stalls_total counts), set before Done.
	Stalled bool
	// Server is what the server's answer said of the request's own time
	// (its queue, its TTFT, its generation), where its API says it;
	// ClientOverhead joins it to this client's clock.
	Server ServerTimings
}

// TTFT is the time to first token, from the scheduled instant.
func (r *Request) TTFT() (time.Duration, bool) {
	if r.FirstToken.IsZero() || r.Scheduled.IsZero() {
		return 0, false
	}
	return r.FirstToken.Sub(r.Scheduled), true
}

// TTFA is the time to the first answer token, from the scheduled instant:
// for a reasoning model, the time until it starts answering.
func (r *Request) TTFA() (time.Duration, bool) {
	if r.FirstAnswer.IsZero() || r.Scheduled.IsZero() {
		return 0, false
	}
	return r.FirstAnswer.Sub(r.Scheduled), true
}

// E2E is the end-to-end latency, from the scheduled instant to the last byte.
func (r *Request) E2E() (time.Duration, bool) {
	if r.End.IsZero() || r.Scheduled.IsZero() {
		return 0, false
	}
	return r.End.Sub(r.Scheduled), true
}

// TPOT is the time per output token after the first:
// (end - first token) / (output tokens - 1). It is defined only for requests
// with at least two output tokens that did not all arrive in one content
// event: the whole answer in a single event (a body the server did not
// stream, or a stream that sent everything at once) shows no time between
// its tokens, and dividing its end-minus-first by the token count would
// report a TPOT of about zero.
//
// Reasoning the server counted but did not stream (HiddenReasoning: a
// hosted model that hides it) was generated before the first streamed
// token, so it is not in end - first token; dividing by it too would report
// the streamed pace many times too fast (200 hidden tokens before 20
// deltas 20 ms apart: 1.7 ms). TPOT is then the streamed pace: the time
// from the first to the last content event over the visible tokens
// (output less hidden reasoning) less one, and it is undefined with fewer
// than two visible tokens. The hidden reasoning's time is in TTFT and
// TTFA, which run to the first visible token.
//
// This is the one place the rule lives: the live metrics, /probe and the
// bench report all ask TPOT.
func (r *Request) TPOT() (time.Duration, bool) {
	if r.FirstToken.IsZero() || r.End.IsZero() || !r.timedTokens() {
		return 0, false
	}
	if hidden := r.HiddenReasoning(); hidden > 0 {
		visible := r.OutputTokens - hidden
		if visible < 2 || len(r.TokenTimes) == 0 {
			return 0, false
		}
		return r.TokenTimes[len(r.TokenTimes)-1].Sub(r.FirstToken) / time.Duration(visible-1), true
	}
	if r.OutputTokens < 2 {
		return 0, false
	}
	return r.End.Sub(r.FirstToken) / time.Duration(r.OutputTokens-1), true
}

// Reasoning is the request's reasoning tokens, by the one rule that the
// live metrics, /probe and the bench report all read: the server's count
// (ReasoningTokens) when it sent one, else the content events that carried
// reasoning only (ReasoningEvents: each at least a token, so a lower
// bound where a server packs several into one event), so that a server
// that streams its reasoning but does not count it (vLLM, Ollama) still
// shows it. 0 for a request that did not reason, or hid a reasoning it
// did not count.
func (r *Request) Reasoning() int {
	if r.ReasoningTokens > 0 {
		return r.ReasoningTokens
	}
	return r.ReasoningEvents
}

// HiddenReasoning is the reasoning tokens the server counted but did not
// stream: its count when no content event carried reasoning (OpenAI's
// reasoning models on chat, or the Responses API without reasoning
// summaries), else 0. They are output tokens without an event, generated
// before the first visible one; TPOT leaves them out.
func (r *Request) HiddenReasoning() int {
	if r.ReasoningEvents > 0 {
		return 0
	}
	return r.ReasoningTokens
}

// timedTokens reports whether the time between tokens was observed: false
// when the whole output came in one content event. A record that does not
// count its events (ContentEvents 0 beside a first token: not made by the
// client) is taken as timed.
func (r *Request) timedTokens() bool { return r.ContentEvents != 1 }

// ScheduleLag is how late the request was sent relative to its schedule.
func (r *Request) ScheduleLag() (time.Duration, bool) {
	if r.Sent.IsZero() || r.Scheduled.IsZero() {
		return 0, false
	}
	return r.Sent.Sub(r.Scheduled), true
}

// ITLs calls fn with each gap between consecutive content events. A
// response that arrived in one content event (not streamed) has none.
func (r *Request) ITLs(fn func(time.Duration)) {
	if !r.timedTokens() {
		return
	}
	for i := 1; i < len(r.TokenTimes); i++ {
		fn(r.TokenTimes[i].Sub(r.TokenTimes[i-1]))
	}
}

// The results of a validity check (Request.StructuredCheck and
// ToolCallCheck): a bounded set, a label's values.
const (
	// Valid: the answer parsed and matched its schema; the call named a
	// declared function whose parameters its arguments matched.
	Valid = "valid"
	// InvalidJSON: the answer or the call's arguments did not parse.
	InvalidJSON = "invalid_json"
	// SchemaMismatch: it parsed but did not match its schema.
	SchemaMismatch = "schema_mismatch"
	// UnknownTool: the call named a function the request did not declare.
	UnknownTool = "unknown_tool"
	// NoCall: the request offered tools and the answer called none.
	NoCall = "no_call"
)

// ValidityResults lists every validity result, in the order of their
// definitions.
var ValidityResults = []string{Valid, InvalidJSON, SchemaMismatch, UnknownTool, NoCall}
