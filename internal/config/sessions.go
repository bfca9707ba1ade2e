package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Sessions turns a workload into multi-turn conversations
// (probe/workload's sessions): sessions arrive open-loop by the workload's
// arrival process (its rates are sessions per second), and each runs a
// drawn number of turns, closed-loop. A turn's prompt is the conversation so
// far (every earlier user message and the server's actual replies) plus a
// new user message; the next turn is due when the reply has ended and a
// drawn think time has passed. The block's presence makes the workload a
// sessions workload; it replaces the prompt block (and cannot go with
// replay or checks).
type Sessions struct {
	// Turns per session, drawn once when the session arrives, in
	// [1, MaxSessionTurns]. Default: fixed DefaultSessionTurns.
	Turns Distribution `yaml:"turns"`
	// ThinkTime is the pause between a reply's last byte and the next
	// turn's send. Default: fixed DefaultThinkTime.
	ThinkTime ThinkTime `yaml:"think_time"`
	// UserTokens is the length of each new user message, counted as the
	// first turn's whole prompt (calibrated as a workload's input_tokens);
	// OutputTokens each turn's max_tokens. Defaults DefaultUserTokens and
	// DefaultOutputTokens.
	UserTokens   Distribution `yaml:"user_tokens"`
	OutputTokens Distribution `yaml:"output_tokens"`
	// MaxConversationTokens ends a session early, before a turn whose
	// prompt (the conversation so far and the new message) plus max_tokens
	// would exceed it (the target's max_model_len too, where it states
	// one). Default DefaultMaxConversationTokens.
	MaxConversationTokens int `yaml:"max_conversation_tokens"`
	// MaxActive caps the sessions alive at once (in a turn or thinking); a
	// session arriving beyond it is dropped and counted, never delayed.
	// Default: the workload's max_in_flight.
	MaxActive int `yaml:"max_active"`
	// Seed selects the session arrivals, the turn counts, the think times
	// and the user messages' words.
	Seed int64 `yaml:"seed"`
	// Agent, when set, makes each session an agent's job: its turns follow
	// the model's tool calls rather than a drawn count (Agent).
	Agent *Agent `yaml:"agent"`
}

// Agent makes a sessions workload's sessions agent jobs: turn 1 is a user
// message; a reply that calls tools (the workload's tools block) is answered
// by simulated tools, each call after a drawn latency, and the next turn,
// due when the slowest call has returned, appends the calls and their
// results; a reply without a call, or max_turns, ends the job. It replaces
// the block's turns and think_time.
type Agent struct {
	// ToolLatency is each tool call's latency, drawn per call; parallel
	// calls are joined, so a turn waits for the slowest. Default: fixed
	// DefaultToolLatency.
	ToolLatency ThinkTime `yaml:"tool_latency"`
	// ToolResultTokens is each result's length, in words (about a token
	// each), at most MaxToolResultTokens. Default: fixed
	// DefaultToolResultTokens.
	ToolResultTokens Distribution `yaml:"tool_result_tokens"`
	// MaxTurns ends a job that is still calling tools, in [1,
	// MaxSessionTurns]. Default DefaultAgentMaxTurns.
	MaxTurns int `yaml:"max_turns"`
}

// ThinkTime is a distribution of durations, clamped to [Min, Max].
type ThinkTime struct {
	Dist   string        `yaml:"dist"` // fixed | uniform | exponential | lognormal
	Mean   time.Duration `yaml:"mean"`
	Stddev time.Duration `yaml:"stddev"`
	Min    time.Duration `yaml:"min"`
	Max    time.Duration `yaml:"max"`
}

// ThinkTimeDists are the think-time distributions a configuration accepts.
var ThinkTimeDists = []string{"fixed", "uniform", "exponential", "lognormal"}

// Bounds and defaults of a sessions block.
const (
	// MaxSessionTurns bounds the turns of one session: a session's memory
	// and its prompts grow with every turn.
	MaxSessionTurns = 100
	// MaxThinkTime bounds every think time, and is the max of an
	// exponential or lognormal think time that sets none.
	MaxThinkTime = time.Hour
	// MaxActiveSessions bounds max_active.
	MaxActiveSessions = 10_000
	// MaxSessionTokens bounds max_active × max_conversation_tokens: the
	// conversations held at once, which the exporter keeps in memory
	// (at most SessionBytesPerToken bytes per token each).
	MaxSessionTokens = 1 << 25
	// SessionBytesPerToken bounds a conversation's text: one longer than
	// this many bytes per token of max_conversation_tokens ends early, so
	// that a server whose tokens are long strings cannot grow it unbounded.
	SessionBytesPerToken = 16

	// MaxToolResultTokens bounds a tool result: every result of a job is
	// in its next prompts.
	MaxToolResultTokens = 8192

	DefaultSessionTurns          = 4
	DefaultToolLatency           = 500 * time.Millisecond
	DefaultToolResultTokens      = 64
	DefaultAgentMaxTurns         = 8
	DefaultThinkTime             = 2 * time.Second
	DefaultUserTokens            = 64
	DefaultMaxConversationTokens = 16384
)

// applySessionDefaults fills a sessions block's unset fields; w's own
// defaults (max_in_flight) are applied already.
func (w *Workload) applySessionDefaults() {
	s := w.Sessions
	if s == nil {
		return
	}
	if a := s.Agent; a != nil {
		if a.ToolLatency == (ThinkTime{}) {
			a.ToolLatency = ThinkTime{Dist: "fixed", Mean: DefaultToolLatency}
		}
		if a.ToolLatency.Dist == "" {
			a.ToolLatency.Dist = "fixed"
		}
		a.ToolResultTokens.applyDefault(DefaultToolResultTokens)
		if a.MaxTurns == 0 {
			a.MaxTurns = DefaultAgentMaxTurns
		}
		// A job's turns are its turn limit: the sessions draw this
		// count, and a reply without a call ends the job earlier.
		if s.Turns == (Distribution{}) {
			s.Turns = Distribution{Dist: "fixed", Mean: float64(a.MaxTurns)}
		}
	}
	s.Turns.applyDefault(DefaultSessionTurns)
	if s.ThinkTime == (ThinkTime{}) {
		s.ThinkTime = ThinkTime{Dist: "fixed", Mean: DefaultThinkTime}
	}
	if s.ThinkTime.Dist == "" {
		s.ThinkTime.Dist = "fixed"
	}
	s.UserTokens.applyDefault(DefaultUserTokens)
	s.OutputTokens.applyDefault(DefaultOutputTokens)
	if s.MaxConversationTokens == 0 {
		s.MaxConversationTokens = DefaultMaxConversationTokens
	}
	if s.MaxActive == 0 {
		s.MaxActive = w.MaxInFlight
	}
}

// validateSessions checks a sessions workload; p is the workload's path.
func validateSessions(v *validator, p path, w *Workload) {
	s := w.Sessions
	sp := append(append(path{}, p...), "sessions")
	// Sessions decide what each request holds: the single-turn blocks
	// would be silently ignored.
	for _, key := range []string{"prompt", "replay", "checks"} {
		if nodeAt(v.root, append(append(path{}, p...), key)) != nil {
			v.add(p, key, "cannot be set with sessions: each turn's prompt is the conversation so far (sessions.user_tokens and sessions.output_tokens set its lengths)")
		}
	}
	if s.Agent != nil {
		validateAgent(v, p, w)
	} else {
		checkTurns(v, append(append(path{}, sp...), "turns"), &s.Turns)
	}
	checkThinkTime(v, append(append(path{}, sp...), "think_time"), &s.ThinkTime)
	// The user message and the output are one request's input and output:
	// CheckLengths names them input_tokens and output_tokens.
	lengthsOK := true
	for _, prob := range CheckLengths(&s.UserTokens, &s.OutputTokens) {
		lengthsOK = false
		pp := slices.Clone(prob.Path)
		if len(pp) > 0 && pp[0] == "input_tokens" {
			pp[0] = "user_tokens"
		}
		v.addPath(append(append(path{}, sp...), pp...), strings.ReplaceAll(prob.Reason, "input_tokens", "user_tokens"))
	}
	switch n := s.MaxConversationTokens; {
	case n < 2 || n > MaxTokens:
		v.add(sp, "max_conversation_tokens", fmt.Sprintf("must be between 2 and %d (config.MaxTokens), got %d", MaxTokens, n))
	case lengthsOK && least(&s.UserTokens)+least(&s.OutputTokens) > n:
		v.add(sp, "max_conversation_tokens", fmt.Sprintf("%d cannot hold even the first turn: user_tokens of at least %d plus output_tokens of at least %d",
			n, least(&s.UserTokens), least(&s.OutputTokens)))
	}
	switch n := s.MaxActive; {
	case n < 1 || n > MaxActiveSessions:
		v.add(sp, "max_active", fmt.Sprintf("must be between 1 and %d (config.MaxActiveSessions), got %d", MaxActiveSessions, n))
	case s.MaxConversationTokens > 0 && int64(n)*int64(s.MaxConversationTokens) > MaxSessionTokens:
		v.add(sp, "max_active", fmt.Sprintf("%d sessions of up to %d tokens is %d tokens held at once: at most %d (config.MaxSessionTokens); lower max_active or max_conversation_tokens",
			n, s.MaxConversationTokens, int64(n)*int64(s.MaxConversationTokens), MaxSessionTokens))
	}
}

// checkTurns validates the turns distribution at p and bounds an unbounded
// one by MaxSessionTurns.
func checkTurns(v *validator, p path, d *Distribution) {
	bad := func(field string, reason string) { v.addPath(append(append(path{}, p...), field), reason) }
	inRange := func(x float64) bool { return !math.IsNaN(x) && x >= 1 && x <= MaxSessionTurns }
	for _, f := range []struct {
		field string
		n     int
	}{{"min", d.Min}, {"max", d.Max}} {
		if f.n < 0 || f.n > MaxSessionTurns {
			bad(f.field, fmt.Sprintf("must be between 0 (unset) and %d (config.MaxSessionTurns), got %d", MaxSessionTurns, f.n))
			return
		}
	}
	if math.IsNaN(d.Stddev) || math.IsInf(d.Stddev, 0) || d.Stddev < 0 || d.Stddev > MaxSessionTurns {
		bad("stddev", fmt.Sprintf("must be between 0 and %d, got %g", MaxSessionTurns, d.Stddev))
		return
	}
	switch d.Dist {
	case "fixed":
		if !inRange(d.Mean) {
			bad("mean", fmt.Sprintf("must be between 1 and %d turns (config.MaxSessionTurns), got %g", MaxSessionTurns, d.Mean))
		}
	case "uniform":
		if d.Min < 1 || d.Max < d.Min {
			bad("min", fmt.Sprintf("uniform needs 1 <= min <= max <= %d", MaxSessionTurns))
		}
	case "normal", "lognormal":
		if !inRange(d.Mean) {
			bad("mean", fmt.Sprintf("must be between 1 and %d turns (config.MaxSessionTurns), got %g", MaxSessionTurns, d.Mean))
		}
		if d.Stddev <= 0 {
			bad("stddev", "must be positive")
		}
		if d.Max != 0 && d.Max < d.Min {
			bad("max", "must not be below min")
		}
		if d.Max == 0 {
			d.Max = MaxSessionTurns
		}
	default:
		bad("dist", fmt.Sprintf("%s is not one of fixed, uniform, normal, lognormal", quote(d.Dist))+didYouMean(d.Dist, []string{"fixed", "uniform", "normal", "lognormal"}))
	}
}

// checkThinkTime validates the think time at p, and bounds an exponential or
// lognormal one without max by MaxThinkTime.
func checkThinkTime(v *validator, p path, d *ThinkTime) {
	bad := func(field string, reason string) { v.addPath(append(append(path{}, p...), field), reason) }
	for _, f := range []struct {
		field string
		d     time.Duration
	}{{"mean", d.Mean}, {"stddev", d.Stddev}, {"min", d.Min}, {"max", d.Max}} {
		if f.d < 0 || f.d > MaxThinkTime {
			bad(f.field, fmt.Sprintf("must be between 0 and %v (config.MaxThinkTime), got %v", MaxThinkTime, f.d))
			return
		}
	}
	if d.Max != 0 && d.Max < d.Min {
		bad("max", fmt.Sprintf("%v must not be below min %v", d.Max, d.Min))
		return
	}
	switch d.Dist {
	case "fixed":
	case "uniform":
		if d.Max == 0 {
			bad("max", "uniform needs 0 <= min <= max, max set")
		}
	case "exponential", "lognormal":
		if d.Mean <= 0 {
			bad("mean", "must be positive")
		}
		if d.Dist == "lognormal" && d.Stddev <= 0 {
			bad("stddev", "must be positive")
		}
		if d.Max == 0 {
			d.Max = MaxThinkTime
		}
	default:
		bad("dist", fmt.Sprintf("%s is not one of %v", quote(d.Dist), ThinkTimeDists)+didYouMean(d.Dist, ThinkTimeDists))
	}
}

// validateAgent checks a sessions block's agent; p is the workload's path.
func validateAgent(v *validator, p path, w *Workload) {
	sp := append(append(path{}, p...), "sessions")
	ap := append(append(path{}, sp...), "agent")
	a := w.Sessions.Agent
	for _, key := range []string{"turns", "think_time"} {
		if nodeAt(v.root, append(append(path{}, sp...), key)) != nil {
			v.add(sp, key, "cannot be set with agent: a job's turns follow its tool calls (agent.max_turns), and its pauses are the tools' (agent.tool_latency)")
		}
	}
	if len(w.Kinds.Tools) == 0 {
		v.add(sp, "agent", "needs the workload's tools block: the functions the model may call")
	}
	if a.MaxTurns < 1 || a.MaxTurns > MaxSessionTurns {
		v.add(ap, "max_turns", fmt.Sprintf("must be between 1 and %d (config.MaxSessionTurns), got %d", MaxSessionTurns, a.MaxTurns))
	}
	checkThinkTime(v, append(append(path{}, ap...), "tool_latency"), &a.ToolLatency)
	d := &a.ToolResultTokens
	for _, prob := range checkLength("tool_result_tokens", d) {
		v.addPath(append(append(path{}, ap...), prob.Path...), prob.Reason)
		return
	}
	if d.Max == 0 && (d.Dist == "normal" || d.Dist == "lognormal") {
		d.Max = MaxToolResultTokens
	}
	if hi, _ := largest(d); hi > MaxToolResultTokens || least(d) > MaxToolResultTokens {
		v.add(ap, "tool_result_tokens", fmt.Sprintf("must be at most %d tokens (config.MaxToolResultTokens), got up to %d", MaxToolResultTokens, max(hi, least(d))))
	}
}
