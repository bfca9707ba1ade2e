package workload

import (
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/plan"
)

// Source is a load: when its requests are due (the Schedule), what they
// are (Request), and who follows what became of them (Follower). The
// runner drives every source through one dispatch loop (Runner.Run): the
// open loop and the bench's closed loop are OpenLoop sources, a trace
// replay and multi-turn sessions Lockstep ones.
type Source interface {
	Schedule
	// Request returns the request of arrival seq, built with t. For a
	// Bound source it is the arrival the schedule returned last; for
	// another, seq counts the requests asked for.
	Request(seq uint64, t plan.Template) *client.Request
	// Follower hears of the source's requests as the runner's observers
	// do, after them; nil: none.
	Follower() Observer
	// Bound says whether each request belongs to its instant (a replay's
	// row, a session's turn). A bound source's schedule and requests
	// advance together, ahead of the instants, in the preparation; its
	// clock starts ReplayLead after Run does, so that its first rows are
	// prepared before it; and the rows that share an instant go out as
	// one group. Otherwise the dispatcher reads the schedule as each
	// arrival comes due, and the requests are prepared ahead by count
	// (lookahead.go), so that an arrival that carries a known-answer check
	// draws no prompt.
	Bound() bool
}

// OpenLoop is the source of a schedule and a prompt source that know
// nothing of each other: an open loop (plan.Open), or the bench's closed
// loop.
type OpenLoop struct {
	Schedule
	Prompts Prompts
}

// Request implements Source: the next prompt's request.
func (s OpenLoop) Request(_ uint64, t plan.Template) *client.Request {
	return t.Request(s.Prompts.Next())
}

// Follower implements Source: an open loop follows nothing.
func (OpenLoop) Follower() Observer { return nil }

// Bound implements Source.
func (OpenLoop) Bound() bool { return false }

// Lockstep is the source of a schedule and a prompt source that completes
// and follows the requests of its instants (a replay, sessions).
type Lockstep struct {
	Schedule
	Requests Requests
}

// Request implements Source: the next prompt's request, completed by the
// prompt source for arrival seq.
func (s Lockstep) Request(seq uint64, t plan.Template) *client.Request {
	req := t.Request(s.Requests.Next())
	s.Requests.Request(seq, req)
	return req
}

// Follower implements Source: the prompt source follows its requests.
func (s Lockstep) Follower() Observer { return s.Requests }

// Bound implements Source.
func (Lockstep) Bound() bool { return true }
