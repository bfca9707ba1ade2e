package workload

import (
	"context"
	"sync"
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

// preparedRequest is one arrival's request, built ahead. For a source that
// completes its requests (a replay), the arrival's offset comes with it; for
// synthetic prompts the dispatcher reads the schedule itself (off unused),
// so that an arrival that carries a known-answer check draws no prompt.
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

// prepare runs in its own goroutine and fills out with the workload's
// requests, built ahead, until the schedule ends (then out is closed) or ctx
// is done. lockstep: the prompt source completes each request from the
// arrival the schedule returned (a replay), so schedule and prompts advance
// together here; otherwise only prompts are built here.
func (r *Runner) prepare(ctx context.Context, start time.Time, lockstep bool, out chan<- preparedRequest, budget *byteBudget, clamped func()) {
	defer close(out)
	rs, _ := r.Prompts.(Requests)
	var seq uint64
	for {
		p := preparedRequest{}
		if lockstep {
			off, ok := r.Schedule.Next()
			clamped()
			if !ok || (r.Duration > 0 && off >= r.Duration) {
				return
			}
			// A replay knows its instants: prepare no more than
			// lookaheadTime before each.
			if d := time.Until(start.Add(off - lookaheadTime)); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			p.off, p.seq = off, seq
			p.req = r.request(r.Prompts.Next())
			rs.Request(seq, p.req)
			seq++
		} else {
			p.req = r.request(r.Prompts.Next())
		}
		// The body too is encoded here, not at the send.
		client.Prepare(r.Target, p.req)
		if !budget.take(requestBytes(p.req), lookaheadBytes) {
			return
		}
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
	}
}

// requestBytes is what a prepared request holds in memory.
func requestBytes(r *client.Request) int { return r.Bytes() }
