package engine

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// This file is what the scraper tells of a server's life, beside its
// metrics: on every poll, whether the server answered, whether its health
// endpoint says it is ready, and the start of its process where it exports
// process_start_time_seconds. A PollObserver (the cold-start tracker) turns
// these into starts; the scraper only reports what it saw.

// Readiness is what one poll found of a target's server.
type Readiness int

const (
	// Unreachable: no HTTP answer, because the connection could not be
	// made (refused, no route, the name not resolved, the dial timed out).
	Unreachable Readiness = iota
	// Unready: the server answered, and its health endpoint said it is not
	// ready (any status but 200; llama.cpp's 503 "Loading model"), or,
	// without a health endpoint, its metrics answered 5xx; or the
	// connection was made but the answer failed (timed out, reset).
	Unready
	// Ready: its health endpoint answered 200.
	Ready
	// Answering: the server answered, and no health endpoint says more (an
	// engine not recognised, or one whose health path answers 404).
	Answering
)

// String names the readiness for logs and tests.
func (r Readiness) String() string {
	switch r {
	case Unreachable:
		return "unreachable"
	case Unready:
		return "unready"
	case Ready:
		return "ready"
	case Answering:
		return "answering"
	}
	return "invalid"
}

// Serving reports whether the server can serve: Ready or Answering.
func (r Readiness) Serving() bool { return r == Ready || r == Answering }

// Poll is one look at a target's server.
type Poll struct {
	Target string
	// At is when the answer, or the failure, came.
	At        time.Time
	Readiness Readiness
	// Full is true for a background scrape (the metrics were asked for)
	// and false for a readiness poll between scrapes, which reads only the
	// health endpoint and never the process start.
	Full bool
	// ProcessStart is the server's process start from its
	// process_start_time_seconds; zero when the poll did not read it: not
	// a full scrape, the metrics did not answer, or the engine does not
	// export it (llama.cpp, TGI, Triton, Ollama).
	ProcessStart time.Time
}

// PollObserver hears every poll of every target, on the target's scraper
// goroutine: it must not block.
type PollObserver interface {
	Polled(Poll)
}

// Option configures a Scraper.
type Option func(*Scraper)

// WithPollObserver reports every poll of every target to o.
func WithPollObserver(o PollObserver) Option {
	return func(s *Scraper) { s.polls = o }
}

// ReadyPollInterval is how often a server that is not ready (unreachable or
// unready) is polled between scrapes (or the scrape interval, when
// shorter), so that the instant it becomes ready is known to within it. A
// poll that finds the readiness changed brings the next scrape forward, to
// read the new process's start and engine at once.
const ReadyPollInterval = 250 * time.Millisecond

// healthPath is the engine's readiness endpoint under the server root; ""
// when it has none known here.
func healthPath(engine string) string {
	if m := mappingFor(engine); m != nil {
		return m.health
	}
	return ""
}

// healthAbsent: a status that says the path does not exist, rather than
// that the server is not ready, so that a server without it is not taken
// for one that never becomes ready.
func healthAbsent(status int) bool {
	return status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented
}

// failedReadiness classifies a request that got no answer: a connection
// that could not be made is Unreachable; one made whose answer failed is
// Unready (the process is there, but not serving).
func failedReadiness(err error) Readiness {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Unreachable
	}
	return Unready
}

// metricsReadiness is the readiness told by the metrics request alone, for
// an engine without a health endpoint: any answer below 500 is Answering.
func metricsReadiness(status int, err error) Readiness {
	switch {
	case status == 0 && err != nil:
		return failedReadiness(err)
	case status >= 500:
		return Unready
	}
	return Answering
}

// getStatus sends a GET and answers its status, reading at most a little of
// the body (a health answer is small; the rest is not needed).
func (sc *targetScraper) getStatus(ctx context.Context, u string) (int, error) {
	resp, err := sc.get(ctx, u, "*/*")
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// readiness asks the engine's health endpoint; without one (or when it
// answers as absent), the metrics request's own status and error decide.
func (sc *targetScraper) readiness(ctx context.Context, engine string, metricsStatus int, metricsErr error) Readiness {
	if p := healthPath(engine); p != "" {
		status, err := sc.getStatus(ctx, sc.root()+p)
		switch {
		case err != nil:
			return failedReadiness(err)
		case status == http.StatusOK:
			return Ready
		case !healthAbsent(status):
			return Unready
		}
	}
	return metricsReadiness(metricsStatus, metricsErr)
}

// pollReadiness is the light poll between scrapes of a server that is not
// ready: its health endpoint, or, for an engine without one, its metrics
// URL's status. It reports the poll and returns what it found.
func (sc *targetScraper) pollReadiness(ctx context.Context) Readiness {
	pctx, cancel := context.WithTimeout(ctx, sc.t.timeout)
	defer cancel()
	// Without a health endpoint, or when it answers as absent, the metrics
	// URL's status decides, as in a scrape.
	r := Answering
	if healthPath(sc.engine) != "" {
		r = sc.readiness(pctx, sc.engine, 0, nil)
	}
	if r == Answering {
		status, err := sc.getStatus(pctx, sc.metricsURL)
		r = metricsReadiness(status, err)
	}
	if ctx.Err() != nil {
		return r // the scraper is stopping: nothing was seen of the server
	}
	if r == Answering && sc.t.engine == config.ServerEngineAuto && (sc.engine == "" || sc.engine == engineUnknown) {
		// Answering, from a server whose engine is not known yet (the
		// sidecar up before it): its engine may have a health endpoint
		// that says it is still loading (vLLM serves /metrics while its
		// /health answers 503). Not reported: the scrape that waitNext
		// brings forward at once detects the engine and asks that
		// endpoint, and a poll reported as serving here let the workloads
		// send to a loading server in the moments between.
		return r
	}
	sc.report(Poll{Target: sc.t.name, At: sc.parent.now(), Readiness: r})
	return r
}

// report hands a poll to the observer, if any.
func (sc *targetScraper) report(p Poll) {
	if o := sc.parent.polls; o != nil {
		o.Polled(p)
	}
}

// waitNext waits until the next scrape is due at next, or ctx ends
// (false). While the server is not ready it polls its readiness every
// ReadyPollInterval (or the scrape interval, when shorter), and a poll that
// finds it changed makes the next scrape due at once.
func (sc *targetScraper) waitNext(ctx context.Context, next time.Time, last Readiness) bool {
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	var tick <-chan time.Time
	if !last.Serving() {
		t := time.NewTicker(min(ReadyPollInterval, sc.t.interval))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case <-tick:
			if r := sc.pollReadiness(ctx); ctx.Err() == nil && r != last {
				return true
			}
		}
	}
}

// processStart reads process_start_time_seconds, the start of the
// server's process in Unix seconds, as client libraries' process collectors
// export it; zero when absent. Where several series carry it (several
// processes behind one endpoint), the latest start counts.
func processStart(fams map[string]*dto.MetricFamily) time.Time {
	mf := fams["process_start_time_seconds"]
	if mf == nil {
		return time.Time{}
	}
	var latest float64
	for _, m := range mf.GetMetric() {
		if v, ok := sampleValue(mf, m); ok && v > latest {
			latest = v
		}
	}
	if !(latest > 0) || latest > 1e11 { // not a Unix time in seconds
		return time.Time{}
	}
	// To the microsecond: a float64 of some 1.7e9 seconds carries no more
	// (its step is about 0.24 µs), and rounding makes the same value read
	// twice the same instant.
	return time.UnixMicro(int64(math.Round(latest * 1e6)))
}
