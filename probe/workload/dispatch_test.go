package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// offsets is a Schedule of fixed offsets.
type offsets struct {
	at []time.Duration
	i  int
}

func (s *offsets) Next() (time.Duration, bool) {
	if s.i >= len(s.at) {
		return 0, false
	}
	s.i++
	return s.at[s.i-1], true
}
func (s *offsets) Rate(time.Duration) float64 { return 1 }
func (s *offsets) Clamped() uint64            { return 0 }

// samePrompt is a Prompts of one prompt.
type samePrompt struct{}

func (samePrompt) Next() prompt.Prompt { return prompt.Prompt{Text: "p", OutputTokens: 3} }

// doer answers every request with three content events, through the
// request's events as the client does; while gate is open (non-nil and
// not closed) it holds each request until the gate closes or its context
// ends, which fails it with the context's error.
type doer struct {
	gate chan struct{}
	mu   sync.Mutex
	ids  []string
	sent chan struct{} // one value per request sent, when non-nil
}

func (d *doer) Do(ctx context.Context, _ *client.Target, r *client.Request, o *observation.Request) {
	d.mu.Lock()
	d.ids = append(d.ids, r.RequestID)
	d.mu.Unlock()
	o.Sent = time.Now()
	if r.Events != nil {
		r.Events.Sent(o)
	}
	if d.sent != nil {
		d.sent <- struct{}{}
	}
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			o.End, o.Outcome, o.Err = time.Now(), observation.Disconnected, ctx.Err()
			return
		}
	}
	for range 3 {
		o.TokenTimes = append(o.TokenTimes, time.Now())
		o.ContentEvents++
		if o.ContentEvents == 1 {
			o.FirstToken, o.FirstAnswer = o.TokenTimes[0], o.TokenTimes[0]
		}
		if r.Events != nil {
			r.Events.Content(o)
		}
	}
	o.End, o.Outcome = time.Now(), observation.Success
}

// eventLog is an Observer that logs every event as "name event seq".
type eventLog struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (e eventLog) add(ev string, o *observation.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	*e.log = append(*e.log, fmt.Sprintf("%s %s %d", e.name, ev, o.Seq))
}
func (e eventLog) Sent(o *observation.Request)       { e.add("sent", o) }
func (e eventLog) FirstToken(o *observation.Request) { e.add("first", o) }
func (e eventLog) Token(o *observation.Request)      { e.add("token", o) }
func (e eventLog) Done(o *observation.Request)       { e.add("done", o) }
func (e eventLog) Dropped(o *observation.Request)    { e.add("dropped:"+o.DropReason, o) }

// TestObserversFanOut: Observers hands each event to each observer in
// order; Results hears only the ends of requests.
func TestObserversFanOut(t *testing.T) {
	var mu sync.Mutex
	var log []string
	var ended []uint64
	os := Observers{eventLog{"a", &mu, &log}, Results(func(o *observation.Request) { ended = append(ended, o.Seq) }), eventLog{"b", &mu, &log}}
	o := &observation.Request{Seq: 7}
	os.Sent(o)
	os.FirstToken(o)
	os.Token(o)
	os.Done(o)
	os.Dropped(&observation.Request{Seq: 8, DropReason: DropInFlightCap})
	want := []string{"a sent 7", "b sent 7", "a first 7", "b first 7", "a token 7", "b token 7", "a done 7", "b done 7",
		"a dropped:in_flight_cap 8", "b dropped:in_flight_cap 8"}
	if !slices.Equal(log, want) {
		t.Errorf("events %q, want %q", log, want)
	}
	if !slices.Equal(ended, []uint64{7, 8}) {
		t.Errorf("Results heard %v, want the done 7 and the dropped 8", ended)
	}
	// An observer of the ends only embeds EndObserver for the rest.
	var end EndObserver
	end.Sent(o)
	end.FirstToken(o)
	end.Token(o)
}

// refuseAll is a Ceiling that lets nothing through.
type refuseAll struct{}

func (refuseAll) Allow() bool { return false }

// TestRunnerOpenLoop: an open loop sends each arrival of its schedule, ids
// numbered by arrival, each request's events to the observer; an arrival
// that the target's readiness or the wire ceiling refuses is dropped with
// its reason and never sent; the run ends at Duration on the schedule's
// clock.
func TestRunnerOpenLoop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		at       []time.Duration
		limits   Limits
		ready    func() bool
		sent     []string
		dropped  string // the reason of every drop
		nDropped int
	}{
		{"all sent", make([]time.Duration, 4), Limits{MaxInFlight: 10}, nil, []string{"w-0", "w-1", "w-2", "w-3"}, "", 0},
		{"not ready", make([]time.Duration, 3), Limits{MaxInFlight: 10}, func() bool { return false }, nil, DropTargetNotReady, 3},
		{"ceiling", make([]time.Duration, 2), Limits{MaxInFlight: 10, Ceiling: refuseAll{}}, nil, nil, DropRateCeiling, 2},
		{"duration", []time.Duration{0, 0, 10 * time.Millisecond, time.Hour, 0}, Limits{MaxInFlight: 10, Duration: time.Minute}, nil, []string{"w-0", "w-1", "w-2"}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var log []string
			d := &doer{}
			r := Plan{Name: "w", Target: &client.Target{Name: "t"}, Client: d, Limits: tc.limits, Ready: tc.ready,
				Source:   OpenLoop{Schedule: &offsets{at: tc.at}, Prompts: samePrompt{}},
				Observer: eventLog{"o", &mu, &log}}.Runner()
			r.Run(context.Background())
			slices.Sort(d.ids)
			if !slices.Equal(d.ids, tc.sent) {
				t.Errorf("sent %q, want %q", d.ids, tc.sent)
			}
			count := map[string]int{}
			for _, l := range log {
				count[strings.Fields(l)[1]]++
			}
			want := map[string]int{}
			if n := len(tc.sent); n > 0 {
				want = map[string]int{"sent": n, "first": n, "token": 3 * n, "done": n}
			}
			if tc.nDropped > 0 {
				want["dropped:"+tc.dropped] = tc.nDropped
			}
			if !maps.Equal(count, want) {
				t.Errorf("events %v, want %v", count, want)
			}
			if s := r.Status(); s.State != StateFinished || r.InFlight() != 0 {
				t.Errorf("after the run: %+v, %d in flight; want finished, none", s, r.InFlight())
			}
		})
	}
}

// TestRunnerInFlightCap: arrivals due while the cap is full are dropped
// with its reason; those admitted end once released.
func TestRunnerInFlightCap(t *testing.T) {
	var mu sync.Mutex
	var log []string
	dropped := make(chan struct{}, 5)
	d := &doer{gate: make(chan struct{})}
	r := Plan{Name: "w", Target: &client.Target{Name: "t"}, Client: d, Limits: Limits{MaxInFlight: 2},
		Source: OpenLoop{Schedule: &offsets{at: make([]time.Duration, 5)}, Prompts: samePrompt{}},
		Observer: Observers{eventLog{"o", &mu, &log}, Results(func(o *observation.Request) {
			if o.Outcome == observation.Dropped {
				dropped <- struct{}{}
			}
		})}}.Runner()
	done := make(chan struct{})
	go func() { r.Run(context.Background()); close(done) }()
	for i := range 3 {
		select {
		case <-dropped:
		case <-time.After(time.Minute): // a guard against a hang, not a timing
			close(d.gate)
			<-done
			t.Fatalf("%d of 5 arrivals dropped at a cap of 2, want 3", i)
		}
	}
	if n := r.InFlight(); n != 2 {
		t.Errorf("%d in flight at the cap, want 2", n)
	}
	close(d.gate)
	<-done
	mu.Lock()
	defer mu.Unlock()
	nDone, nDropped := 0, 0
	for _, l := range log {
		switch {
		case slices.Contains([]string{"o done 0", "o done 1"}, l):
			nDone++
		case strings.HasPrefix(l, "o dropped:"):
			nDropped++
			if !strings.HasPrefix(l, "o dropped:"+DropInFlightCap+" ") {
				t.Errorf("dropped for another reason: %s", l)
			}
		}
	}
	if nDone != 2 || nDropped != 3 {
		t.Errorf("%d done (want the first 2), %d dropped (want 3): %q", nDone, nDropped, log)
	}
}

// monitorLog is a Monitor that logs the states and the limits.
type monitorLog struct {
	noMonitor
	mu     sync.Mutex
	states []string
	limits string
}

func (m *monitorLog) State(s string) { m.mu.Lock(); m.states = append(m.states, s); m.mu.Unlock() }
func (m *monitorLog) Limits(n int, rate float64, checks bool) {
	m.limits = fmt.Sprintf("%d %g %v", n, rate, checks)
}

// TestRunnerStatus: a workload is calibrating until its source is
// prepared, then running and finished; a failed preparation fails it with
// the reason and sends nothing; one stopped while preparing is finished.
func TestRunnerStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(ctx context.Context) (Source, error)
		cancel  bool
		states  []string
		want    Status
		sent    int
	}{
		{"prepared", func(context.Context) (Source, error) {
			return OpenLoop{Schedule: &offsets{at: make([]time.Duration, 2)}, Prompts: samePrompt{}}, nil
		}, false, []string{StateCalibrating, StateRunning, StateFinished}, Status{State: StateFinished}, 2},
		{"failed", func(context.Context) (Source, error) { return nil, errors.New("tokenize: 503") },
			false, []string{StateCalibrating, StateFailed}, Status{StateFailed, "tokenize: 503"}, 0},
		{"stopped", func(ctx context.Context) (Source, error) { <-ctx.Done(); return nil, ctx.Err() },
			true, []string{StateCalibrating, StateFinished}, Status{StateFinished, "stopped while calibrating"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mon := &monitorLog{}
			d := &doer{}
			r := Plan{Name: "w", Target: &client.Target{Name: "t"}, Client: d, Prepare: tc.prepare, Monitor: mon,
				Limits: Limits{MaxInFlight: 3, MaxRate: 5}}.Runner()
			if s := r.Status(); s.State != StateCalibrating {
				t.Errorf("before Run: %+v", s)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancel {
				cancel()
			}
			r.Run(ctx)
			cancel()
			if got := r.Status(); got != tc.want {
				t.Errorf("status %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(mon.states, tc.states) {
				t.Errorf("states %q, want %q", mon.states, tc.states)
			}
			if len(d.ids) != tc.sent {
				t.Errorf("%d sent, want %d", len(d.ids), tc.sent)
			}
			if tc.sent > 0 && mon.limits != "3 5 false" {
				t.Errorf("limits told %q, want the plan's", mon.limits)
			}
		})
	}
}

// TestRunnerDrain: a drain sends no later arrival and counts none
// dropped; the requests in flight run on for the grace, and those it cuts
// short end cancelled, not failed; a drain before Run sends nothing.
func TestRunnerDrain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grace   time.Duration
		release bool // the requests end on their own once drained
		want    observation.Outcome
	}{
		{"grace runs out", 0, false, observation.Cancelled},
		{"requests end within the grace", time.Hour, true, observation.Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var outcomes []observation.Outcome
			d := &doer{gate: make(chan struct{}), sent: make(chan struct{}, 3)}
			r := Plan{Name: "w", Target: &client.Target{Name: "t"}, Client: d, Limits: Limits{MaxInFlight: 10},
				Source: OpenLoop{Schedule: &offsets{at: []time.Duration{0, 0, time.Hour}}, Prompts: samePrompt{}},
				Observer: Results(func(o *observation.Request) {
					mu.Lock()
					outcomes = append(outcomes, o.Outcome)
					mu.Unlock()
				})}.Runner()
			done := make(chan struct{})
			go func() { r.Run(context.Background()); close(done) }()
			<-d.sent
			<-d.sent
			r.Drain(tc.grace)
			r.Drain(0) // the first grace counts
			if tc.release {
				close(d.gate)
			}
			<-done
			if !slices.Equal(outcomes, []observation.Outcome{tc.want, tc.want}) {
				t.Errorf("outcomes %v, want two %s and no third arrival", outcomes, tc.want)
			}
		})
	}
	// Drained before Run: it returns without waiting for the arrival due
	// in an hour. (The drain reaches the loop through a goroutine, so an
	// arrival due at once may still go out.)
	d := &doer{}
	r := Plan{Name: "w", Target: &client.Target{Name: "t"}, Client: d, Limits: Limits{MaxInFlight: 10},
		Source: OpenLoop{Schedule: &offsets{at: []time.Duration{0, time.Hour}}, Prompts: samePrompt{}}}.Runner()
	r.Drain(time.Second)
	r.Run(context.Background())
	if len(d.ids) > 1 {
		t.Errorf("drained before Run: sent %q", d.ids)
	}
}

// replayRows is a Requests of a replay: it numbers each request's prompt
// by its arrival and follows the requests' ends.
type replayRows struct {
	EndObserver
	mu      sync.Mutex
	seqs    []uint64
	ended   map[uint64]observation.Request
	dropped int
}

func (p *replayRows) Next() prompt.Prompt { return prompt.Prompt{Text: "row", OutputTokens: 2} }
func (p *replayRows) Request(seq uint64, req *client.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seqs = append(p.seqs, seq)
	req.Prompt = fmt.Sprint("row ", seq)
}
func (p *replayRows) Done(o *observation.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended[o.Seq] = *o
}
func (p *replayRows) Dropped(*observation.Request) { p.mu.Lock(); p.dropped++; p.mu.Unlock() }

// TestRunnerLockstep: a bound source's requests are built in its
// schedule's order, each with its arrival's number; the rows that share
// an instant are scheduled at one instant, ReplayLead after Run started,
// and sent no earlier; the source follows each of its requests beside
// the runner's observer.
func TestRunnerLockstep(t *testing.T) {
	rows := &replayRows{ended: map[uint64]observation.Request{}}
	var ended []uint64
	var mu sync.Mutex
	d := &doer{}
	r := Plan{Name: "replay", Target: &client.Target{Name: "t"}, Client: d, Limits: Limits{MaxInFlight: 10},
		Source: Lockstep{Schedule: &offsets{at: []time.Duration{0, 0, 0, 50 * time.Millisecond}}, Requests: rows},
		Observer: Results(func(o *observation.Request) {
			mu.Lock()
			ended = append(ended, o.Seq)
			mu.Unlock()
		})}.Runner()
	start := time.Now()
	r.Run(context.Background())
	if !slices.Equal(rows.seqs, []uint64{0, 1, 2, 3}) {
		t.Errorf("requests built for arrivals %v, want 0 to 3 in order", rows.seqs)
	}
	slices.Sort(ended)
	if !slices.Equal(ended, []uint64{0, 1, 2, 3}) || len(rows.ended) != 4 || rows.dropped != 0 {
		t.Fatalf("observer heard %v, the source %d ends and %d drops; want all four ended", ended, len(rows.ended), rows.dropped)
	}
	first := rows.ended[0].Scheduled
	for seq, o := range rows.ended {
		wantAt := first
		if seq == 3 {
			wantAt = first.Add(50 * time.Millisecond)
		}
		if !o.Scheduled.Equal(wantAt) {
			t.Errorf("row %d scheduled %v after the first, want %v", seq, o.Scheduled.Sub(first), wantAt.Sub(first))
		}
		if o.Sent.Before(o.Scheduled) || o.Outcome != observation.Success {
			t.Errorf("row %d: sent %v before its instant, or %s", seq, o.Scheduled.Sub(o.Sent), o.Outcome)
		}
	}
	if first.Before(start.Add(ReplayLead)) {
		t.Errorf("the replay's clock started %v after Run, want at least ReplayLead %v", first.Sub(start), ReplayLead)
	}
	slices.Sort(d.ids)
	if !slices.Equal(d.ids, []string{"replay-0", "replay-1", "replay-2", "replay-3"}) {
		t.Errorf("request ids %q", d.ids)
	}
}

// TestLookahead: a bound source prepares up to lookaheadItems; an open
// loop about a second of its rate ceiling, at least 2, at most
// lookaheadItems.
func TestLookahead(t *testing.T) {
	for _, tc := range []struct {
		bound   bool
		maxRate float64
		want    int
	}{
		{true, 1, lookaheadItems}, {false, 0, 2}, {false, 1, 2}, {false, 2.5, 3}, {false, 40, 40}, {false, 1e6, lookaheadItems},
	} {
		r := Plan{Limits: Limits{MaxRate: tc.maxRate}}.Runner()
		if got := r.lookahead(tc.bound); got != tc.want {
			t.Errorf("lookahead(bound %v, max rate %v) = %d, want %d", tc.bound, tc.maxRate, got, tc.want)
		}
	}
}

// TestPlanCeiling: the plan's own ceiling when it has one; none for an
// unceiled plan or one without a rate; else one of its rate.
func TestPlanCeiling(t *testing.T) {
	own := refuseAll{}
	for _, tc := range []struct {
		name   string
		limits Limits
		want   string // "own", "none" or "rate"
	}{
		{"own", Limits{MaxRate: 10, Ceiling: own}, "own"},
		{"unceiled", Limits{MaxRate: 10, Unceiled: true}, "none"},
		{"no rate", Limits{}, "none"},
		{"rate", Limits{MaxRate: 10, Burst: 4}, "rate"},
	} {
		p := Plan{Limits: tc.limits}
		c := p.ceiling()
		got := "rate"
		switch {
		case c == nil:
			got = "none"
		case c == Ceiling(own):
			got = "own"
		}
		if got != tc.want {
			t.Errorf("%s: ceiling %s, want %s", tc.name, got, tc.want)
		}
	}
	// The rate's ceiling lets the burst through at once, and not much more.
	c := (&Plan{Limits: Limits{MaxRate: 1, Burst: 4}}).ceiling()
	allowed := 0
	for range 20 {
		if c.Allow() {
			allowed++
		}
	}
	if allowed < 4 || allowed > 6 {
		t.Errorf("a ceiling of 1/s with a burst of 4 allowed %d of 20 at once", allowed)
	}
}
