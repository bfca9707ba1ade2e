// Package client sends one generation request to an inference server and
// measures it from the client side: when it was sent, when each content event
// was read, when the stream ended, how many tokens it carried and how it
// ended. It is the exporter's measuring instrument, so it reads the clock once
// per event, right after the event's last byte was parsed, and does little
// else on the hot path.
//
// The wire formats live behind the Flavor interface; this file owns timing,
// outcomes and the observation record, identically for every flavor.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/client/h1"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// UsageBelievable says whether a server's usage count of a request's
// output tokens can be true of the request and of what it streamed: at
// most the max_tokens it asked for (when it asked for a number; a
// recorded body's own, Request.sentMaxTokens), and at most what its content
// events could carry. An event carries a few tokens at most (a
// detokenizer that held back half a character, speculative decoding's
// accepted drafts: UsageTokensPerEvent), and a token is at least a byte of
// the text streamed, except the few a server strips from it (the end of
// sequence, reasoning and tool-call markers: UsageSlack); a whole answer
// in one body is bounded by its bytes. So usage <= max(4 × events, bytes)
// + 16, where Do counts as bytes the reasoning tokens a server said it
// spent without streaming any reasoning (a hosted model that hides it:
// the bound is then max_tokens). A server whose usage claimed 1e9 tokens
// for 4 streamed ones made 4e9 output tokens/s and a TPOT of 0 otherwise.
func UsageBelievable(usage, maxTokens, events, bytes int) bool {
	if maxTokens > 0 && usage > maxTokens {
		return false
	}
	return usage <= max(UsageTokensPerEvent*events, bytes)+UsageSlack
}

// The bound of UsageBelievable beyond max_tokens: tokens per content
// event, and tokens a server may count without streaming them.
const (
	UsageTokensPerEvent = 4
	UsageSlack          = 16
)

// sentMaxTokens is the cap on output tokens the request's body asked for:
// a recorded body's own (RawBody's max_completion_tokens, max_tokens or
// max_output_tokens; a replay's MaxTokens is then the trace's observed
// length, which was not sent), else MaxTokens; 0: none.
func (r *Request) sentMaxTokens() int {
	if r.rawSent {
		return r.rawMaxTokens
	}
	return r.MaxTokens
}

// maxEvents bounds the content events one request may deliver: four times
// its max_tokens (a server may split a token into several events), or 64k
// when max_tokens is not set.
func maxEvents(r *Request) int {
	if n := r.sentMaxTokens(); n > 0 {
		return 4*n + 16
	}
	return 1 << 16
}

// Target is one inference server endpoint.
type Target struct {
	Name    string
	BaseURL string // the server root, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted)
	Model   string // sent as "model"; omitted when empty
	Flavor  Flavor // nil means OpenAIChat
	// BearerToken is the API key, already read from its file by the config.
	// It is sent as "Authorization: Bearer", and never appears in logs or in
	// an observation's Err.
	BearerToken string
	// Headers are added to every request. A "Host" entry sets the Host
	// header.
	Headers map[string]string
}

// Request is one generation to ask for.
type Request struct {
	Prompt    string
	MaxTokens int // 0: the server's default; otherwise sent as max_tokens
	// IgnoreEOS and MinTokens are vLLM/SGLang extensions, sent only when set
	// (true, > 0) because other servers may reject unknown fields.
	IgnoreEOS   bool
	MinTokens   int
	Temperature *float64
	TopP        *float64
	Seed        *int64
	// Extra is merged into the JSON body last, so it can add fields and
	// override any field above.
	Extra map[string]any
	// RawBody, when set, is the whole JSON request body, sent as it is: a
	// replay of recorded traffic. The fields above are then ignored. So
	// that the request can be measured, "stream": true and
	// "stream_options": {"include_usage": true} are forced, and "model" is
	// set to the target's model when the target names one; a body that
	// already says so is sent byte for byte. Only the OpenAI flavors
	// honour it.
	RawBody []byte
	// KeepText keeps the generated answer text in the observation, for
	// known-answer checks, and the tool-call text (obs.ToolCalls), for the
	// validity checks. Reasoning text is not kept.
	KeepText bool
	// Attach is what the request carries beside its prompt (tools, a
	// response format, images), built once per workload; nil: nothing.
	Attach *Attachments
	// MaxTextBytes bounds the answer text KeepText keeps; 0 means
	// DefaultMaxTextBytes. It is checked as each event arrives: a server
	// that answers more ends the request as a stream error, so a target's
	// oversized answer costs at most this much memory (one event of up to
	// MaxLineBytes beside it), however long it streams.
	MaxTextBytes int
	// Timeout bounds the whole request, from send to last byte; 0 means
	// only the caller's context bounds it.
	Timeout time.Duration
	// RequestID, when set, is sent as X-Request-Id, so that the request can
	// be found in the server's logs (vLLM takes it as its request id).
	RequestID string
	// Trace, when valid, is sent as the W3C traceparent header, so that a
	// server that continues traces (vLLM's --otlp-traces-endpoint) makes
	// its spans of the request children of the client's (probe/otlp).
	Trace observation.Trace
	// TokenWindow, when positive, keeps only the read instants of the
	// last TokenWindow content events in obs.TokenTimes (ContentEvents
	// still counts them all): an observer that reads each gap as it
	// closes needs the last two, and a long stream's every instant is
	// 24 bytes a token held until it ends. 0 keeps every instant.
	TokenWindow int
	// prepared is the body Prepare encoded ahead; nil: encoded in Do.
	prepared *body
	// rawSent says RawBody is what the flavor sends (the OpenAI
	// flavors'), and rawMaxTokens is the cap on output tokens it asks
	// for (bodyMaxTokens; 0: none): set as the body is encoded, read as
	// its answer is (sentMaxTokens).
	rawSent      bool
	rawMaxTokens int
	// Events, when set, hears of the request while it runs, on the
	// goroutine of Do: so that a figure can be known when it happens, not
	// only when the request ends.
	Events Events
}

// Events are the moments of a request that the client reports as they
// happen. obs is the request's observation, filled so far; a method must
// not keep it past its call, nor block.
type Events interface {
	// Sent: the request is about to be written (obs.Sent is set).
	Sent(obs *observation.Request)
	// Content: a content event arrived; its instant is the last of
	// obs.TokenTimes and obs.ContentEvents counts it (1: the first token).
	// obs.LastReasoning says whether it carried reasoning text only, and
	// obs.LastToolCall whether it carried a tool call; obs.FirstAnswer is
	// set from the first event that carried answer text or a tool call (so
	// it equals the event's instant when this is that event), and
	// obs.ReasoningEvents and obs.ToolCallEvents count the reasoning-only
	// and the tool-call events so far, this one included.
	Content(obs *observation.Request)
}

// Options configure a Client.
type Options struct {
	// MaxConnsPerHost is the number of idle keep-alive connections kept per
	// server; size it to the in-flight cap so that steady load reuses
	// connections instead of dialing. It is deliberately not a hard cap on
	// open connections: a cap would queue requests inside the client, and
	// that wait would be measured as server latency. The in-flight cap
	// belongs to the caller. Default 64.
	MaxConnsPerHost int
	// MaxLineBytes bounds one SSE line, one event's data, and a
	// non-streamed JSON body. Default 1 MiB.
	MaxLineBytes int
	// Now is the clock; default time.Now. Tests pass a fake clock.
	Now func() time.Time
	// Transport replaces the client's own transport (for tests, or TLS
	// settings). When nil, the client builds one tuned for measurement.
	Transport http.RoundTripper
	// Dial opens every connection of the client's own transports (h1 and
	// its net/http fallback alike), so that a caller that must vet each
	// address (/probe's allow list) measures through them rather than a
	// transport of its own. Default a net.Dialer with a 30 s timeout and
	// keep-alive; ignored with Transport.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxHeaderBytes bounds a response's head on the client's own
	// transports; 0: each transport's default (h1's 1 MiB, net/http's
	// 10 MiB). Ignored with Transport.
	MaxHeaderBytes int
	// Wire chooses the client's own transport when Transport is nil:
	// WireH1 (the default: probe/client/h1 for the http and https targets
	// it supports, net/http for anything else) or WireNetHTTP (net/http
	// for every target). docs/benchmarks.md, "Transports", says why h1.
	Wire string
}

// defaultWire is Options.Wire's default. A variable only so that a build
// can set it (go test -ldflags=-X=...client.defaultWire=net/http runs a
// package's tests on net/http); nothing assigns it at run time.
var defaultWire = WireH1

// The client's own transports, as Options.Wire and Client.TransportName
// name them.
const (
	WireNetHTTP = "net/http"
	WireH1      = "h1"
	// WireCustom is the name of a transport given in Options.Transport.
	WireCustom = "custom"
)

// Defaults for Options.
const (
	DefaultMaxConnsPerHost = 64
	DefaultMaxLineBytes    = 1 << 20
	// DefaultMaxTextBytes bounds a kept answer when the request names no
	// bound. A known answer is matched in a few hundred bytes; 64 KiB is
	// some 16,000 tokens of English, far beyond any known-answer prompt's
	// max_tokens, and 64 KiB a request is what a /probe module's 100
	// concurrent checks can afford.
	DefaultMaxTextBytes = 64 << 10
	// errorBodyBytes bounds how much of a non-2xx body is kept in Err.
	errorBodyBytes = 4 << 10
	// drainBytes bounds how much is read after the end marker so that the
	// connection can go back to the keep-alive pool.
	drainBytes = 64 << 10
	// maxPreallocTokens caps the TokenTimes preallocation against a silly
	// MaxTokens.
	maxPreallocTokens = 1 << 16
)

// Client sends requests and records observations. It is safe for concurrent
// use.
type Client struct {
	http *http.Client
	// h1, when set, sends the requests it supports (probe/client/h1);
	// http sends the others, and wire names it.
	h1      *http.Client
	wire    string
	maxLine int
	now     func() time.Time
	// dial is the transport's dialer, and stash the connections Warm
	// opened for it (nil with Options.Transport).
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	stash *connStash
}

// New returns a Client.
func New(opts Options) *Client {
	if opts.MaxConnsPerHost <= 0 {
		opts.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Client{maxLine: opts.MaxLineBytes, now: opts.Now, wire: WireCustom}
	rt := opts.Transport
	if rt == nil {
		c.dial = opts.Dial
		if c.dial == nil {
			c.dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		c.stash = &connStash{}
		tr := newTransport(opts.MaxConnsPerHost, c.dialer)
		tr.MaxResponseHeaderBytes = int64(opts.MaxHeaderBytes)
		rt = tr
		c.wire = WireNetHTTP
		if opts.Wire == "" {
			opts.Wire = defaultWire
		}
		if opts.Wire == WireH1 {
			c.h1 = httpClient(h1.New(h1.Options{
				Dial:           c.rawDialer,
				MaxIdlePerHost: opts.MaxConnsPerHost,
				MaxHeaderBytes: opts.MaxHeaderBytes,
				// As net/http's buffer above: 1 KiB a connection.
				ReadBufferSize: 1 << 10,
			}))
		}
	}
	c.http = httpClient(rt)
	return c
}

func httpClient(rt http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: rt,
		// A 3xx is an answer to measure, not a hop to take: following
		// it would time two requests as one.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// TransportName names the transport that sends requests to t: WireH1
// for the targets probe/client/h1 supports when the client was built with
// it, WireNetHTTP, or WireCustom for Options.Transport.
func (c *Client) TransportName(t *Target) string {
	if c.h1 != nil && h1Supports(t.BaseURL) {
		return WireH1
	}
	return c.wire
}

// h1Supports says whether probe/client/h1 can send to baseURL.
func h1Supports(baseURL string) bool {
	u, err := url.Parse(baseURL)
	return err == nil && h1.Supports(&http.Request{URL: u})
}

// rawDialer is h1's dialer: a connection Warm opened if one is kept, else
// a new one (h1 writes a request in one call itself).
func (c *Client) rawDialer(ctx context.Context, network, addr string) (net.Conn, error) {
	if conn := c.stash.take(addr); conn != nil {
		return conn, nil
	}
	return c.dial(ctx, network, addr)
}

// dialer is the transport's DialContext: a connection Warm opened if one
// is kept, else a new one; either way a bodyConn.
func (c *Client) dialer(ctx context.Context, network, addr string) (net.Conn, error) {
	if conn := c.stash.take(addr); conn != nil {
		return bodyConn{conn}, nil
	}
	conn, err := c.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return bodyConn{conn}, nil
}

// newTransport builds a transport for measuring: keep-alive sized to the
// in-flight cap, no compression (bytes arrive as the server sent them, and no
// decompressor buffers a token), no proxy from the environment (a proxy
// would be measured as the server), HTTP/1.1 (one stream per connection, as
// benchmark clients use; HTTP/2 multiplexing would couple requests).
func newTransport(maxConns int, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		MaxIdleConns:        0, // no global limit; per host below
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		// 1 KiB each way instead of 4: a streamed event is a few hundred
		// bytes, a request's head and a short prompt fit, and a larger
		// body is written straight through. Both buffers live as long as
		// the connection, one per stream in flight.
		ReadBufferSize:  1 << 10,
		WriteBufferSize: 1 << 10,
	}
}

// Close closes idle connections. In-flight requests are not affected.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
	if c.h1 != nil {
		c.h1.CloseIdleConnections()
	}
	if c.stash != nil {
		c.stash.close()
	}
}

// ErrNoEndMarker is the error of a 2xx stream whose body ended cleanly but
// before the protocol's end marker ("data: [DONE]").
var ErrNoEndMarker = errors.New("stream ended before its end marker")

// HTTPError is a non-2xx answer.
type HTTPError struct {
	StatusCode int
	// Body is the start of the response body, at most 4 KiB.
	Body string
	// Location is the redirect target of a 3xx, which was not followed.
	Location string
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Location != "" {
		fmt.Fprintf(&b, " (redirect to %q not followed)", e.Location)
	}
	if body := strings.TrimSpace(e.Body); body != "" {
		fmt.Fprintf(&b, ": %s", body)
	}
	return b.String()
}

// Do sends r to t and records what happened in obs. The caller sets
// obs.Scheduled first; Do keeps it (and the TokenTimes capacity, for reuse)
// and overwrites every other field.
//
// Instants, each one clock read:
//   - Sent: immediately before the request is handed to the transport
//     (probe/client/h1 or net/http, whose RoundTrip writes it). On a cold connection the dial comes after Sent,
//     so it is part of the measured latency, as it is for a real user.
//   - FirstToken and TokenTimes: the instant the parser completed each
//     frame carrying non-empty content or reasoning text, before its JSON is
//     decoded. A body that was not streamed is one frame, read when its
//     last byte was: FirstToken equals End, and ContentEvents is 1, so the
//     request has no TPOT and no ITL.
//   - FirstAnswer: the instant of the first of those frames that carried
//     answer text (content, text, response), not only reasoning text
//     (reasoning_content, reasoning, thinking). A frame with both is an
//     answer frame. Without reasoning it equals FirstToken.
//   - End: the end marker's read instant, or the instant of the failure
//     (after reading at most 4 KiB of a non-2xx body).
//
// Outcomes:
//   - success: a 2xx stream that reached its end marker, or a 2xx JSON
//     body (application/json, for every flavor) or lone Ollama "done" line
//     from a server that did not stream: the answer is complete.
//   - http_4xx / http_5xx: a non-2xx status. A 3xx, which is never
//     followed, and any other status below 500 count as http_4xx: the
//     request as configured was not served, and HTTPStatus keeps the exact
//     code.
//   - timeout: r.Timeout or the context's deadline passed first.
//   - stream_error: malformed JSON, an over-long line or event, or an error
//     reported inside the stream.
//   - disconnected: the connection could not be made, was reset or closed,
//     or the body ended before the end marker. A context cancelled (not
//     timed out) by the caller is also reported as disconnected, with Err
//     wrapping context.Canceled so that the caller can tell.
//   - dropped: the request could not be built (DropReason "bad_request").
//
// Output tokens come from the server's usage count when it sent one (the
// largest, since counts are cumulative); otherwise, or when usage says 0
// although content arrived, or when the count cannot be true of the
// request (UsageBelievable: UsageNotBelieved is then set, and the usage's
// reasoning count dropped too), from the number of content events, and
// TokenSource says which. Either is at most the max_tokens the request's
// body asked for (sentMaxTokens), when it asked for one. Reasoning tokens are among the output tokens:
// ReasoningTokens is the server's count of them (usage
// completion_tokens_details.reasoning_tokens, the largest sent; 0 when it
// sent none), and ReasoningEvents the content events that carried reasoning
// text only, whatever the server counted. On a failed stream the counts are
// those read before the failure. When no 2xx body was read, the counts are 0
// and TokenSource is empty.
func (c *Client) Do(ctx context.Context, t *Target, r *Request, obs *observation.Request) {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	flavor := t.Flavor
	if flavor == nil {
		flavor = OpenAIChat
	}
	// Start from a clean record, keeping only the caller's schedule and the
	// TokenTimes memory for reuse.
	*obs = observation.Request{Seq: obs.Seq, Scheduled: obs.Scheduled, TokenTimes: obs.TokenTimes[:0]}

	req, err := flavor.NewRequest(ctx, t, r)
	if err != nil {
		obs.Outcome = observation.Dropped
		obs.DropReason = "bad_request"
		obs.Err = redact(err, t.BearerToken)
		return
	}
	if r.RequestID != "" {
		req.Header.Set("X-Request-Id", r.RequestID)
		obs.RequestID = r.RequestID
	}
	if r.Trace.Valid() {
		// The canonical key, set directly: once per request, a string
		// of 55 bytes and its slice.
		req.Header["Traceparent"] = []string{r.Trace.Traceparent()}
		obs.Trace = r.Trace
	}
	want := min(r.sentMaxTokens(), maxPreallocTokens)
	if r.TokenWindow > 0 {
		want = r.TokenWindow
	}
	if cap(obs.TokenTimes) < want {
		obs.TokenTimes = make([]time.Time, 0, want)
	}

	obs.Sent = c.now()
	if r.Events != nil {
		r.Events.Sent(obs)
	}
	hc := c.http
	if c.h1 != nil && h1.Supports(req) {
		hc = c.h1
	}
	resp, err := hc.Do(req)
	if err != nil {
		obs.End = c.now()
		obs.Outcome, err = classify(ctx, err)
		obs.Err = redact(err, t.BearerToken)
		return
	}
	defer resp.Body.Close()
	obs.HTTPStatus = resp.StatusCode

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
		obs.End = c.now()
		obs.Outcome = observation.HTTP4xx
		if resp.StatusCode >= 500 {
			obs.Outcome = observation.HTTP5xx
		}
		herr := &HTTPError{StatusCode: resp.StatusCode, Body: string(body)}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			herr.Location = resp.Header.Get("Location")
		}
		obs.Err = redact(herr, t.BearerToken)
		// Read a little more so a short error body frees its connection.
		_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
		return
	}

	c.readStream(ctx, flavor.NewDecoder(resp.Body, resp.Header, c.maxLine), r, obs)
	if obs.Err != nil {
		obs.Err = redact(obs.Err, t.BearerToken)
	}
	if obs.Outcome == observation.Success {
		// Let the body reach EOF (the chunked terminator follows [DONE]
		// immediately) so the connection is reused. This is not timed:
		// End was the end marker.
		_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	}
}

// readStream reads frames until the end marker or a failure. It is the hot
// path: one clock read per frame, no allocation per frame beyond the
// TokenTimes append.
func (c *Client) readStream(ctx context.Context, dec Decoder, r *Request, obs *observation.Request) {
	s := stream{r: r, obs: obs, textLimit: r.MaxTextBytes}
	if s.textLimit <= 0 {
		s.textLimit = DefaultMaxTextBytes
	}
	var ch Chunk
	for {
		err := dec.Next()
		// The frame's read instant: after its last byte arrived, before
		// it is decoded, and before anything that follows is read.
		at := c.now()
		if err != nil {
			if err == io.EOF {
				err = ErrNoEndMarker
			}
			outcome, err := classify(ctx, err)
			s.fail(at, outcome, err)
			break
		}
		ch.Reset()
		if err := dec.Decode(&ch); err != nil {
			s.fail(at, observation.StreamError, err)
			break
		}
		if s.frame(&ch, at) {
			break
		}
	}
	s.count()
	if r.KeepText {
		// A Builder's String is its buffer, not a copy of it.
		obs.Text = s.text.String()
		obs.ToolCalls, obs.Calls = s.calls.result()
	}
}

// stream is what readStream gathers from one response beside its
// observation: the kept text, the server's counts, and the bytes
// streamed.
type stream struct {
	r   *Request
	obs *observation.Request

	text      strings.Builder
	calls     callSet
	textLimit int

	usagePrompt, usageCompletion, usageReasoning int
	usageCached                                  int
	haveUsage                                    bool
	// streamed is the bytes of the content events (answer, reasoning
	// and tool-call text): what bounds a believable usage count.
	streamed int
}

// fail ends the stream at at with a failure.
func (s *stream) fail(at time.Time, outcome observation.Outcome, err error) {
	s.obs.End = at
	s.obs.Outcome, s.obs.Err = outcome, err
}

// frame takes one decoded frame, read at at, and says whether the stream
// ended with it: its end marker, or a bound it broke.
func (s *stream) frame(ch *Chunk, at time.Time) bool {
	// Every token-bearing frame is a token: answer text, reasoning, or a
	// tool call (whose stream has no content at all).
	if len(ch.Content) > 0 || len(ch.Reasoning) > 0 || len(ch.ToolCall) > 0 {
		if !s.token(ch, at) {
			return true
		}
	}
	if ch.HasUsage {
		s.haveUsage = true
		s.usagePrompt = max(s.usagePrompt, ch.PromptTokens)
		s.usageCompletion = max(s.usageCompletion, ch.CompletionTokens)
	}
	s.usageReasoning = max(s.usageReasoning, ch.ReasoningTokens)
	s.usageCached = max(s.usageCached, ch.CachedTokens)
	if ch.Server.Any() {
		s.obs.Server.Merge(&ch.Server)
	}
	if ch.Done {
		s.obs.End = at
		s.obs.Outcome = observation.Success
		return true
	}
	return false
}

// token records a content event read at at: the first token, the token
// times, the event counts, the observer's call, the kept text. False when
// the event broke a bound, which ended the stream.
func (s *stream) token(ch *Chunk, at time.Time) bool {
	obs, r := s.obs, s.r
	if obs.FirstToken.IsZero() {
		obs.FirstToken = at
	}
	if obs.ContentEvents >= maxEvents(r) {
		// A server that ignores max_tokens must not grow this request's
		// memory without bound.
		s.fail(at, observation.StreamError, &ProtocolError{Msg: fmt.Sprintf("more than %d content events for max_tokens %d", maxEvents(r), r.sentMaxTokens())})
		return false
	}
	if w := r.TokenWindow; w > 0 && len(obs.TokenTimes) >= w {
		// Slide the window: the oldest instant goes.
		copy(obs.TokenTimes, obs.TokenTimes[len(obs.TokenTimes)-w+1:])
		obs.TokenTimes = append(obs.TokenTimes[:w-1], at)
	} else {
		obs.TokenTimes = append(obs.TokenTimes, at)
	}
	obs.ContentEvents++
	s.streamed += len(ch.Content) + len(ch.Reasoning) + len(ch.ToolCall)
	// Set before the observer hears of the event: it reads them live.
	obs.LastToolCall = len(ch.ToolCall) > 0
	obs.LastReasoning = len(ch.Content) == 0 && !obs.LastToolCall
	if obs.LastToolCall {
		obs.ToolCallEvents++
	}
	if obs.LastReasoning {
		obs.ReasoningEvents++
	} else if obs.FirstAnswer.IsZero() {
		// A tool call is an answer: an agent's turn that calls a tool
		// has its time to first answer.
		obs.FirstAnswer = at
	}
	if r.Events != nil {
		r.Events.Content(obs)
	}
	if r.KeepText {
		return s.keep(at, ch.Content, ch.ToolCall, ch.Calls)
	}
	return true
}

// keep keeps answer and tool-call text (call, told apart by call in
// parts), or ends the stream at at when they would pass the bound on kept
// text, or begin more than MaxToolCalls calls. The bound is checked before
// the bytes are kept: a server that answers more than was asked for never
// holds more than textLimit of this process's memory.
func (s *stream) keep(at time.Time, content, call []byte, parts []CallPart) bool {
	if s.text.Len()+s.calls.bytes+len(content)+len(call) > s.textLimit {
		s.fail(at, observation.StreamError, &ProtocolError{Msg: fmt.Sprintf("answer text over its bound of %d bytes", s.textLimit)})
		return false
	}
	s.text.Write(content)
	if err := s.calls.add(parts); err != nil {
		s.fail(at, observation.StreamError, err)
		return false
	}
	return true
}

// count sets the request's token counts once its stream ended: the
// server's usage where it is believable, else the content events, and
// never more than the request asked for.
func (s *stream) count() {
	obs := s.obs
	obs.PromptTokens = s.usagePrompt
	obs.ReasoningTokens = s.usageReasoning
	// A cached count is believed beside a prompt count that holds it: a
	// server that claims more cached tokens than its prompt had, or
	// cached tokens of a prompt it did not count, reports none.
	if s.usageCached <= s.usagePrompt {
		obs.CachedTokens = s.usageCached
	}
	// A usage count of zero next to content events is not a count (Ollama
	// sends zero usage on every completions chunk before the real one).
	if s.haveUsage && (s.usageCompletion > 0 || obs.ContentEvents == 0) {
		obs.OutputTokens, obs.TokenSource = s.usageCompletion, observation.TokensFromUsage
	} else {
		obs.OutputTokens, obs.TokenSource = obs.ContentEvents, observation.TokensFromEvents
	}
	// Reasoning the server counted but did not stream (a hosted model
	// that hides it) is among its output tokens without an event.
	hidden := 0
	if obs.ReasoningEvents == 0 {
		hidden = s.usageReasoning
	}
	limit := s.r.sentMaxTokens()
	if obs.TokenSource == observation.TokensFromUsage && !UsageBelievable(s.usageCompletion, limit, obs.ContentEvents, s.streamed+hidden) ||
		s.usageReasoning > obs.OutputTokens {
		// A count that cannot be true would be every throughput's
		// numerator and TPOT's divisor: the events are counted instead.
		obs.UsageNotBelieved = true
		obs.OutputTokens, obs.TokenSource = obs.ContentEvents, observation.TokensFromEvents
		obs.ReasoningTokens = 0
	}
	if limit > 0 && obs.OutputTokens > limit {
		// More events than the tokens asked for (a server that ignored
		// max_tokens, or split tokens across events): a request is
		// credited with what it asked for at most, so that no
		// throughput, TPOT or ranking takes more from a server than
		// the requests allowed it. A usage count above it was not
		// believed just above.
		obs.OutputTokens = limit
	}
}

// classify maps a failure to an outcome. A protocol error is the server's
// fault whatever the clock says; otherwise an expired deadline explains the
// failure; anything else is a broken connection. The returned error wraps the
// context's error when the context ended, so that the caller can tell its
// own cancellation apart.
func classify(ctx context.Context, err error) (observation.Outcome, error) {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return observation.StreamError, err
	}
	cerr := ctx.Err()
	if cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", err, cerr)
	}
	if errors.Is(cerr, context.DeadlineExceeded) {
		return observation.Timeout, err
	}
	return observation.Disconnected, err
}

// redact removes the bearer token from err's message. A server may echo the
// key in an error body; the error chain is dropped in that case, because
// every error in it would print the key.
func redact(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "<redacted>"))
}
