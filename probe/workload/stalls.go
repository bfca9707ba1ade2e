package workload

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// flight is one request in flight, as the stall scan sees it. last is
// written by the request's goroutine at each content event and read by the
// scan, so it is atomic; stalled belongs to the scan.
type flight struct {
	scheduled time.Time
	last      atomic.Int64 // unix nanoseconds of the last thing received; the scheduled instant before any
	stalled   bool
	// everStalled: some scan found it stalled; read by its sender at the
	// end (observation.Request.Stalled), for the spans kept for stalls.
	everStalled atomic.Bool
}

// flights are a workload's requests in flight.
type flights struct {
	mu  sync.Mutex
	set map[*flight]struct{}
}

func newFlights() *flights { return &flights{set: map[*flight]struct{}{}} }

func (fs *flights) add(scheduled time.Time) *flight {
	f := &flight{scheduled: scheduled}
	f.last.Store(scheduled.UnixNano())
	fs.mu.Lock()
	fs.set[f] = struct{}{}
	fs.mu.Unlock()
	return f
}

func (fs *flights) remove(f *flight) {
	fs.mu.Lock()
	delete(fs.set, f)
	fs.mu.Unlock()
}

// StallScan is what one scan of the requests in flight found.
type StallScan struct {
	// Stalled: requests that have received nothing for longer than the
	// threshold (before their first token: since their scheduled instant).
	Stalled int
	// New: of those, the ones that stalled since the previous scan.
	New int
	// OldestAge: the age of the oldest request in flight, from its
	// scheduled instant; 0 with none.
	OldestAge time.Duration
}

// scan counts the stalled requests at now. A request counts once in New,
// when it first stalls; if it receives something again it may stall (and
// count) again.
func (fs *flights) scan(now time.Time, threshold time.Duration) StallScan {
	var s StallScan
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for f := range fs.set {
		if age := now.Sub(f.scheduled); age > s.OldestAge {
			s.OldestAge = age
		}
		silent := now.Sub(time.Unix(0, f.last.Load()))
		switch {
		case silent > threshold:
			s.Stalled++
			if !f.stalled {
				f.stalled = true
				f.everStalled.Store(true)
				s.New++
			}
		default:
			f.stalled = false
		}
	}
	return s
}

// requestEvents are one request's client events: they mark the request's
// flight as alive and hand the events on to the workload's observer.
type requestEvents struct {
	o Observer
	f *flight
	w *sendWindow // nil: none
}

func (e *requestEvents) Sent(o *observation.Request) {
	if e.w != nil {
		e.w.sent()
	}
	e.o.Sent(o)
}

func (e *requestEvents) Content(o *observation.Request) {
	e.f.last.Store(o.TokenTimes[len(o.TokenTimes)-1].UnixNano())
	if o.ContentEvents == 1 {
		e.o.FirstToken(o)
	}
	e.o.Token(o)
}
