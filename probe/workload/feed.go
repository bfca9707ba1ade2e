package workload

import (
	"context"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/client"
)

// feed hands the dispatcher its groups: the requests due at one instant,
// built ahead by its preparation. There are two, one for each way a Source
// pairs instants with requests (Source.Bound).
type feed interface {
	// prepare runs in its own goroutine and fills out with requests, built
	// ahead, until the schedule ends (then out is closed) or ctx is done.
	prepare(ctx context.Context, out chan<- preparedRequest)
	// next returns the next group due and its offset from the run's
	// start; false: the run ends.
	next(ctx context.Context) (time.Duration, []dueRequest, bool)
}

// ahead is a run's preparation: its goroutine, its prepared requests and
// their byte budget.
type ahead struct {
	out      chan preparedRequest
	budget   *byteBudget
	stopPrep context.CancelFunc
	done     chan struct{}
}

// newAhead returns a preparation with room for n prepared requests.
func newAhead(n int) *ahead {
	return &ahead{out: make(chan preparedRequest, n), budget: newByteBudget(lookaheadBytes), done: make(chan struct{})}
}

// start starts f's preparation. Requests are built ahead of their
// instants, in a goroutine of their own, so that building a prompt never
// delays a send and arrivals due at the same instant go out together.
func (a *ahead) start(ctx context.Context, f feed) {
	prepCtx, stopPrep := context.WithCancel(ctx)
	a.stopPrep = stopPrep
	go func() {
		defer close(a.done)
		f.prepare(prepCtx, a.out)
	}()
}

// stop ends the preparation and waits for it.
func (a *ahead) stop() {
	a.stopPrep()
	a.budget.close()
	<-a.done
}

// take returns the next prepared request; false when the preparation
// ended or ctx is done.
func (a *ahead) take(ctx context.Context) (preparedRequest, bool) {
	select {
	case p, ok := <-a.out:
		if ok {
			a.budget.give(requestBytes(p.req))
		}
		return p, ok
	case <-ctx.Done():
		return preparedRequest{}, false
	}
}

// hand finishes a prepared request (its body is encoded here, not at the
// send) and hands it to the dispatcher; false: the run stopped.
func (d *dispatcher) hand(ctx context.Context, out chan<- preparedRequest, p preparedRequest) bool {
	d.sends.standAside(ctx)
	client.Prepare(d.r.Target, p.req)
	if !d.ahead.budget.take(requestBytes(p.req), lookaheadBytes) {
		return false
	}
	select {
	case out <- p:
		return true
	case <-ctx.Done():
		return false
	}
}

// pacedFeed is the feed of a source whose requests do not belong to their
// instants (an open loop): the dispatcher reads the schedule as each
// arrival comes due, decides whether it carries a known-answer check, and
// takes the next prepared prompt otherwise.
type pacedFeed struct {
	d   *dispatcher
	seq uint64
}

// prepare builds prompts only, as many ahead as the channel holds.
func (f *pacedFeed) prepare(ctx context.Context, out chan<- preparedRequest) {
	defer close(out)
	d := f.d
	for n := uint64(0); ; n++ {
		p := preparedRequest{req: d.r.Source.Request(n, d.r.Template)}
		if !d.hand(ctx, out, p) {
			return
		}
	}
}

func (f *pacedFeed) next(ctx context.Context) (time.Duration, []dueRequest, bool) {
	d, r := f.d, f.d.r
	off, ok := r.Source.Next()
	d.clamped.Store(r.Source.Clamped())
	if !ok || (r.Duration > 0 && off >= r.Duration) {
		return 0, nil, false
	}
	// A new slice for each group: its senders keep pointers into it.
	group := make([]dueRequest, 0, 1)
	a := dueRequest{n: f.seq, check: -1}
	f.seq++
	// An arrival that carries a check draws no prompt, so the synthetic
	// prompts keep their order.
	if a.check = d.checks.arrive(d.start.Add(off)); a.check >= 0 {
		a.req = r.checkRequest(&r.Checks[a.check])
	} else {
		p, ok := d.ahead.take(ctx)
		if !ok {
			return 0, nil, false
		}
		a.req = p.req
	}
	return off, append(group, a), true
}

// lockstepFeed is the feed of a bound source (a replay, sessions): its
// schedule and requests advance together in the preparation, and the rows
// that share an instant and are prepared already go out as one group.
type lockstepFeed struct {
	d *dispatcher
	// A row received while collecting a group but not of it: the first of
	// the next group.
	pending *preparedRequest
	done    bool
}

// prepare reads the schedule and builds each arrival's request, no more
// than lookaheadTime before its instant.
func (f *lockstepFeed) prepare(ctx context.Context, out chan<- preparedRequest) {
	defer close(out)
	d, r := f.d, f.d.r
	for seq := uint64(0); ; seq++ {
		off, ok := r.Source.Next()
		d.clamped.Store(r.Source.Clamped())
		if !ok || (r.Duration > 0 && off >= r.Duration) {
			return
		}
		// A replay knows its instants: prepare no more than
		// lookaheadTime before each.
		if wait := time.Until(d.start.Add(off - lookaheadTime)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		p := preparedRequest{off: off, seq: seq}
		d.sends.standAside(ctx)
		p.req = r.Source.Request(seq, r.Template)
		if !d.hand(ctx, out, p) {
			return
		}
	}
}

func (f *lockstepFeed) next(ctx context.Context) (time.Duration, []dueRequest, bool) {
	if f.done {
		return 0, nil, false
	}
	p := f.pending
	f.pending = nil
	if p == nil {
		q, ok := f.d.ahead.take(ctx)
		if !ok {
			return 0, nil, false
		}
		p = &q
	}
	// A new slice for each group: its senders keep pointers into it.
	group := make([]dueRequest, 0, 1)
	group = append(group, dueRequest{n: p.seq, req: p.req, check: -1})
	a := f.d.ahead
collect:
	for len(group) < lookaheadItems {
		select {
		case q, ok := <-a.out:
			if !ok {
				f.done = true
				break collect
			}
			a.budget.give(requestBytes(q.req))
			if q.off != p.off {
				f.pending = &q
				break collect
			}
			group = append(group, dueRequest{n: q.seq, req: q.req, check: -1})
		default:
			break collect
		}
	}
	return p.off, group, true
}
