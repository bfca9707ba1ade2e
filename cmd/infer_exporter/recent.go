package main

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/slo"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// The landing page says what each workload did in the last minute: a
// person who opens it wants "is it working now", which cumulative counters
// cannot say. recentStats hears every request (an Observe hook beside the
// OTLP push and the cold-start tracker) and keeps, per workload, the last
// recentWindow of them, at most recentMax: a fixed bound whatever the rate.
const (
	recentWindow = time.Minute
	// recentMax bounds the requests kept per workload: at 100 req/s a
	// minute, past it the oldest go early (the page then covers less than
	// a minute, and says how much).
	recentMax = 6000
	// recentErrBytes bounds the last error shown.
	recentErrBytes = 300
)

// recentReq is what the page needs of one ended or dropped request.
type recentReq struct {
	at      time.Time // when it ended (or was dropped)
	outcome observation.Outcome
	skipped bool          // dropped because the target was not ready
	ttft    time.Duration // 0: none
	tpot    time.Duration // 0: none (a failure, or fewer than two timed tokens)
	sloMet  bool          // a success that met every threshold of the workload's SLO
	hasSLO  bool          // the workload has an SLO to meet
}

type recentRing struct {
	since   time.Time   // the first request heard: the figures cover no more
	reqs    []recentReq // in order of their end; those before start are gone
	start   int
	lastErr string // the last failure: its outcome and error
	lastAt  time.Time
	hasSLO  bool // as of the last request heard (a reload may set or clear it)
}

// recentStats holds every workload's ring, by workload name.
type recentStats struct {
	now func() time.Time
	mu  sync.Mutex
	by  map[string]*recentRing
}

func newRecentStats() *recentStats {
	return &recentStats{now: time.Now, by: map[string]*recentRing{}}
}

// Observe chains the stats' observer after next's, as the other Observe
// hooks do (the OTLP push, the cold-start tracker): an observer that hears
// the stall scans keeps hearing them.
func (s *recentStats) Observe(next func(*config.Target, *config.Workload) workload.Observer) func(*config.Target, *config.Workload) workload.Observer {
	return workload.ObserveBeside(next, func(_ *config.Target, w *config.Workload) workload.Observer {
		return recentObserver{s: s, workload: w.Name, slo: w.SLO}
	})
}

type recentObserver struct {
	s        *recentStats
	workload string
	slo      config.SLO
}

func (recentObserver) Sent(*observation.Request)       {}
func (recentObserver) FirstToken(*observation.Request) {}
func (recentObserver) Token(*observation.Request)      {}

func (r recentObserver) Done(o *observation.Request) {
	req := recentReq{at: o.End, outcome: o.Outcome, sloMet: slo.Met(o, r.slo), hasSLO: r.slo != config.SLO{}}
	if o.Outcome == observation.Success {
		if d, ok := o.TTFT(); ok {
			req.ttft = d
		}
		if d, ok := o.TPOT(); ok {
			req.tpot = d
		}
	}
	r.s.add(r.workload, req, o)
}

func (r recentObserver) Dropped(o *observation.Request) {
	r.s.add(r.workload, recentReq{at: o.Scheduled, outcome: o.Outcome, hasSLO: r.slo != config.SLO{}}, o)
}

// add keeps req, one request of workload name, heard as o.
func (s *recentStats) add(name string, req recentReq, o *observation.Request) {
	at := req.at
	if at.IsZero() {
		at = s.now()
	}
	req.at = at
	req.skipped = o.Outcome == observation.Dropped && o.DropReason == workload.DropTargetNotReady
	s.mu.Lock()
	defer s.mu.Unlock()
	ring := s.by[name]
	if ring == nil {
		ring = &recentRing{since: s.now()}
		s.by[name] = ring
	}
	ring.prune(s.now())
	if len(ring.live()) >= recentMax {
		ring.start++
	}
	ring.compact()
	ring.reqs = append(ring.reqs, req)
	ring.hasSLO = req.hasSLO
	// A drain's cancellation is not the server's failure.
	if o.Outcome != observation.Success && o.Outcome != observation.Dropped && o.Outcome != observation.Cancelled {
		msg := string(o.Outcome)
		if o.HTTPStatus != 0 {
			msg += " (HTTP " + strconv.Itoa(o.HTTPStatus) + ")"
		}
		if o.Err != nil {
			msg += ": " + o.Err.Error()
		}
		ring.lastErr, ring.lastAt = textcut.Cut(msg, recentErrBytes), at
	}
}

func (r *recentRing) prune(now time.Time) {
	cut := now.Add(-recentWindow)
	for r.start < len(r.reqs) && r.reqs[r.start].at.Before(cut) {
		r.start++
	}
}

// live is the requests of the window.
func (r *recentRing) live() []recentReq { return r.reqs[r.start:] }

// compact moves the live requests to the front once the gone ones are as
// many: each request is copied a bounded number of times, not once per
// request that follows it (this runs on every request's end).
func (r *recentRing) compact() {
	if r.start > 0 && r.start >= len(r.reqs)-r.start {
		r.reqs = append(r.reqs[:0], r.reqs[r.start:]...)
		r.start = 0
	}
}

// recentSummary is one workload's last minute.
type recentSummary struct {
	Span              time.Duration // what the figures cover (a minute, or less)
	Ended, Successes  int           // requests that ended; of them successful
	Failed, Dropped   int           // ended unsuccessfully (a drain's cancellations aside); never sent
	Skipped           int           // of the dropped: the target was not ready
	TTFTp50, TTFTp99  time.Duration // over the successes; 0 when none
	TPOTp50, TPOTp99  time.Duration // over the successes that have a TPOT; 0 when none
	SLOMet            int           // of those that ended: successes that met every SLO threshold
	HasSLO            bool          // the workload has an SLO (else SLOMet counts every success)
	LastError         string
	LastErrorAt       time.Time
	OfferedPerSecond  float64 // arrivals (ended and dropped) a second
	AchievedPerSecond float64 // successes a second
	SuccessRatio      float64 // successes over those that ended, when HasRatio
	HasRatio          bool
}

// summary is the last minute of workload name.
func (s *recentStats) summary(name string) recentSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out recentSummary
	ring := s.by[name]
	if ring == nil {
		return out
	}
	ring.prune(now)
	out.LastError, out.LastErrorAt, out.HasSLO = ring.lastErr, ring.lastAt, ring.hasSLO
	if len(ring.live()) == 0 {
		return out
	}
	// A workload younger than the window is measured over its life, not
	// as if it had been idle before.
	out.Span = min(recentWindow, now.Sub(ring.since))
	if len(ring.live()) >= recentMax {
		out.Span = min(out.Span, now.Sub(ring.live()[0].at))
	}
	var ttfts, tpots []time.Duration
	for _, r := range ring.live() {
		switch r.outcome {
		case observation.Dropped:
			out.Dropped++
			if r.skipped {
				out.Skipped++
			}
			continue
		case observation.Cancelled:
			continue
		case observation.Success:
			out.Successes++
			if r.ttft > 0 {
				ttfts = append(ttfts, r.ttft)
			}
			if r.tpot > 0 {
				tpots = append(tpots, r.tpot)
			}
			if r.sloMet {
				out.SLOMet++
			}
		default:
			out.Failed++
		}
		out.Ended++
	}
	if out.Ended > 0 {
		out.SuccessRatio, out.HasRatio = float64(out.Successes)/float64(out.Ended), true
	}
	if secs := out.Span.Seconds(); secs > 0 {
		out.OfferedPerSecond = float64(out.Ended+out.Dropped) / secs
		out.AchievedPerSecond = float64(out.Successes) / secs
	}
	if len(ttfts) > 0 {
		slices.Sort(ttfts)
		out.TTFTp50, out.TTFTp99 = rank(ttfts, 0.50), rank(ttfts, 0.99)
	}
	if len(tpots) > 0 {
		slices.Sort(tpots)
		out.TPOTp50, out.TPOTp99 = rank(tpots, 0.50), rank(tpots, 0.99)
	}
	return out
}

// rank is the nearest-rank quantile q of sorted d.
func rank(d []time.Duration, q float64) time.Duration {
	i := int(float64(len(d))*q+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}
