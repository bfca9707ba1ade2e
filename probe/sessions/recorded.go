package sessions

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// A replay of recorded agent jobs (replay source agent_sessions,
// config.AgentTrace) runs in the sessions machinery, as an agent's jobs
// do: the jobs arrive open-loop, each at its recorded offset over the
// replay's speed; turn 1 is due at the job's arrival, turn k+1 at turn k's
// reply End plus its recorded tool wait over the speed. So within a job the
// server's latency is the one measured now and the pauses are the
// recording's. Each turn sends its recorded body as it was (the client
// forces streaming and the target's model, as for every recorded body): the
// live replies do not feed the later turns, whose recorded tool results
// answer the recorded calls. A job ends completed after its last recorded
// turn, or as any session ends (a failed or dropped turn, the workload's
// end); it is measured as an agent's job (Job, JobRecorder), its tool time
// the sum of its replayed waits.

// arrivalSchedule is where the sessions arrive from: an arrival process
// (*arrival.Schedule), or a recorded trace's offsets (recordedArrivals).
// Only the drawer calls Next; Rate and Clamped may be called from any
// goroutine.
type arrivalSchedule interface {
	Next() (time.Duration, bool)
	Rate(elapsed time.Duration) float64
	Clamped() uint64
}

// RecordedOptions are what a replay of recorded agent jobs is built from.
type RecordedOptions struct {
	Trace *config.AgentTrace
	// Speed is trace seconds per wall second: it divides the offsets and
	// the tool waits.
	Speed float64
	// MaxActive caps the jobs alive at once; a job arriving beyond it is
	// dropped and counted, never delayed.
	MaxActive int
	Duration  time.Duration // 0: until the run is stopped
	Logger    *slog.Logger
}

// recordedJobs is the trace a Sessions replays.
type recordedJobs struct {
	trace *config.AgentTrace
	speed float64
}

// maxScaled bounds a scaled offset or wait, so that a tiny speed cannot
// overflow the instants computed from it.
const maxScaled = time.Duration(math.MaxInt64 / 4)

// scale is d of the trace in wall time, at the replay's speed.
func (r *recordedJobs) scale(d time.Duration) time.Duration {
	return time.Duration(min(math.Round(float64(d)/r.speed), float64(maxScaled)))
}

// NewRecorded builds the sessions that replay o.Trace's jobs. Their
// events go to the Recorder given to Bind and the JobRecorder given to
// BindJobs.
func NewRecorded(o RecordedOptions) (*Sessions, error) {
	switch {
	case o.Trace == nil || len(o.Trace.Sessions) == 0:
		return nil, errors.New("a replay of recorded agent jobs needs a trace that holds one")
	case math.IsNaN(o.Speed) || math.IsInf(o.Speed, 0) || o.Speed <= 0:
		return nil, errors.New("replay speed must be a finite number > 0")
	case o.MaxActive < 1:
		return nil, errors.New("max_active must be positive")
	}
	rj := &recordedJobs{trace: o.Trace, speed: o.Speed}
	arr := newRecordedArrivals(rj)
	s := &Sessions{
		// Replayed bodies are sent as recorded: no conversation is kept,
		// and no bound of the synthetic sessions' applies (fitsLocked).
		cfg:  config.Sessions{MaxActive: o.MaxActive, MaxConversationTokens: config.MaxTokens},
		chat: true, duration: o.Duration,
		arrivals: arr, ceiling: allowAll{}, maxRate: arr.peak(),
		logger: o.Logger, flights: map[uint64]*turnRef{}, rec: noRecorder{}, jobs: noJobRecorder{},
		build:    func(context.Context) (workload.Prompts, int, error) { return nil, 0, nil },
		recorded: rj,
	}
	s.drawReady = sync.NewCond(&s.mu)
	return s, nil
}

// Jobs says whether the sessions are agent jobs, synthetic or recorded,
// measured by a JobRecorder.
func (s *Sessions) Jobs() bool { return s.agent != nil || s.recorded != nil }

// allowAll is the recorded arrivals' ceiling: none. The jobs arrive at
// their recorded instants; a client late to start one is in its latency
// and the schedule lag, not dropped.
type allowAll struct{}

func (allowAll) Allow() bool { return true }

// arriveRecordedLocked makes the next recorded job the next arriving
// session, or notes that there is none. Nothing here is slow: s.mu stays
// held.
func (s *Sessions) arriveRecordedLocked() {
	off, ok := s.arrivals.Next()
	if !ok || s.duration > 0 && off >= s.duration {
		s.noArrivals = true
		return
	}
	js := &s.recorded.trace.Sessions[s.index]
	s.index++
	s.next = &session{off: off, idx: -1, turns: len(js.Turns), recorded: js, msg: &prompt.Prompt{}}
}

// recordedRequest completes the request of a recorded job's turn (ss.sent,
// counted already): its recorded body, sent as it was.
func recordedRequest(ss *session, req *client.Request) {
	req.RawBody = ss.recorded.Turns[ss.sent-1].Body
}

// recordedDoneLocked goes on with a recorded job after its turn's
// successful reply o: it ends after its last turn or when the workload is
// stopping; otherwise its next turn is due at o's End plus the recorded
// tool wait.
func (s *Sessions) recordedDoneLocked(ss *session, o *observation.Request) {
	switch {
	case ss.done >= ss.turns:
		s.endLocked(ss, Completed)
		return
	case s.closed:
		s.endLocked(ss, Stopped)
		return
	}
	next := &ss.recorded.Turns[ss.done]
	wait := s.recorded.scale(next.ToolWait)
	ss.job.tool += wait
	ss.job.calls += next.ToolResults
	s.jobs.ToolWait(next.ToolResults, wait)
	ss.msg = &prompt.Prompt{}
	ss.at = o.End.Add(wait)
	heap.Push(&s.heap, ss)
}

// recordedArrivals are a trace's job arrivals, at its speed, in order.
type recordedArrivals struct {
	offs []time.Duration // read only once built
	next int             // the drawer's
}

func newRecordedArrivals(r *recordedJobs) *recordedArrivals {
	offs := make([]time.Duration, len(r.trace.Sessions))
	for i := range r.trace.Sessions {
		offs[i] = r.scale(r.trace.Sessions[i].Offset)
	}
	return &recordedArrivals{offs: offs}
}

// Next returns the next job's arrival, from the run's start.
func (a *recordedArrivals) Next() (time.Duration, bool) {
	if a.next >= len(a.offs) {
		return 0, false
	}
	a.next++
	return a.offs[a.next-1], true
}

// rateWindow is the span Rate counts arrivals over.
const rateWindow = 60 * time.Second

// Rate is the jobs arriving per second over the rateWindow before elapsed
// (the time since the start, at least a second, in the first window).
func (a *recordedArrivals) Rate(elapsed time.Duration) float64 {
	if elapsed < 0 {
		return 0
	}
	span := min(max(elapsed, time.Second), rateWindow)
	hi := sort.Search(len(a.offs), func(i int) bool { return a.offs[i] > elapsed })
	lo := sort.Search(len(a.offs), func(i int) bool { return a.offs[i] > elapsed-span })
	return float64(hi-lo) / span.Seconds()
}

// Clamped is 0: no ceiling moves a recorded arrival.
func (a *recordedArrivals) Clamped() uint64 { return 0 }

// peak is the most jobs arriving within one second, at least 1: the
// replay's highest rate.
func (a *recordedArrivals) peak() float64 {
	best, j := 0, 0
	for i := range a.offs {
		for a.offs[i]-a.offs[j] >= time.Second {
			j++
		}
		best = max(best, i-j+1)
	}
	return float64(max(best, 1))
}
