package sessions

import (
	"container/heap"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// A closed loop of agents (Options.Agents = N) replaces the arrival
// process: N jobs start at the run's start, and each job's end, for any
// reason, starts the same agent's next job at that instant (the ended
// job's last reply's end, else now), until the sessions close. So N jobs
// are alive at every instant, and how many a server completes per agent
// and hour is what it gives each agent, not what an arrival rate asks of
// it. No job is dropped: there is no session cap nor rate ceiling to
// refuse one.

// startAgentsLocked starts the loop's first jobs, due at the run's start.
func (s *Sessions) startAgentsLocked() {
	s.noArrivals = true
	for range s.agents {
		s.startJobLocked(time.Time{})
	}
}

// nextJobLocked starts the next job of the agent whose job ended (ended):
// due when its last reply ended, or now when none did (a job whose first
// turn was dropped, failed before a byte or never fitted).
func (s *Sessions) nextJobLocked(ended *session) {
	at := ended.job.last
	if at.IsZero() {
		at = time.Now()
	}
	s.startJobLocked(at)
}

// startJobLocked starts a job due at at (zero: at the run's start): a fresh
// session on its own stream, whose first message the drawer draws.
func (s *Sessions) startJobLocked(at time.Time) {
	i := s.index
	s.index++
	rng := s.streamOf(i)
	ss := &session{rng: rng, at: at, idx: -1}
	ss.turns = drawCount(rng, s.cfg.Turns, 1, config.MaxSessionTurns)
	s.active++
	s.rec.Started(s.active)
	heap.Push(&s.heap, ss)
	s.needDraw = append(s.needDraw, ss)
	s.drawReady.Signal()
}
