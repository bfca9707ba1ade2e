package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/client"
)

// Look-ahead bounds: prompts are prepared ahead of their instants so that
// building one (a 12k-token prompt takes about a millisecond) never becomes
// schedule lag, and requests due at the same instant go out together. At
// most lookaheadItems prepared requests and lookaheadBytes of prompt text
// wait at once, and a replay prepares at most lookaheadTime before an
// arrival's instant.
const (
	lookaheadItems = 256
	lookaheadBytes = 64 << 20
	lookaheadTime  = time.Second
	// ReplayLead is the head start a replay's preparation gets before the
	// trace's first instant: a replay's clock starts ReplayLead after its
	// Run does, and its offsets count from there.
	ReplayLead = 100 * time.Millisecond
)

// sendWindow tells the preparation when a group of sends (two or more
// requests due at one instant) is due or under way, so that it builds no
// prompt then. On a machine of few cores, a prompt's build (some 0.3 ms
// for 12k tokens, and its body's encoding) takes a core from the senders
// of a group due at that instant: with everything prepared long before,
// grouped rows' drift p99 was 2.5-4 ms on two cores, against 3.4-7.8 ms
// with the preparation running into them. Single arrivals, however close,
// do not hold the preparation back, and it never stands aside for longer
// than standAsideMax at a time, so it cannot fall behind the schedule.
type sendWindow struct {
	due     atomic.Int64 // the instant (unix ns) of the group the dispatcher waits for; 0: none
	pending atomic.Int64 // a group's senders released and not yet at their send
	// most is the longest one standing aside (0: standAsideMax).
	most time.Duration
}

const (
	// standAsideLead is how close to a group's instant the preparation
	// stops; standAsideMax bounds one standing aside.
	standAsideLead = 2 * time.Millisecond
	standAsideMax  = 10 * time.Millisecond
)

// waitFor: the dispatcher waits for n requests due at at.
func (w *sendWindow) waitFor(at time.Time, n int) {
	if n > 1 {
		w.due.Store(at.UnixNano())
	}
}

// release: the dispatcher let n senders of the group go; each calls sent
// (through its request's events) at its send.
func (w *sendWindow) release(n int) {
	w.due.Store(0)
	w.pending.Add(int64(n))
}

func (w *sendWindow) sent() { w.pending.Add(-1) }

// standAside returns once no group is due within standAsideLead and every
// released sender of a group has sent, after standAsideMax at most, or
// when ctx is done. It polls: it runs between two preparations, at most
// twice per request.
func (w *sendWindow) standAside(ctx context.Context) {
	most := w.most
	if most <= 0 {
		most = standAsideMax
	}
	for deadline := time.Now().Add(most); ctx.Err() == nil && time.Now().Before(deadline); {
		var wait time.Duration
		if w.pending.Load() > 0 {
			wait = 100 * time.Microsecond
		} else if due := w.due.Load(); due != 0 {
			if d := time.Until(time.Unix(0, due)); d < standAsideLead && d > -standAsideLead {
				wait = max(d, 0) + 100*time.Microsecond
			}
		}
		if wait <= 0 {
			return
		}
		time.Sleep(wait)
	}
}

// preparedRequest is one arrival's request, built ahead. For a bound source
// (a replay), the arrival's offset comes with it; for an open loop the
// dispatcher reads the schedule itself (off unused), so that an arrival that
// carries a known-answer check draws no prompt.
type preparedRequest struct {
	off time.Duration
	seq uint64
	req *client.Request
}

// byteBudget bounds the prompt bytes prepared and not yet sent.
type byteBudget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	left  int
	ended bool
}

func newByteBudget(n int) *byteBudget {
	b := &byteBudget{left: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take waits until n bytes are free (one request always passes on an empty
// budget, however large); false once the budget is closed.
func (b *byteBudget) take(n int, full int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.ended && b.left < n && b.left < full {
		b.cond.Wait()
	}
	if b.ended {
		return false
	}
	b.left -= n
	return true
}

func (b *byteBudget) give(n int) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *byteBudget) close() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// requestBytes is what a prepared request holds in memory.
func requestBytes(r *client.Request) int { return r.Bytes() }
