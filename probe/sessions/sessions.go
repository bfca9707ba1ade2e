// Package sessions is the multi-turn sessions source (config.Sessions). Sessions arrive open-loop, by the
// workload's arrival process; within a session the turns are closed-loop:
// turn k+1 is due when turn k's reply has ended (its observation's End) plus
// a drawn think time. Each turn's prompt is the conversation so far, every
// earlier user message and the server's actual replies, plus a new user
// message, so that the server's prefix cache sees the reuse a chat sees.
//
// A sessions workload is an ordinary Runner in lockstep, as a replay is:
// the sessions are its Schedule and its Prompts (a Requests source). The
// runner's prepare goroutine asks the schedule for the next instant that is
// due, the session arrival or the turn whose instant came first; the
// sessions complete the request (the conversation, KeepText for the
// reply); the runner sends it through the client at that instant, with the
// in-flight cap, the stall scan, the lag and the observers every workload
// has, and tells the sessions of its events. So every turn is measured by
// the one measurement path, from its scheduled instant: a turn's latency
// starts at its previous reply's end plus its think time, however late the
// client sends it (no coordinated omission within a session either), and a
// session's first turn starts at its arrival instant.
//
// The schedule's Next returns an instant only once it is due: a reply that
// ends with a short think time can make a turn due before anything that
// was waiting, and an instant handed to the runner early would hold it
// back behind a later one. A goroutine of its own (the drawer) draws ahead
// the next arriving session and the user message of every session whose
// turn is in flight or thinking, so that calibrating them against the
// server's /tokenize is never schedule lag unless a message is due before
// it could be drawn. The messages come from one generator in the order
// they are asked for, so which session gets which message depends on how
// the replies went; each session's turn count and think times come from
// its own seeded stream.
package sessions

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Session end reasons, the values of infer_probe_sessions_ended_total's
// reason label.
const (
	// Completed: every drawn turn was answered.
	Completed = "completed"
	// ContextLimit: the next turn (the conversation, the new user
	// message and its max_tokens) would exceed max_conversation_tokens or
	// the target's max_model_len, or the conversation's text its byte
	// bound (config.SessionBytesPerToken per token).
	ContextLimit = "context_limit"
	// TurnFailed: a turn ended without success; the conversation
	// cannot go on without its reply.
	TurnFailed = "turn_failed"
	// TurnDropped: a turn was never sent (the workload's in-flight
	// cap was full at its instant).
	TurnDropped = "turn_dropped"
	// Stopped: the workload ended (its duration, a reload, a
	// shutdown) before the session's last turn.
	Stopped = "stopped"
)

// EndReasons lists every session end reason.
var EndReasons = []string{Completed, ContextLimit, TurnFailed, TurnDropped, Stopped}

// Reasons a session arrival is dropped, infer_probe_sessions_dropped_total's
// reason label.
const (
	// DropCap: max_active sessions were alive at its instant.
	DropCap = "session_cap"
	// DropRateCeiling: the dispatcher was late and starting the
	// overdue session would exceed the arrival process's max_rate.
	DropRateCeiling = "rate_ceiling"
)

// DropReasons lists every session drop reason.
var DropReasons = []string{DropCap, DropRateCeiling}

// Recorder hears what the sessions do, as they do it (probe/live's series
// is one). Its methods may be called under the sessions' lock: they must
// not block nor call back.
type Recorder interface {
	// Started: a session started; active are alive now.
	Started(active int)
	// Dropped: a session arrival was never started, for reason (one of
	// DropReasons).
	Dropped(reason string)
	// Ended: a session ended for reason (one of EndReasons) after turns
	// successful turns; active are alive now.
	Ended(reason string, turns, active int)
	// Think: a think time was drawn.
	Think(d time.Duration)
	// FirstToken: a turn's first token came d after its instant.
	FirstToken(turn int, d time.Duration)
	// TurnDone: a turn (1-based) ended successfully.
	TurnDone(turn int, o *observation.Request)
}

// noRecorder is the Recorder of sessions that were given none.
type noRecorder struct{}

func (noRecorder) Started(int)                        {}
func (noRecorder) Dropped(string)                     {}
func (noRecorder) Ended(string, int, int)             {}
func (noRecorder) Think(time.Duration)                {}
func (noRecorder) FirstToken(int, time.Duration)      {}
func (noRecorder) TurnDone(int, *observation.Request) {}

// session is one conversation.
type session struct {
	rng   *rand.Rand // its turn count and think times
	turns int        // drawn when it arrives
	sent  int        // turns handed to the runner
	done  int        // turns answered successfully

	// off is an arriving session's offset from the run's start; at a
	// started session's next turn instant, on the heap at index idx (-1
	// off it).
	off time.Duration
	at  time.Time
	idx int

	// msg is the next user message, drawn ahead; nil until drawn.
	msg *prompt.Prompt
	// The conversation so far: chat messages, or one text for the
	// completion flavors (earlier prompt, reply, "\n", next message).
	history []map[string]any
	text    string
	bytes   int
	// job is what an agent's job measures (agent.go); zero otherwise.
	job job
	// recorded is a recorded job's turns (recorded.go); nil otherwise.
	recorded *config.AgentSession
	// prompt is the last turn's prompt tokens (the server's usage, else the
	// estimate it was sent with), output its output tokens.
	prompt, output int
	ended          bool
}

// turnRef is a request the runner was handed: its session, its turn
// (1-based), its offset from the run's start and the prompt tokens it was
// estimated at.
type turnRef struct {
	s    *session
	turn int
	off  time.Duration
	est  int
}

// Sessions is a sessions workload's schedule and prompt source: Prepare
// returns them as the runner's source.
type Sessions struct {
	cfg      config.Sessions
	chat     bool
	duration time.Duration
	arrivals arrivalSchedule
	ceiling  interface{ Allow() bool }
	maxRate  float64
	rec      Recorder
	agent    *config.Agent // an agent's jobs (agent.go); nil: conversations
	// agents is the closed loop's agents (agents.go); 0: the jobs or
	// conversations arrive open-loop.
	agents int
	jobs   JobRecorder
	// recorded replays recorded agent jobs (recorded.go); nil otherwise.
	recorded *recordedJobs
	logger   *slog.Logger
	// build makes the user-message generator and says the target's
	// context length (0: unknown), at the start of Run.
	build func(ctx context.Context) (workload.Prompts, int, error)

	// Set by prepare, before the runner's goroutines start.
	ctx      context.Context
	gen      workload.Prompts
	limit    int // tokens: max_conversation_tokens, or max_model_len when lower
	maxBytes int
	startEst time.Time

	mu sync.Mutex
	// drawReady wakes the drawer (on mu): a message or an arrival to
	// draw, or the end. drawerDone is closed when the drawer returns.
	drawReady  *sync.Cond
	drawerDone chan struct{}
	// start is the runner's start, learnt from the first request's
	// scheduled instant; until then startEst, which is at most
	// microseconds earlier.
	start      time.Time
	startKnown bool
	heap       turnHeap
	needDraw   []*session // sessions whose next message the drawer owes
	next       *session   // the next arriving session, drawn ahead
	index      uint64     // sessions drawn so far
	noArrivals bool       // the arrival process (or the duration) ended
	active     int
	closed     bool
	flights    map[uint64]*turnRef // by the runner's sequence number
	cur        *turnRef            // handed out by next, completed by Request
	curSession *session
	curPrompt  prompt.Prompt // its user message, kept should the session end meanwhile
	wake       context.CancelFunc
	limitSeen  bool // the first session ended at the limit was logged
	// The waiter's descriptor belongs to next's goroutine: it is closed by
	// next or, when next is not running, by finish.
	wait    workload.Waiter
	inNext  bool
	waitOff bool
}

// Options are what a sessions workload is built from.
type Options struct {
	Config   config.Sessions
	Arrival  config.Arrival // the sessions' arrival process
	Duration time.Duration  // 0: until the run is stopped
	// Chat: the target's flavor takes chat messages (each turn appends to
	// them); otherwise the conversation is one growing prompt.
	Chat bool
	// DegradedLag is the slack of the session arrivals' wire ceiling
	// (plan.Open).
	DegradedLag time.Duration
	// Build makes the user-message generator and says the target's context
	// length (0: unknown), when the run starts (Prepare).
	Build  func(ctx context.Context) (workload.Prompts, int, error)
	Logger *slog.Logger
	// Agents, when above 0, runs Config.Agent's jobs closed-loop (agents.go):
	// that many agents, each starting its next job when its last one ends,
	// in place of the arrival process. 0: open-loop arrivals.
	Agents int
}

// New builds the sessions of a workload. Their prompts are built in
// Prepare, when the runner starts; their events go to the Recorder given
// to Bind.
func New(o Options) (*Sessions, error) {
	s := &Sessions{
		cfg: o.Config, chat: o.Chat, duration: o.Duration,
		logger: o.Logger, flights: map[uint64]*turnRef{}, build: o.Build, rec: noRecorder{},
		agent: o.Config.Agent, jobs: noJobRecorder{}, agents: o.Agents,
	}
	s.drawReady = sync.NewCond(&s.mu)
	if o.Agents > 0 {
		// A closed loop has no arrival process: its agents are its load.
		if o.Config.Agent == nil {
			return nil, errors.New("a closed loop of agents needs an agent block")
		}
		return s, nil
	}
	ol, err := plan.Open(o.Arrival, o.Config.Seed, o.DegradedLag)
	if err != nil {
		return nil, err
	}
	s.arrivals, s.ceiling, s.maxRate = ol.Schedule, ol.Ceiling, ol.MaxRate
	return s, nil
}

// Bind gives the sessions their recorder (probe/live's series).
func (s *Sessions) Bind(r Recorder) { s.rec = r }

// MaxRate is the session arrival process's highest rate.
func (s *Sessions) MaxRate() float64 { return s.maxRate }

// Prepare is the runner's Prepare: it builds the user messages' generator
// and returns the sessions as the runner's source.
func (s *Sessions) Prepare(ctx context.Context) (workload.Source, error) {
	gen, contextLen, err := s.build(ctx)
	if err != nil {
		return nil, err
	}
	s.ctx, s.gen = ctx, gen
	s.limit = s.cfg.MaxConversationTokens
	if contextLen > 0 && contextLen < s.limit {
		s.limit = contextLen
	}
	s.maxBytes = config.SessionBytesPerToken * s.cfg.MaxConversationTokens
	s.wait = workload.NewWaiter()
	// The runner starts its clock ReplayLead after now (lockstep).
	s.startEst = time.Now().Add(workload.ReplayLead)
	// The run's context ends when Run returns (after its requests), or
	// when the workload is stopped: every session still alive then is
	// stopped.
	context.AfterFunc(ctx, s.finish)
	if s.agents > 0 {
		s.mu.Lock()
		s.startAgentsLocked()
		s.mu.Unlock()
	}
	s.drawerDone = make(chan struct{})
	go s.drawer()
	return workload.Lockstep{Schedule: sessionSchedule{s}, Requests: sessionPrompts{s}}, nil
}

// sessionSchedule is the sessions as the runner's Schedule.
type sessionSchedule struct{ s *Sessions }

// Next implements Schedule: the next due instant, a session's arrival or
// a turn's.
func (sc sessionSchedule) Next() (time.Duration, bool) { return sc.s.nextDue() }

// Rate implements Schedule: the session arrival rate (sessions/s).
func (sc sessionSchedule) Rate(elapsed time.Duration) float64 {
	if sc.s.arrivals == nil {
		return 0 // a closed loop of agents
	}
	return sc.s.arrivals.Rate(elapsed)
}

// Clamped implements Schedule: session arrivals the ceiling moved later.
func (sc sessionSchedule) Clamped() uint64 {
	if sc.s.arrivals == nil {
		return 0
	}
	return sc.s.arrivals.Clamped()
}

// DrawerDone is closed when the drawer goroutine returns (tests).
func (sc sessionSchedule) DrawerDone() <-chan struct{} { return sc.s.drawerDone }

// sessionPrompts is the sessions as the runner's prompt source and
// observer.
type sessionPrompts struct{ s *Sessions }

var _ workload.Requests = sessionPrompts{}

// Next implements Prompts: the user message of the turn the schedule just
// returned.
func (p sessionPrompts) Next() prompt.Prompt {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.curPrompt
}

// Request implements Requests: the turn's request carries the conversation
// so far and its new user message, and keeps the reply's text for the next
// turn.
func (p sessionPrompts) Request(seq uint64, req *client.Request) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ref, ss := s.cur, s.curSession
	s.cur, s.curSession = nil, nil
	if ss == nil || ss.ended {
		// The run was stopped since the turn was handed out: the request
		// is never sent, or cancelled at once.
		return
	}
	s.flights[seq] = ref
	user := s.curPrompt.Text
	ss.msg = nil
	ss.sent++
	if s.recorded != nil {
		recordedRequest(ss, req)
		return
	}
	if s.chat {
		// An agent's later turn adds no user message: its calls and their
		// results are in the history already.
		if s.agent == nil || ss.sent == 1 {
			ss.history = append(ss.history, map[string]any{"role": "user", "content": user})
		}
		if req.Extra == nil {
			req.Extra = map[string]any{}
		}
		// A new slice each turn: the request keeps it until it is
		// encoded, while the session appends the reply.
		req.Extra["messages"] = append([]map[string]any(nil), ss.history...)
	} else {
		if ss.sent > 1 {
			ss.text += "\n" + user
		} else {
			ss.text = user
		}
		req.Prompt = ss.text
	}
	ss.bytes += len(user)
	req.KeepText = true
	// The reply may hold what is left of the conversation's byte bound,
	// checked as it streams: a server that answers more ends the turn (a
	// stream error) before the reply outgrows the bound, not after.
	req.MaxTextBytes = max(1, s.maxBytes-ss.bytes)
	if ss.sent < ss.turns && s.agent == nil {
		s.needDraw = append(s.needDraw, ss)
		s.drawReady.Signal()
	}
}

// Sent implements Observer.
func (p sessionPrompts) Sent(o *observation.Request) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref := s.flights[o.Seq]; ref != nil {
		s.learnStart(ref, o)
	}
}

// FirstToken implements Observer: TTFT by turn, when the token arrives.
func (p sessionPrompts) FirstToken(o *observation.Request) {
	s := p.s
	s.mu.Lock()
	ref := s.flights[o.Seq]
	s.mu.Unlock()
	if d, ok := o.TTFT(); ok && ref != nil {
		s.rec.FirstToken(ref.turn, d)
	}
}

// Token implements Observer.
func (sessionPrompts) Token(*observation.Request) {}

// Done implements Observer: the turn's reply joins the conversation and
// the next turn is scheduled, or the session ends.
func (p sessionPrompts) Done(o *observation.Request) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := s.landLocked(o)
	if ref == nil {
		return
	}
	ss := ref.s
	if ss.ended {
		return
	}
	defer s.wakeLocked()
	ss.job.land(o)
	if o.Outcome == observation.Cancelled {
		// The workload was stopped with the turn in flight: the
		// session is stopped, not failed.
		s.endLocked(ss, Stopped)
		return
	}
	if o.Outcome != observation.Success {
		s.endLocked(ss, TurnFailed)
		return
	}
	ss.done++
	ss.prompt, ss.output = o.PromptTokens, o.OutputTokens
	if ss.prompt <= 0 {
		ss.prompt = ref.est
	}
	s.rec.TurnDone(ref.turn, o)
	if s.recorded != nil {
		s.recordedDoneLocked(ss, o)
		return
	}
	if s.agent != nil {
		s.agentDoneLocked(ss, o)
		return
	}
	if s.chat {
		ss.history = append(ss.history, map[string]any{"role": "assistant", "content": o.Text})
	} else {
		ss.text += o.Text
	}
	ss.bytes += len(o.Text)
	switch {
	case ss.done >= ss.turns:
		s.endLocked(ss, Completed)
	case s.closed:
		s.endLocked(ss, Stopped)
	default:
		think := s.think(ss.rng)
		s.rec.Think(think)
		ss.at = o.End.Add(think)
		heap.Push(&s.heap, ss)
	}
}

// Dropped implements Observer: a turn never sent ends its session.
func (p sessionPrompts) Dropped(o *observation.Request) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref := s.landLocked(o); ref != nil {
		ref.s.job.land(o)
		s.endLocked(ref.s, TurnDropped)
		s.wakeLocked()
	}
}

// landLocked takes o's turn out of the flights, learning the start from it,
// and returns it: nil when o is not a turn in flight.
func (s *Sessions) landLocked(o *observation.Request) *turnRef {
	ref := s.flights[o.Seq]
	if ref == nil {
		return nil
	}
	delete(s.flights, o.Seq)
	s.learnStart(ref, o)
	return ref
}

// learnStart fixes the runner's start from a request's scheduled instant.
func (s *Sessions) learnStart(ref *turnRef, o *observation.Request) {
	if !s.startKnown && !o.Scheduled.IsZero() {
		s.start, s.startKnown = o.Scheduled.Add(-ref.off), true
	}
}

func (s *Sessions) startLocked() time.Time {
	if s.startKnown {
		return s.start
	}
	return s.startEst
}

// wakeLocked ends next's wait: what is due may have changed.
func (s *Sessions) wakeLocked() {
	if s.wake != nil {
		s.wake()
		s.wake = nil
	}
}

// endLocked ends a started session and frees its conversation.
func (s *Sessions) endLocked(ss *session, reason string) {
	if ss.ended {
		return
	}
	ss.ended = true
	if ss.idx >= 0 {
		heap.Remove(&s.heap, ss.idx)
	}
	s.active--
	s.rec.Ended(reason, ss.done, s.active)
	if s.Jobs() {
		s.jobs.JobEnded(ss.job.result(reason, ss.done))
	}
	ss.history, ss.text, ss.msg = nil, "", nil
	if s.agents > 0 && !s.closed {
		s.nextJobLocked(ss)
	}
}

// closeLocked ends the sessions: no turn is handed out any more; those
// waiting for their next turn are stopped now, those with a turn in flight
// when it ends.
func (s *Sessions) closeLocked() {
	s.closed = true
	s.next = nil
	for s.heap.Len() > 0 {
		s.endLocked(s.heap[0], Stopped)
	}
	s.needDraw = nil
	s.drawReady.Broadcast()
}

// finish runs when the run's context ends: every session still alive is
// stopped (its turn was cancelled, or never sent).
func (s *Sessions) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	for seq, ref := range s.flights {
		s.endLocked(ref.s, Stopped)
		delete(s.flights, seq)
	}
	if s.curSession != nil && !s.curSession.ended {
		s.endLocked(s.curSession, Stopped)
	}
	s.wakeLocked()
	if !s.inNext && !s.waitOff {
		s.waitOff = true
		s.wait.Close()
	}
}

// leaveNext marks next's goroutine gone, closing the waiter once the
// sessions are closed (no later call will wait).
func (s *Sessions) leaveNextLocked() {
	s.inNext = false
	if s.closed && !s.waitOff {
		s.waitOff = true
		s.wait.Close()
	}
}

// nextDue returns the next due instant's offset from the run's start, or
// false when there will be none: the arrival process ended and every
// session did, or the run's context is done. At the end of Duration it
// returns Duration itself, which ends the runner's schedule.
func (s *Sessions) nextDue() (time.Duration, bool) {
	s.mu.Lock()
	s.inNext = true
	defer func() {
		s.leaveNextLocked()
		s.mu.Unlock()
	}()
	for {
		if s.closed || s.ctx.Err() != nil || s.noArrivals && s.next == nil && s.active == 0 {
			s.closeLocked()
			return 0, false
		}
		now := time.Now()
		start := s.startLocked()
		var (
			item    *session
			due     time.Time
			arrive  bool
			timeout bool
		)
		if s.heap.Len() > 0 {
			item, due = s.heap[0], s.heap[0].at
			if due.IsZero() {
				due = start // an agent's first job, due at the run's start
			}
		}
		if a := s.next; a != nil {
			if at := start.Add(a.off); item == nil || at.Before(due) {
				item, due, arrive = a, at, true
			}
		}
		if s.duration > 0 {
			if end := start.Add(s.duration); item == nil || !due.Before(end) {
				item, due, arrive, timeout = nil, end, false, true
			}
		}
		switch {
		case timeout && !now.Before(due):
			s.closeLocked()
			return s.duration, true
		case item != nil && !now.Before(due) && item.msg == nil:
			// Due before the drawer could draw its message: wait for it.
			due = time.Time{}
		case item != nil && !now.Before(due):
			var off time.Duration
			if arrive {
				s.next = nil
				s.drawReady.Signal() // the drawer draws the one after
				if !s.admitLocked() {
					continue
				}
				off = item.off
			} else {
				heap.Pop(&s.heap)
				off = due.Sub(start)
			}
			est, fits := s.fitsLocked(item)
			if !fits {
				if !s.limitSeen {
					s.limitSeen = true
					s.logger.Info("a session reached its context limit and ends early (later ones are only counted, in infer_probe_sessions_ended_total{reason=\"context_limit\"})",
						"turn", item.sent+1, "prompt_tokens", est, "max_tokens", item.msg.OutputTokens, "limit_tokens", s.limit,
						"conversation_bytes", item.bytes+len(item.msg.Text), "limit_bytes", s.maxBytes)
				}
				s.endLocked(item, ContextLimit)
				continue
			}
			s.cur = &turnRef{s: item, turn: item.sent + 1, off: off, est: est}
			s.curSession, s.curPrompt = item, *item.msg
			return off, true
		}
		// Wait for the instant, or for what the replies and the drawer
		// change meanwhile.
		wctx, cancel := context.WithCancel(s.ctx)
		s.wake = cancel
		s.mu.Unlock()
		if due.IsZero() {
			<-wctx.Done()
		} else {
			s.wait.WaitUntil(wctx, due)
		}
		cancel()
		s.mu.Lock()
		s.wake = nil
	}
}

// drawer draws ahead, in its own goroutine, until the sessions close: the
// next arriving session (its instant, turns and first message) whenever
// there is none, then the next message of each session under way, in the
// order they were asked for.
func (s *Sessions) drawer() {
	defer close(s.drawerDone)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for !s.closed && s.ctx.Err() == nil && len(s.needDraw) == 0 && (s.next != nil || s.noArrivals) {
			s.drawReady.Wait()
		}
		if s.closed || s.ctx.Err() != nil {
			return
		}
		if s.next == nil && !s.noArrivals {
			s.arriveLocked()
		} else {
			ss := s.needDraw[0]
			s.needDraw = s.needDraw[1:]
			if !ss.ended && ss.msg == nil {
				s.mu.Unlock()
				p := s.gen.Next()
				s.mu.Lock()
				if !ss.ended {
					ss.msg = &p
				}
			}
		}
		s.wakeLocked()
	}
}

// arriveLocked draws the next arriving session: its instant, its turns and
// its first message. It unlocks s.mu while it draws (the generator may ask
// the server's /tokenize).
func (s *Sessions) arriveLocked() {
	if s.recorded != nil {
		s.arriveRecordedLocked()
		return
	}
	i := s.index
	s.index++
	s.mu.Unlock()
	off, ok := s.arrivals.Next()
	var ss *session
	if ok && (s.duration <= 0 || off < s.duration) {
		rng := s.streamOf(i)
		ss = &session{rng: rng, off: off, idx: -1}
		ss.turns = drawCount(rng, s.cfg.Turns, 1, config.MaxSessionTurns)
		p := s.gen.Next()
		ss.msg = &p
	}
	s.mu.Lock()
	switch {
	case ss == nil:
		s.noArrivals = true
	case !s.closed:
		s.next = ss
	}
}

// streamOf is the i-th session's own seeded stream: its turns and think
// times (an agent's tool draws) do not depend on how the others went.
func (s *Sessions) streamOf(i uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(s.cfg.Seed), 0x5e55_1000_0000_0000+i))
}

// admitLocked starts the arriving session now due, or drops it (counted).
func (s *Sessions) admitLocked() bool {
	switch {
	case s.active >= s.cfg.MaxActive:
		s.rec.Dropped(DropCap)
		return false
	case !s.ceiling.Allow():
		s.rec.Dropped(DropRateCeiling)
		return false
	}
	s.active++
	s.rec.Started(s.active)
	return true
}

// fitsLocked estimates the prompt tokens of ss's next turn, the last
// turn's prompt and reply and the new message, and says whether it and its
// max_tokens fit the conversation's bounds.
func (s *Sessions) fitsLocked(ss *session) (int, bool) {
	if s.recorded != nil {
		return 0, true // a recorded body is sent as it was
	}
	est := ss.msg.InputTokens
	if ss.sent > 0 {
		est += ss.prompt + ss.output
	}
	if est+ss.msg.OutputTokens > s.limit || ss.bytes+len(ss.msg.Text) > s.maxBytes {
		return est, false
	}
	return est, true
}

// think draws a think time.
func (s *Sessions) think(rng *rand.Rand) time.Duration { return drawDuration(rng, s.cfg.ThinkTime) }

// drawDuration draws a duration from d, clamped to [d.Min, d.Max] and
// config.MaxThinkTime.
func drawDuration(rng *rand.Rand, d config.ThinkTime) time.Duration {
	var x float64
	switch d.Dist {
	case "uniform":
		return d.Min + time.Duration(rng.Int64N(int64(d.Max-d.Min)+1))
	case "exponential":
		x = float64(d.Mean) * rng.ExpFloat64()
	case "lognormal":
		x = lognormal(rng, float64(d.Mean), float64(d.Stddev))
	default: // fixed
		x = float64(d.Mean)
	}
	t := time.Duration(math.Round(x))
	t = max(t, d.Min)
	if d.Max > 0 {
		t = min(t, d.Max)
	}
	return min(t, config.MaxThinkTime)
}

// drawCount draws a count from d, clamped to [max(lo, d.Min), min(hi, d.Max)].
func drawCount(rng *rand.Rand, d config.Distribution, lo, hi int) int {
	var x float64
	switch d.Dist {
	case "uniform":
		x = float64(d.Min + rng.IntN(d.Max-d.Min+1))
	case "normal":
		x = d.Mean + d.Stddev*rng.NormFloat64()
	case "lognormal":
		x = lognormal(rng, d.Mean, d.Stddev)
	default: // fixed
		x = d.Mean
	}
	n := int(math.Round(x))
	lo = max(lo, d.Min)
	if d.Max > 0 {
		hi = min(hi, d.Max)
	}
	return min(max(n, lo), hi)
}

// lognormal draws from the lognormal distribution of the given mean and
// standard deviation (its own, not the underlying normal's).
func lognormal(rng *rand.Rand, mean, stddev float64) float64 {
	sigma2 := math.Log(1 + stddev*stddev/(mean*mean))
	mu := math.Log(mean) - sigma2/2
	return math.Exp(mu + math.Sqrt(sigma2)*rng.NormFloat64())
}

// turnHeap orders the sessions waiting for their next turn by its instant.
type turnHeap []*session

func (h turnHeap) Len() int           { return len(h) }
func (h turnHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h turnHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *turnHeap) Push(x any) {
	ss := x.(*session)
	ss.idx = len(*h)
	*h = append(*h, ss)
}

func (h *turnHeap) Pop() any {
	old := *h
	ss := old[len(old)-1]
	old[len(old)-1] = nil
	ss.idx = -1
	*h = old[:len(old)-1]
	return ss
}
