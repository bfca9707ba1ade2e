package observation

import "encoding/hex"

// Trace is the W3C trace context a request was sent with (its
// traceparent header): the trace and span ids of the client's span of the
// request, which a server that continues the trace (vLLM's
// --otlp-traces-endpoint) takes as the parent of its own spans, and whether
// the head sampler chose it. The zero Trace is none: no header is sent.
type Trace struct {
	TraceID [16]byte
	SpanID  [8]byte
	// Sampled is the traceparent's sampled flag: the head decision, which
	// the server's parent-based sampler follows.
	Sampled bool
}

// Valid reports whether t has the ids a traceparent needs (W3C: neither
// all zeros).
func (t Trace) Valid() bool { return t.TraceID != [16]byte{} && t.SpanID != [8]byte{} }

// TraceparentLen is the length of a version-00 traceparent.
const TraceparentLen = 55

// AppendTraceparent appends t as a version-00 traceparent header value,
// "00-<trace id>-<span id>-<flags>", to b: no allocation when b has room,
// so that the client can build it once per request cheaply.
func (t Trace) AppendTraceparent(b []byte) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '0', '0', '-')
	for _, c := range t.TraceID {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	b = append(b, '-')
	for _, c := range t.SpanID {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	if t.Sampled {
		return append(b, '-', '0', '1')
	}
	return append(b, '-', '0', '0')
}

// Traceparent is t as a traceparent header value.
func (t Trace) Traceparent() string {
	var buf [TraceparentLen]byte
	return string(t.AppendTraceparent(buf[:0]))
}

// IDs are t's trace and span ids in lower-case hex, 32 and 16 digits, as
// its traceparent writes them and as Tempo and Jaeger look a trace up:
// the labels of the exemplars on /metrics and /probe. One allocation: both
// are slices of one string.
func (t Trace) IDs() (traceID, spanID string) {
	var buf [2 * (len(t.TraceID) + len(t.SpanID))]byte
	hex.Encode(buf[:2*len(t.TraceID)], t.TraceID[:])
	hex.Encode(buf[2*len(t.TraceID):], t.SpanID[:])
	s := string(buf[:])
	return s[:2*len(t.TraceID)], s[2*len(t.TraceID):]
}
