// Package coldstart measures a server's cold starts as a sidecar sees them:
// each time the server behind a target starts, the time from its start to
// its readiness (its health endpoint's first 200) and to its first served
// token (the first token of the first successful completion the exporter's
// workloads got from it), and that completion's own TTFT, from its
// scheduled send: an engine that loads its model on the first request
// (Ollama) spends the load there, after its readiness.
//
// It is fed from two sides: the engine scraper's polls (engine.Poll,
// through engine.PollObserver: whether the server answered, whether it is
// ready, its process_start_time_seconds) and the workloads' requests
// (workload.Observer, through the manager's Options.Observe hook). The
// Tracker renders what it saw as infer_server_starts_total, the
// infer_server_cold_start_seconds histogram (every start) and the latest
// start's infer_server_last_cold_start_seconds and
// infer_server_last_start_time_seconds.
package coldstart

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Where a start's clock starts: the from label.
const (
	// FromProcessStart: the process start the server exports
	// (process_start_time_seconds; vLLM's Python server does).
	FromProcessStart = "process_start"
	// FromRefusal: without one, the first poll since the server last
	// served that could not connect (refused, unreachable).
	FromRefusal = "first_refusal"
	// FromUnready: without one, the first poll since the server last served
	// that found it answering but not ready (llama.cpp's 503 while it
	// loads), when no refusal came before.
	FromUnready = "first_unready"
)

// Froms lists the from label's values.
var Froms = []string{FromProcessStart, FromRefusal, FromUnready}

// Start is one server start the tracker saw.
type Start struct {
	// From says where At comes from (FromProcessStart, FromRefusal,
	// FromUnready).
	From string
	// At is the start.
	At time.Time
	// Ready is the first poll that found the server's health endpoint
	// answering 200 after At; zero until then, and for an engine without
	// a health endpoint.
	Ready time.Time
	// FirstToken is the first token of the first completion after At to
	// succeed (the first to end successfully); zero until one.
	FirstToken time.Time
	// FirstRequest is that completion's scheduled send; zero until one,
	// and when it was scheduled before At (sent to the server before this
	// start, its TTFT is not this start's).
	FirstRequest time.Time
}

// ReadySeconds is At to Ready; false while unknown.
func (s Start) ReadySeconds() (float64, bool) {
	if s.Ready.IsZero() {
		return 0, false
	}
	return s.Ready.Sub(s.At).Seconds(), true
}

// FirstTokenSeconds is At to FirstToken; false while unknown.
func (s Start) FirstTokenSeconds() (float64, bool) {
	if s.FirstToken.IsZero() {
		return 0, false
	}
	return s.FirstToken.Sub(s.At).Seconds(), true
}

// FirstRequestTTFTSeconds is FirstRequest to FirstToken: the first
// request's TTFT, the model's load for an engine that loads on first use;
// false while unknown.
func (s Start) FirstRequestTTFTSeconds() (float64, bool) {
	if s.FirstToken.IsZero() || s.FirstRequest.IsZero() {
		return 0, false
	}
	return s.FirstToken.Sub(s.FirstRequest).Seconds(), true
}

// Tracker follows every target's server through its starts. Its methods are
// safe for concurrent use; Polled and the observers' methods never block
// for long (one mutex, no I/O).
type Tracker struct {
	logger *slog.Logger
	descs  descs
	hist   *prometheus.HistogramVec // infer_server_cold_start_seconds

	mu      sync.RWMutex // Ready reads it on every arrival of every workload
	targets map[string]*state
}

// state is one target's: the latest start, and what the next start decision
// needs to remember.
type state struct {
	polled bool // a poll came: the target's series exist
	// ready: the workloads may send (Ready). It turns true at the first
	// poll that finds the server serving, and false again when a poll
	// finds it answering but not ready (a restart loading its model); a
	// poll that cannot connect leaves it as it was: before the first
	// readiness the server is loading, after it the server is down, an
	// outage the workloads must measure.
	ready bool
	// epoch counts the times the server was found newly serving: its
	// first readiness, each readiness after not-ready polls, and each
	// start seen while the tracker held it ready (a restart behind
	// refused connections, or between two polls). What was learnt of the
	// server before (its tokenizer, its context length) belongs to an
	// older epoch (Epoch).
	epoch uint64
	// epochAt is the poll that moved the epoch last: a start opened while
	// ready from before it (the first process start read after the
	// readiness it belongs to) is the same server, not a new epoch.
	epochAt time.Time
	starts  uint64 // starts seen
	cur     *Start // the latest start; nil before the first
	// settled: since cur opened, a poll found the server serving, so its
	// readiness is decided (a server without a health endpoint has no ready
	// phase, and a later one must not be taken for it).
	settled bool
	// logged: cur's figures were logged.
	logged bool

	// lastProcessStart is the process start last read; zero when never.
	lastProcessStart time.Time
	// downAt is the first poll since the server last served that found it
	// unreachable or unready (downFrom says which); zero while serving.
	downAt   time.Time
	downFrom string
	// readyAt is the first poll since downAt (or since the tracker began)
	// that found the server ready.
	readyAt time.Time
	// okAt is the first token of the first success since the last sign of
	// a server down: a poll that found it so, or a request that could not
	// connect or got a 5xx. It gives a start opened after its first
	// success (a start seen only at the next scrape) its first token.
	// okSent is that success's scheduled send.
	okAt, okSent time.Time
}

// New returns a tracker with no targets.
func New(logger *slog.Logger) *Tracker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{logger: logger, descs: newDescs(), hist: newHistogram(), targets: map[string]*state{}}
}

// state returns target's state, creating it; t.mu is held.
func (t *Tracker) state(target string) *state {
	s := t.targets[target]
	if s == nil {
		s = &state{}
		t.targets[target] = s
	}
	return s
}

// Polled takes one poll of a target's server (engine.PollObserver).
//
// The rules: a start is counted when the server reports a process start
// different from the last one read (a restart, even between two polls), or
// a first one while the server was seen down or unready (the exporter saw
// it start; a server already serving when first seen is not counted). An
// engine that exports no process start is counted when it serves again
// after polls found it down, from the first of them. A process start read
// again unchanged after a down poll is not a start: the network or the
// health endpoint failed, not the process.
func (t *Tracker) Polled(p engine.Poll) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(p.Target)
	wasReady, startsBefore := s.ready, s.starts
	defer func() {
		if (!wasReady && s.ready) || (wasReady && s.ready && s.starts != startsBefore && s.cur.At.After(s.epochAt)) {
			s.epoch, s.epochAt = s.epoch+1, p.At
		}
	}()
	if !s.polled {
		s.polled = true
		// The histogram's series exist from the first poll, at zero.
		for _, ph := range Phases {
			t.hist.WithLabelValues(p.Target, ph)
		}
	}
	switch {
	case p.Readiness.Serving():
		if !s.ready {
			t.logger.Info("target ready: its workloads send", "target", p.Target, "readiness", p.Readiness)
		}
		s.ready = true
	case p.Readiness == engine.Unready && s.ready:
		s.ready = false
		t.logger.Info("target not ready (restarting): its workloads skip their arrivals", "target", p.Target)
	}
	switch p.Readiness {
	case engine.Unreachable, engine.Unready:
		if s.downAt.IsZero() {
			s.downAt, s.downFrom = p.At, FromRefusal
			if p.Readiness == engine.Unready {
				s.downFrom = FromUnready
			}
		}
		s.readyAt, s.okAt, s.okSent = time.Time{}, time.Time{}, time.Time{}
	case engine.Ready:
		if s.readyAt.IsZero() {
			s.readyAt = p.At
		}
	}
	switch {
	case !p.ProcessStart.IsZero() && !p.ProcessStart.Equal(s.lastProcessStart):
		seenStarting := !s.lastProcessStart.IsZero() || !s.downAt.IsZero() || p.Readiness == engine.Unready
		s.lastProcessStart = p.ProcessStart
		if seenStarting {
			t.open(p.Target, s, FromProcessStart, p.ProcessStart, p)
		}
		if p.Readiness.Serving() {
			s.downAt = time.Time{}
		}
	case p.Full && p.Readiness.Serving():
		// A scrape that reached a serving server without a new process
		// start: decide the down polls before it.
		if p.ProcessStart.IsZero() && s.lastProcessStart.IsZero() && !s.downAt.IsZero() {
			t.open(p.Target, s, s.downFrom, s.downAt, p)
		}
		s.downAt = time.Time{}
	}
	if c := s.cur; c != nil && !s.settled && !p.At.Before(c.At) && p.Readiness.Serving() {
		if p.Readiness == engine.Ready && c.Ready.IsZero() {
			c.Ready = p.At
			t.observe(p.Target, PhaseReady, c.Ready.Sub(c.At))
		}
		s.settled = true
	}
	t.logDone(p.Target, s)
}

// observe puts one phase of one start into the histogram; t.mu is held.
func (t *Tracker) observe(target, phase string, d time.Duration) {
	t.hist.WithLabelValues(target, phase).Observe(d.Seconds())
}

// open counts a start of target from at, with what the memories already
// know of its readiness and first token; t.mu is held.
func (t *Tracker) open(target string, s *state, from string, at time.Time, p engine.Poll) {
	s.starts++
	c := &Start{From: from, At: at}
	if !s.readyAt.IsZero() && !s.readyAt.Before(at) {
		c.Ready = s.readyAt
		t.observe(target, PhaseReady, c.Ready.Sub(at))
	}
	if !s.okAt.IsZero() && !s.okAt.Before(at) {
		t.firstToken(target, c, s.okSent, s.okAt)
	}
	s.cur, s.settled, s.logged = c, false, false
	t.logger.Info("server start seen", "target", target, "from", from, "start", at, "readiness", p.Readiness.String())
}

// logDone logs the latest start's figures once both are known (or, for a
// server without a health endpoint, the first token); t.mu is held.
func (t *Tracker) logDone(target string, s *state) {
	c := s.cur
	if c == nil || s.logged || c.FirstToken.IsZero() || (c.Ready.IsZero() && !s.settled) {
		return
	}
	s.logged = true
	args := []any{"target", target, "from", c.From}
	if r, ok := c.ReadySeconds(); ok {
		args = append(args, "ready_seconds", r)
	}
	ft, _ := c.FirstTokenSeconds()
	args = append(args, "first_token_seconds", ft)
	if v, ok := c.FirstRequestTTFTSeconds(); ok {
		args = append(args, "first_request_ttft_seconds", v)
	}
	t.logger.Info("server cold start", args...)
}

// firstToken gives c its first token, from the success scheduled at sent;
// t.mu is held.
func (t *Tracker) firstToken(target string, c *Start, sent, firstToken time.Time) {
	c.FirstToken = firstToken
	t.observe(target, PhaseFirstToken, c.FirstToken.Sub(c.At))
	if !sent.IsZero() && !sent.Before(c.At) && !firstToken.Before(sent) {
		c.FirstRequest = sent
		t.observe(target, PhaseFirstRequestTTFT, firstToken.Sub(sent))
	}
}

// served takes a successful completion's scheduled send and first token.
// The first success after a start gives the start its first token (and
// its first request's TTFT), once: a request that ends later never changes
// it, even one whose first token came earlier, so that the figure is final
// when it is first exposed (and observed once).
func (t *Tracker) served(target string, sent, firstToken time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(target)
	if s.okAt.IsZero() {
		s.okAt, s.okSent = firstToken, sent
	}
	if c := s.cur; c != nil && c.FirstToken.IsZero() && !firstToken.Before(c.At) {
		t.firstToken(target, c, sent, firstToken)
	}
	t.logDone(target, s)
}

// failed takes a request that could not connect or got a 5xx: a sign that
// the server is down, so that a success before it is not the first token of
// the start that comes after.
func (t *Tracker) failed(target string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(target)
	s.okAt, s.okSent = time.Time{}, time.Time{}
}

// Latest returns target's latest start and the number of starts seen;
// false before the first.
func (t *Tracker) Latest(target string) (Start, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.targets[target]
	if s == nil || s.cur == nil {
		return Start{}, 0, false
	}
	return *s.cur, s.starts, true
}

// Ready reports whether the target's server is ready for its workloads to
// send: false until a poll of the engine scraper finds it serving, and
// while a restart loads its model (see the state's ready field). Only
// targets the engine scraper polls have a readiness; the caller gates
// only those.
func (t *Tracker) Ready(target string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.targets[target]
	return s != nil && s.ready
}

// Epoch counts the times the target's server was found newly serving (see
// the state's epoch field): 0 before its first readiness. A change says
// that the server may not be the one seen before (a restart may have
// loaded another model), so that what was calibrated against it is
// calibrated again.
func (t *Tracker) Epoch(target string) uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if s := t.targets[target]; s != nil {
		return s.epoch
	}
	return 0
}

// Apply forgets the targets that c no longer has (config.Applier), so
// that their series go.
func (t *Tracker) Apply(_ context.Context, c *config.Config) error {
	keep := map[string]bool{}
	for _, tg := range c.Targets {
		keep[tg.Name] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name := range t.targets {
		if !keep[name] {
			delete(t.targets, name)
			t.hist.DeletePartialMatch(prometheus.Labels{"target": name})
		}
	}
	return nil
}
