package sessions

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// loopRecorder counts the jobs started and ended, and the active count
// each event left.
type loopRecorder struct {
	noRecorder
	started int
	ended   []string
	active  []int
}

func (r *loopRecorder) Started(active int) { r.started++; r.active = append(r.active, active) }
func (r *loopRecorder) Ended(reason string, _, active int) {
	r.ended = append(r.ended, reason)
	r.active = append(r.active, active)
}

// userMessages is a generator of one fixed user message.
type userMessages struct{}

func (userMessages) Next() prompt.Prompt {
	return prompt.Prompt{Text: "list the files", InputTokens: 3, OutputTokens: 4}
}

// agentLoop prepares a closed loop of n agents of at most maxTurns turns.
func agentLoop(t *testing.T, n, maxTurns int) (*Sessions, workload.Lockstep, *loopRecorder, context.CancelFunc) {
	t.Helper()
	ag := &config.Agent{ToolLatency: config.ThinkTime{Dist: "fixed", Mean: 10 * time.Millisecond},
		ToolResultTokens: config.Distribution{Dist: "fixed", Mean: 4}, MaxTurns: maxTurns}
	s, err := New(Options{
		Config: config.Sessions{Turns: config.Distribution{Dist: "fixed", Mean: float64(maxTurns)},
			OutputTokens: config.Distribution{Dist: "fixed", Mean: 4}, MaxConversationTokens: 1000, Seed: 7, Agent: ag},
		Agents: n, Chat: true, Logger: slog.New(slog.DiscardHandler),
		Build: func(context.Context) (workload.Prompts, int, error) { return userMessages{}, 0, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &loopRecorder{}
	s.Bind(rec)
	// A loop that fails to start a job ends here, not in a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	src, err := s.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, src.(workload.Lockstep), rec, cancel
}

// take hands out the next due turn as the runner would, as request seq: its
// offset and its turn.
func take(t *testing.T, s *Sessions, src workload.Lockstep, seq uint64) (time.Duration, *turnRef) {
	t.Helper()
	off, ok := src.Schedule.Next()
	if !ok {
		t.Fatal("the schedule ended")
	}
	src.Requests.Next()
	src.Requests.Request(seq, &client.Request{})
	s.mu.Lock()
	defer s.mu.Unlock()
	return off, s.flights[seq]
}

// TestAgentsClosedLoop: N agents start N jobs at the run's start, and a job
// ending, whatever its reason, starts that agent's next one at its last
// reply's end (now, when it had none): N jobs stay active, and none starts
// once the sessions close.
func TestAgentsClosedLoop(t *testing.T) {
	const n = 3
	for _, tc := range []struct {
		name     string
		maxTurns int
		outcome  observation.Outcome
		calls    int
		reason   string
	}{
		{name: "completed", maxTurns: 4, outcome: observation.Success, reason: Completed},
		{name: "turn limit", maxTurns: 1, outcome: observation.Success, calls: 1, reason: Completed}, // turn_limit is the job's reason
		{name: "failed", maxTurns: 4, outcome: observation.HTTP5xx, reason: TurnFailed},
		{name: "dropped", maxTurns: 4, outcome: observation.Dropped, reason: TurnDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, src, rec, cancel := agentLoop(t, n, tc.maxTurns)
			t0 := s.startEst
			var first []*turnRef
			for i := range n {
				off, ref := take(t, s, src, uint64(i))
				if off != 0 || ref == nil || ref.turn != 1 {
					t.Fatalf("job %d: first turn at %v (turn %+v), want every job's first turn at the start", i, off, ref)
				}
				first = append(first, ref)
			}
			if rec.started != n || s.active != n {
				t.Fatalf("%d jobs started, %d active; want %d", rec.started, s.active, n)
			}
			// Job 0's turn ends 200 ms after the start.
			end := t0.Add(200 * time.Millisecond)
			o := &observation.Request{Seq: 0, Outcome: tc.outcome, Scheduled: t0, End: end}
			for range tc.calls {
				o.Calls = append(o.Calls, observation.ToolCall{Name: "search", Arguments: "{}"})
			}
			before := time.Now()
			if tc.outcome == observation.Dropped {
				o.End = time.Time{}
				src.Requests.Dropped(o)
			} else {
				src.Requests.Done(o)
			}
			if len(rec.ended) != 1 || rec.ended[0] != tc.reason {
				t.Fatalf("ended %v, want [%s]", rec.ended, tc.reason)
			}
			if rec.started != n+1 || s.active != n {
				t.Fatalf("after the end: %d jobs started, %d active; want %d, %d", rec.started, s.active, n+1, n)
			}
			off, ref := take(t, s, src, n)
			if ref == nil || ref.turn != 1 || ref.s == first[0].s {
				t.Fatalf("the next turn is %+v, want a new job's first", ref)
			}
			if tc.outcome == observation.Dropped {
				// No reply ended: the next job starts when the drop was heard.
				if at := t0.Add(off); at.Before(before.Add(-time.Millisecond)) || at.After(time.Now()) {
					t.Errorf("the next job started at %v, want when the drop was heard (%v)", at, before)
				}
			} else if off != end.Sub(t0) {
				t.Errorf("the next job's first turn at %v, want the ended reply's end, %v", off, end.Sub(t0))
			}
			for _, a := range rec.active[n:] {
				if a != n && a != n-1 {
					t.Errorf("active went to %d (events %v), want %d between an end and its next job", a, rec.active, n)
				}
			}
			cancel()
			<-src.Schedule.(sessionSchedule).DrawerDone()
			waitStopped(t, s)
			if rec.started != n+1 {
				t.Errorf("%d jobs started, want %d: a job stopped at the close started another", rec.started, n+1)
			}
			for _, r := range rec.ended[1:] {
				if r != Stopped {
					t.Errorf("a job ended %s at the close, want %s", r, Stopped)
				}
			}
		})
	}
}

// waitStopped waits for the close (finish, after the context ends) to
// have stopped every job.
func waitStopped(t *testing.T, s *Sessions) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.mu.Lock()
		active, closed := s.active, s.closed
		s.mu.Unlock()
		if closed && active == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still active 5 s after the close", active)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAgentsNeedAgent: a closed loop of plain conversations is refused.
func TestAgentsNeedAgent(t *testing.T) {
	if _, err := New(Options{Agents: 2}); err == nil {
		t.Error("a closed loop without an agent block was accepted")
	}
}
