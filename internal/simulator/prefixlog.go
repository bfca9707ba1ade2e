package simulator

import (
	"net/http"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/textcut"
)

// RequestIDHeader names a request in the prefix log (PrefixRecord), as a
// client sends it for the server's logs (vLLM takes it as its request id).
const RequestIDHeader = "X-Request-Id"

// TraceparentHeader is the W3C trace context a client sends, logged at
// debug level for each generation request ("request received"), cut at
// maxTraceparentBytes (a version-00 value has 55).
const (
	TraceparentHeader   = "traceparent"
	maxTraceparentBytes = 128
)

// PrefixRecord is the prefix cache's ground truth for one request that
// carried an X-Request-Id: what the engine found cached when it first
// admitted the request. A client that sends conversations can be checked
// against it: a turn whose prompt extends the previous turn's hits the
// previous prompt's full blocks.
type PrefixRecord struct {
	// RequestID is the request's X-Request-Id, cut at maxRequestIDBytes.
	RequestID string
	// Arrival is the instant the handler received the request (as the
	// X-Sim-Arrival-Unix-Nano header says).
	Arrival time.Time
	// PromptTokens is the prompt's length after the chat template.
	PromptTokens int
	// HitTokens is what the prefix cache served at the first admission:
	// hit blocks × BlockSize, as vllm:prefix_cache_hits_total counts it.
	HitTokens int
	// Finished is the instant the engine sampled the request's last token
	// (the end of that step); zero when it did not finish (aborted, or
	// still running).
	Finished time.Time
	// Scheduled is the start of the step that first admitted the request,
	// FirstToken the end of the step that sampled its first token (zero
	// until it finished), and GeneratedTokens its output when it finished:
	// the ground truth of vllm:request_queue_time_seconds (Scheduled -
	// Arrival), request_prefill_time_seconds (FirstToken - Scheduled),
	// request_decode_time_seconds (Finished - FirstToken) and
	// request_generation_tokens.
	Scheduled       time.Time
	FirstToken      time.Time
	GeneratedTokens int
}

// Bounds of the prefix log: the latest prefixLogSize requests are kept.
const (
	prefixLogSize     = 4096
	maxRequestIDBytes = 256
)

// prefixLog keeps the PrefixRecords of the latest requests. The engine
// goroutine writes it; PrefixRecord reads it from any goroutine.
type prefixLog struct {
	mu   sync.Mutex
	ring []PrefixRecord
	next int
	byID map[string]int // request id -> index in ring
}

func newPrefixLog() *prefixLog {
	return &prefixLog{ring: make([]PrefixRecord, 0, 64), byID: map[string]int{}}
}

// admitted records q's first admission with hit cached tokens.
func (l *prefixLog) admitted(q *sequence, hit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := PrefixRecord{RequestID: q.id, Arrival: q.arrival, PromptTokens: q.promptLen, HitTokens: hit, Scheduled: q.scheduledAt}
	i := l.next
	if len(l.ring) < prefixLogSize {
		l.ring = append(l.ring, rec)
		i = len(l.ring) - 1
	} else {
		if old := l.ring[i].RequestID; l.byID[old] == i {
			delete(l.byID, old)
		}
		l.ring[i] = rec
	}
	l.next = (i + 1) % prefixLogSize
	l.byID[q.id] = i
}

// finished records the instant q's last token was sampled.
func (l *prefixLog) finished(q *sequence, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.byID[q.id]; ok && l.ring[i].Arrival.Equal(q.arrival) {
		l.ring[i].Finished = at
		l.ring[i].FirstToken = q.firstTokenAt
		l.ring[i].GeneratedTokens = q.generated
	}
}

// requestID is r's X-Request-Id as the prefix log keeps it.
func requestID(r *http.Request) string {
	return textcut.Cut(r.Header.Get(RequestIDHeader), maxRequestIDBytes)
}

func (l *prefixLog) get(id string) (PrefixRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.byID[textcut.Cut(id, maxRequestIDBytes)]
	if !ok {
		return PrefixRecord{}, false
	}
	return l.ring[i], true
}

// PrefixRecord returns the ground truth of the latest admitted request
// whose X-Request-Id was id, among the last 4096 admitted ones that carried
// one; false when there is none (never sent, rejected before the engine,
// or not yet admitted).
func (s *Simulator) PrefixRecord(id string) (PrefixRecord, bool) {
	return s.engine.sched.prefixes.get(id)
}
