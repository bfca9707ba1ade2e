package observation

import "time"

// ServerTimings is what the server said, in its own answer, of where one
// request's time went on its side: its queue, its own time to first token
// and its generation, and speculative decoding's acceptance. Each engine
// names and measures them in its own way (docs/metrics.md: the fields,
// their clock origins and sources); the flavors of probe/client read
// them, and a field the server did not send, sent as null, or sent with a
// value that cannot be a duration is absent (its OK false), never zero.
type ServerTimings struct {
	// Queue is the time the request waited in the engine before it was
	// scheduled (vLLM's queue_time_ms, TGI's x-queue-time).
	Queue ServerDuration
	// TTFT is the engine's own time to its first token: from scheduling
	// (vLLM), the prompt's processing (llama.cpp's prompt_ms), the model's
	// load and the prompt's evaluation (Ollama), or from the request's
	// receipt (Dynamo: TTFTIncludesQueue).
	TTFT ServerDuration
	// TTFTIncludesQueue says TTFT runs from the request's receipt, so that
	// its queue, which the server did not tell apart, is in it (Dynamo's
	// nvext.timing.ttft_ms).
	TTFTIncludesQueue bool
	// Generation is the time from the first to the last token (vLLM's
	// generation_time_ms, llama.cpp's predicted_ms, Ollama's
	// eval_duration).
	Generation ServerDuration
	// AcceptanceLength and AcceptanceRate are speculative decoding's mean
	// tokens per verification step (bonus token included) and the share of
	// draft tokens accepted (vLLM's metrics.speculative_decoding).
	AcceptanceLength, AcceptanceRate ServerValue
}

// ServerDuration is one duration a server reported, and whether it did.
type ServerDuration struct {
	D  time.Duration
	OK bool
}

// ServerValue is one number a server reported, and whether it did.
type ServerValue struct {
	V  float64
	OK bool
}

// Any says the server reported at least one of the timings.
func (t *ServerTimings) Any() bool {
	return t.Queue.OK || t.TTFT.OK || t.Generation.OK || t.AcceptanceLength.OK || t.AcceptanceRate.OK
}

// Merge takes the timings o reported, each over the one t holds: a later
// frame's figures are the request's (the final usage chunk's).
func (t *ServerTimings) Merge(o *ServerTimings) {
	if o.Queue.OK {
		t.Queue = o.Queue
	}
	if o.TTFT.OK {
		t.TTFT, t.TTFTIncludesQueue = o.TTFT, o.TTFTIncludesQueue
	}
	if o.Generation.OK {
		t.Generation = o.Generation
	}
	if o.AcceptanceLength.OK {
		t.AcceptanceLength = o.AcceptanceLength
	}
	if o.AcceptanceRate.OK {
		t.AcceptanceRate = o.AcceptanceRate
	}
}

// FirstToken is the engine's share of the time to first token: its queue
// and its own TTFT, or its TTFT alone when that includes the queue or the
// engine reports no queue (llama.cpp, Ollama). False without the engine's
// TTFT.
func (t *ServerTimings) FirstToken() (time.Duration, bool) {
	if !t.TTFT.OK {
		return 0, false
	}
	d := t.TTFT.D
	if t.Queue.OK && !t.TTFTIncludesQueue {
		d += t.Queue.D
	}
	return d, true
}

// The results of infer_probe_server_timings_total: a request whose time to
// first token the server's timings decompose, one whose answer carried
// some timings but not its TTFT, and one whose answer carried none.
const (
	TimingsDecomposed = "decomposed"
	TimingsPartial    = "partial"
	TimingsAbsent     = "absent"
)

// TimingsResults lists the results, for counters created at zero.
var TimingsResults = []string{TimingsDecomposed, TimingsPartial, TimingsAbsent}

// ClientOverhead is the client's time to first token less the engine's
// share of it (ServerTimings.FirstToken): the time outside the engine
// (the network, a gateway, the server's HTTP front end and tokenizer, and
// this client, its schedule lag included). It is negative only by the
// clocks' resolution (a server that rounds to whole milliseconds), and is
// reported as measured. False without a first token or the engine's TTFT.
func (r *Request) ClientOverhead() (time.Duration, bool) {
	ttft, ok := r.TTFT()
	if !ok {
		return 0, false
	}
	engine, ok := r.Server.FirstToken()
	if !ok {
		return 0, false
	}
	return ttft - engine, true
}

// TimingsResult classifies the request by what its server said of its
// time: decomposed (ClientOverhead is known), partial, or absent.
func (r *Request) TimingsResult() string {
	switch _, ok := r.ClientOverhead(); {
	case ok:
		return TimingsDecomposed
	case r.Server.Any():
		return TimingsPartial
	}
	return TimingsAbsent
}
