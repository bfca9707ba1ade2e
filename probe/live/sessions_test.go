package live

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/sessions"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// sessionRun is what one sessions workload did: every request's
// observation by sequence number, the simulator, and the series.
type sessionRun struct {
	obs      map[uint64]observation.Request
	sim      *simulator.Simulator
	url      string         // the simulator's
	sessions *sessionSeries // the workload's session series
	agents   *agentSeries   // its agent series
	ser      *Series        // the workload's live series
}

// runSessions builds the one sessions workload of a configuration (its
// workload block is workload, after "target: t") against a simulator with
// cfg, as the exporter does, and runs it until it ends or stop returns.
func runSessions(t *testing.T, cfg simulator.Config, flavor, block string, stop func(ctx context.Context, cancel context.CancelFunc, started func() float64)) sessionRun {
	t.Helper()
	return runSessionsClient(t, cfg, flavor, block, stop, nil)
}

// runSessionsClient is runSessions whose workload client's options
// clientOptions adjusts (nil: none), as Options.ClientOptions does.
func runSessionsClient(t *testing.T, cfg simulator.Config, flavor, block string, stop func(ctx context.Context, cancel context.CancelFunc, started func() float64), clientOptions func(*client.Options)) sessionRun {
	t.Helper()
	url, sim := simulatortest.StartTest(t, cfg)
	c, err := config.Parse([]byte(fmt.Sprintf(`
targets:
  - {name: t, url: %q, model: sim-model, flavor: %s, timeout: 10s}
workloads:
  - name: chat
    target: t
%s`, url, flavor, block)), filepath.Join(t.TempDir(), "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	// A second of tolerance for the session arrivals' wire ceiling: these
	// tests are not about a client late under the race detector on a
	// shared machine, which would have its overdue sessions refused.
	metrics := NewMetrics(reg)
	runners, clients, err := Build(context.Background(), c, metrics, Options{DegradedLag: time.Second, ClientOptions: clientOptions}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		for _, cl := range clients {
			cl.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r := runners[0]
	var mu sync.Mutex
	obs := map[uint64]observation.Request{}
	onResult(r, func(o *observation.Request) {
		mu.Lock()
		obs[o.Seq] = *o
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	if stop != nil {
		series := metrics.sessions.series(liveSeries(r).lv)
		stop(ctx, cancel, func() float64 { return testutil.ToFloat64(series.started) })
	}
	<-done
	if st := r.Status(); st.State != workload.StateFinished {
		t.Fatalf("workload %s: %s", st.State, st.Reason)
	}
	drawer := r.Source.(workload.Lockstep).Schedule.(interface{ DrawerDone() <-chan struct{} })
	select {
	case <-drawer.DrawerDone():
	case <-time.After(5 * time.Second):
		t.Fatal("the drawer goroutine outlived its run by 5 s")
	}
	mu.Lock()
	defer mu.Unlock()
	ser := liveSeries(r)
	// The same series as the sessions' recorder: WithLabelValues finds
	// the children Build created.
	return sessionRun{obs: obs, sim: sim, url: url, sessions: metrics.sessions.series(ser.lv), agents: metrics.agents.series(ser.lv), ser: ser}
}

// ended is the sessions ended by reason, and started those started.
func (sr sessionRun) ended() (started float64, by map[string]float64) {
	by = map[string]float64{}
	for _, r := range sessions.EndReasons {
		by[r] = testutil.ToFloat64(sr.sessions.ended[r])
	}
	return testutil.ToFloat64(sr.sessions.started), by
}

// turnCounts is the session_turns histogram: its count and sum.
func (sr sessionRun) turnCounts(t *testing.T) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := sr.sessions.turns.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// conversations groups the requests into sessions: turn k+1 is the
// request scheduled exactly the think time after turn k's end (on the
// monotonic clock, as the runner schedules it). It returns each session's
// requests in turn order.
func (sr sessionRun) conversations(think time.Duration) [][]observation.Request {
	all := make([]observation.Request, 0, len(sr.obs))
	for _, o := range sr.obs {
		all = append(all, o)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	after := func(prev observation.Request) int {
		for j, o := range all {
			if prev.Outcome == observation.Success && o.Scheduled.Sub(prev.End) == think {
				return j
			}
		}
		return -1
	}
	follows := make([]bool, len(all))
	for _, o := range all {
		if j := after(o); j >= 0 {
			follows[j] = true
		}
	}
	var out [][]observation.Request
	for i := range all {
		if follows[i] {
			continue
		}
		conv := []observation.Request{all[i]}
		for j := after(all[i]); j >= 0; j = after(all[j]) {
			conv = append(conv, all[j])
		}
		out = append(out, conv)
	}
	return out
}

// TestSessionsGroundTruth: ten sessions of four turns against the
// simulator, for a chat and a completions flavor. Every session completes;
// the sessions arrive at the configured rate (one every 50 ms, the
// schedule's instants exactly, the simulator's arrivals within a wide
// margin); turn k+1 is scheduled exactly turn k's end plus the think time,
// and the simulator receives it no earlier; each turn's prompt is the
// previous prompt, the server's reply and the new message (the
// simulator's prompt counts); and the simulator's prefix cache serves turn
// k+1 the previous turn's prompt in whole blocks, as its model says
// (doc.go: the generation prompt is not cached as the reply's start, and
// generated blocks are not cached): chat hits floor((P_k - 1)/16) blocks,
// completions floor(P_k/16). The session series agree.
func TestSessionsGroundTruth(t *testing.T) {
	const (
		sessionsN = 10
		turns     = 4
		think     = 40 * time.Millisecond
		spacing   = 50 * time.Millisecond
		user, out = 40, 24
		bs        = 16
	)
	for _, tc := range []struct {
		flavor string
		// growth is what a turn adds to the prompt besides the reply and
		// the new message's user_tokens. In the simulator's chat template
		// (tokenizer.go): the previous generation prompt gives way to the
		// reply's message (-1 + 3), the new message is user_tokens less
		// the generation prompt its calibration counted (-1), and a new
		// generation prompt follows (+1): 2. Completions add nothing.
		growth int
		hit    func(prev int) int
	}{
		{"openai-chat", 2, func(p int) int { return (p - 1) / bs * bs }},
		{"openai-completions", 0, func(p int) int { return p / bs * bs }},
		// The conversation as the Responses API's input list, templated
		// as chat's messages.
		{"openai-responses", 2, func(p int) int { return (p - 1) / bs * bs }},
	} {
		t.Run(tc.flavor, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.BlockSize = bs
			sr := runSessions(t, cfg, tc.flavor, fmt.Sprintf(`    arrival: {process: constant, stages: [{rate: %g, duration: %v}]}
    sampling: {ignore_eos: true}
    sessions:
      turns: {dist: fixed, mean: %d}
      think_time: {dist: fixed, mean: %v}
      user_tokens: {dist: fixed, mean: %d}
      output_tokens: {dist: fixed, mean: %d}
      seed: 7
`, float64(time.Second/spacing), sessionsN*spacing, turns, think, user, out), nil)

			started, ended := sr.ended()
			if started != sessionsN || ended[sessions.Completed] != sessionsN {
				t.Fatalf("started %v, ended %v; want %d completed", started, ended, sessionsN)
			}
			if n, sum := sr.turnCounts(t); n != sessionsN || sum != sessionsN*turns {
				t.Errorf("session_turns: %d observations, sum %v; want %d, %d", n, sum, sessionsN, sessionsN*turns)
			}
			if len(sr.obs) != sessionsN*turns {
				t.Fatalf("%d requests, want %d", len(sr.obs), sessionsN*turns)
			}
			convs := sr.conversations(think)
			if len(convs) != sessionsN {
				t.Fatalf("%d conversations found, want %d", len(convs), sessionsN)
			}
			sort.Slice(convs, func(i, j int) bool { return convs[i][0].Scheduled.Before(convs[j][0].Scheduled) })
			var firstArrivals []time.Time
			for i, conv := range convs {
				if len(conv) != turns {
					t.Fatalf("session %d has %d turns, want %d", i, len(conv), turns)
				}
				if i > 0 {
					if gap := conv[0].Scheduled.Sub(convs[i-1][0].Scheduled); gap != spacing {
						t.Errorf("session %d scheduled %v after the previous, want %v", i, gap, spacing)
					}
				}
				var prev simulator.PrefixRecord
				for k, o := range conv {
					if o.Outcome != observation.Success || o.OutputTokens != out {
						t.Fatalf("session %d turn %d: %s, %d tokens", i, k+1, o.Outcome, o.OutputTokens)
					}
					rec, ok := sr.sim.PrefixRecord(fmt.Sprintf("chat-%d", o.Seq))
					if !ok {
						t.Fatalf("session %d turn %d: no ground truth for request %d", i, k+1, o.Seq)
					}
					if rec.PromptTokens != o.PromptTokens {
						t.Errorf("session %d turn %d: usage says %d prompt tokens, the engine %d", i, k+1, o.PromptTokens, rec.PromptTokens)
					}
					if k == 0 {
						firstArrivals = append(firstArrivals, rec.Arrival)
						if rec.HitTokens != 0 {
							t.Errorf("session %d: its first turn hit %d cached tokens", i, rec.HitTokens)
						}
						prev = rec
						continue
					}
					if want := prev.PromptTokens + out + user + tc.growth; rec.PromptTokens != want {
						t.Errorf("session %d turn %d: %d prompt tokens, want %d (previous %d + reply %d + message %d + %d)",
							i, k+1, rec.PromptTokens, want, prev.PromptTokens, out, user, tc.growth)
					}
					if want := tc.hit(prev.PromptTokens); rec.HitTokens != want {
						t.Errorf("session %d turn %d: %d tokens hit the prefix cache, want %d (previous prompt %d, blocks of %d)",
							i, k+1, rec.HitTokens, want, prev.PromptTokens, bs)
					}
					if gap := rec.Arrival.Sub(prev.Finished); gap < think || gap > think+500*time.Millisecond {
						t.Errorf("session %d turn %d arrived %v after the previous reply's last token, want %v plus the client's delay", i, k+1, gap, think)
					}
					prev = rec
				}
			}
			// The simulator saw the sessions arrive at the rate: nine gaps
			// of 50 ms between the first and the last, within 200 ms.
			slices.SortFunc(firstArrivals, func(a, b time.Time) int { return a.Compare(b) })
			if span := firstArrivals[len(firstArrivals)-1].Sub(firstArrivals[0]); span < (sessionsN-1)*spacing-100*time.Millisecond || span > (sessionsN-1)*spacing+200*time.Millisecond {
				t.Errorf("first turns reached the simulator over %v, want about %v", span, (sessionsN-1)*spacing)
			}
			// TTFT by turn: every turn's first token, under its label, and
			// the workload's TTFT holds them all.
			if n := histCount(t, sr.ser.ttft); n != sessionsN*turns {
				t.Errorf("the workload's TTFT has %d observations, want %d", n, sessionsN*turns)
			}
			for k := 1; k <= turns; k++ {
				if n := histCount(t, sr.sessions.ttft[turnIndex(k)]); n != sessionsN {
					t.Errorf("turn %d: %d TTFT observations, want %d", k, n, sessionsN)
				}
				if n := histCount(t, sr.sessions.prompt[turnIndex(k)]); n != sessionsN {
					t.Errorf("turn %d: %d prompt-token observations, want %d", k, n, sessionsN)
				}
			}
			if n := histCount(t, sr.sessions.think); n != sessionsN*(turns-1) {
				t.Errorf("%d think times observed, want %d", n, sessionsN*(turns-1))
			}
			if v := testutil.ToFloat64(sr.sessions.active); v != 0 {
				t.Errorf("%v sessions active after the run", v)
			}
		})
	}
}

// TestSessionsEndEarly: each way a session ends before its last turn is
// counted under its reason, and every session started is ended once.
func TestSessionsEndEarly(t *testing.T) {
	const common = `    sampling: {ignore_eos: true}
    sessions:
      user_tokens: {dist: fixed, mean: 40}
      output_tokens: {dist: fixed, mean: 24}
`
	for _, tc := range []struct {
		name     string
		sim      func(*simulator.Config)
		workload string
		stop     func(ctx context.Context, cancel context.CancelFunc, started func() float64)
		want     map[string]float64 // ended by reason; dropped under "dropped:<reason>"
		turns    float64            // successful turns, in all
		// allStopped: every session started is stopped (want is unused).
		allStopped bool
	}{
		{
			// P1 = 40; turn 2: 40 + 24 + 40 = 104 prompt + 24 <= 150;
			// turn 3: 106 + 24 + 40 + 24 > 150.
			name:     "max_conversation_tokens",
			workload: "    arrival: {process: constant, stages: [{rate: 20, duration: 100ms}]}\n" + common + "      turns: {dist: fixed, mean: 6}\n      think_time: {dist: fixed, mean: 1ms}\n      max_conversation_tokens: 150\n",
			want:     map[string]float64{sessions.ContextLimit: 2}, turns: 4,
		},
		{
			name:     "max_model_len",
			sim:      func(c *simulator.Config) { c.MaxModelLen = 150 },
			workload: "    arrival: {process: constant, stages: [{rate: 20, duration: 100ms}]}\n" + common + "      turns: {dist: fixed, mean: 6}\n      think_time: {dist: fixed, mean: 1ms}\n",
			want:     map[string]float64{sessions.ContextLimit: 2}, turns: 4,
		},
		{
			name: "turn_failed",
			sim: func(c *simulator.Config) {
				c.Faults.ErrorRate, c.Faults.ErrorStatus = 1, 503
			},
			workload: "    arrival: {process: constant, stages: [{rate: 20, duration: 150ms}]}\n" + common + "      turns: {dist: uniform, min: 2, max: 6}\n",
			want:     map[string]float64{sessions.TurnFailed: 3}, turns: 0,
		},
		{
			// One request in flight at a time, and a turn lasts 24
			// decode steps of 20 ms: the second session's first turn
			// finds the cap full, 50 ms after the first's.
			name:     "turn_dropped",
			sim:      func(c *simulator.Config) { c.TimeScale = 1 },
			workload: "    max_in_flight: 1\n    arrival: {process: constant, stages: [{rate: 20, duration: 100ms}]}\n" + common + "      turns: {dist: fixed, mean: 1}\n      max_active: 2\n",
			want:     map[string]float64{sessions.Completed: 1, sessions.TurnDropped: 1}, turns: 1,
		},
		{
			// One session alive at a time, each thinking 1 s after its
			// first reply: the next two arrivals are dropped.
			name:     "session_cap",
			workload: "    arrival: {process: constant, stages: [{rate: 20, duration: 150ms}]}\n" + common + "      turns: {dist: fixed, mean: 2}\n      think_time: {dist: fixed, mean: 300ms}\n      max_active: 1\n",
			want:     map[string]float64{sessions.Completed: 1, "dropped:" + sessions.DropCap: 2}, turns: 2,
		},
		{
			// The workload's duration ends while both sessions think: they
			// arrive at 100 and 200 ms, and their first turns have 1.8 s
			// to end before it, however busy the machine.
			name:     "duration",
			workload: "    duration: 2s\n    arrival: {process: constant, stages: [{rate: 10, duration: 250ms}]}\n" + common + "      turns: {dist: fixed, mean: 6}\n      think_time: {dist: fixed, mean: 10s}\n",
			want:     map[string]float64{sessions.Stopped: 2}, turns: 2,
		},
		{
			// The run is stopped (a reload) with the first session's turn
			// in flight: a 1000-token reply at 20 ms a token.
			name:     "cancelled",
			sim:      func(c *simulator.Config) { c.TimeScale = 1 },
			workload: "    arrival: {process: constant, rate: 10}\n" + strings.Replace(common, "mean: 24", "mean: 1000", 1) + "      turns: {dist: fixed, mean: 6}\n      think_time: {dist: fixed, mean: 10ms}\n",
			// Stopped once a session has started, not after a fixed
			// sleep: on a starved machine no session had started 500 ms
			// after the run did.
			stop: func(ctx context.Context, cancel context.CancelFunc, started func() float64) {
				for started() < 1 && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
			},
			// How many sessions arrived before the stop is the clock's
			// business; each of them is stopped.
			allStopped: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			if tc.sim != nil {
				tc.sim(&cfg)
			}
			sr := runSessions(t, cfg, "openai-chat", tc.workload, tc.stop)
			started, ended := sr.ended()
			if tc.allStopped {
				if started < 1 {
					t.Fatal("no session started")
				}
				tc.want = map[string]float64{sessions.Stopped: started}
			}
			sum := 0.0
			for r, n := range ended {
				sum += n
				if want := tc.want[r]; n != want {
					t.Errorf("ended %s: %v, want %v", r, n, want)
				}
			}
			for _, r := range sessions.DropReasons {
				if got, want := testutil.ToFloat64(sr.sessions.dropped[r]), tc.want["dropped:"+r]; got != want {
					t.Errorf("dropped %s: %v, want %v", r, got, want)
				}
			}
			if sum != started {
				t.Errorf("%v sessions started, %v ended", started, sum)
			}
			if _, turns := sr.turnCounts(t); turns != tc.turns {
				t.Errorf("%v successful turns counted, want %v", turns, tc.turns)
			}
			if v := testutil.ToFloat64(sr.sessions.active); v != 0 {
				t.Errorf("%v sessions active after the run", v)
			}
		})
	}
}
