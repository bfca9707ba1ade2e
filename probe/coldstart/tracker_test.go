package coldstart

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

var t0 = time.Unix(1_700_000_000, 0)

// at is t0 plus n tenths of a second.
func at(n float64) time.Time { return t0.Add(time.Duration(n * float64(100*time.Millisecond))) }

// event is one input to a tracker.
type event struct {
	poll *engine.Poll
	ok   time.Time // a success's first token
	sent time.Time // its scheduled send
	fail bool      // a request that could not connect
}

func scrape(n float64, r engine.Readiness, ps time.Time) event {
	return event{poll: &engine.Poll{Target: "t", At: at(n), Readiness: r, Full: true, ProcessStart: ps}}
}
func poll(n float64, r engine.Readiness) event {
	return event{poll: &engine.Poll{Target: "t", At: at(n), Readiness: r}}
}

// ok is a success with its first token at n, sent one tick (100 ms) before.
func ok(n float64) event { return okSent(n-1, n) }

// okSent is a success sent at sent with its first token at n.
func okSent(sent, n float64) event { return event{ok: at(n), sent: at(sent)} }
func fail() event                  { return event{fail: true} }

var none time.Time

func feed(tr *Tracker, events []event) {
	obs := tr.Observer("t")
	for _, e := range events {
		switch {
		case e.poll != nil:
			tr.Polled(*e.poll)
		case e.fail:
			obs.Done(&observation.Request{Outcome: observation.Disconnected})
		default:
			obs.Done(&observation.Request{Outcome: observation.Success, Scheduled: e.sent, FirstToken: e.ok, End: e.ok.Add(time.Second)})
		}
	}
}

// TestTrackerRules feeds the tracker the polls and requests of each kind of
// start and checks the start it reports against the instants fed in.
func TestTrackerRules(t *testing.T) {
	const (
		unreachable = engine.Unreachable
		unready     = engine.Unready
		ready       = engine.Ready
		answering   = engine.Answering
	)
	for _, tc := range []struct {
		name   string
		events []event
		starts uint64
		want   Start // when starts > 0
		// epoch: the server epoch after the events (Tracker.Epoch), the
		// times the server was found newly serving.
		epoch uint64
	}{
		{"already serving when first seen", []event{scrape(10, ready, at(0)), ok(11)}, 0, Start{}, 1},
		{"already serving, no process start", []event{scrape(10, ready, none), ok(11)}, 0, Start{}, 1},
		{"a sidecar beside a loading vLLM", []event{
			scrape(1, unreachable, none), poll(2, unreachable), poll(30, ready), scrape(31, ready, at(0.5)), ok(32), ok(33),
		}, 1, Start{From: FromProcessStart, At: at(0.5), Ready: at(30), FirstToken: at(32)}, 1},
		{"first token before the scrape that reads the start", []event{
			scrape(1, unreachable, none), poll(30, ready), ok(30.5), scrape(31, ready, at(0.5)),
		}, 1, Start{From: FromProcessStart, At: at(0.5), Ready: at(30), FirstToken: at(30.5)}, 1},
		{"a restart between two scrapes", []event{
			scrape(1, ready, at(0)), ok(2), fail(), ok(50), scrape(60, ready, at(40)),
		}, 1, Start{From: FromProcessStart, At: at(40), Ready: at(60), FirstToken: at(50)}, 2},
		{"a restart between two scrapes, idle: the next success", []event{
			scrape(1, ready, at(0)), ok(2), scrape(60, ready, at(40)), ok(70),
		}, 1, Start{From: FromProcessStart, At: at(40), Ready: at(60), FirstToken: at(70)}, 2},
		{"down and back with the same process: no start", []event{
			scrape(1, ready, at(0)), scrape(2, unreachable, none), poll(3, ready), scrape(4, ready, at(0)), ok(5),
		}, 0, Start{}, 1},
		{"no process start: from the first refusal", []event{
			scrape(1, ready, none), scrape(5, unreachable, none), poll(6, unreachable), poll(20, ready), scrape(21, ready, none), ok(22),
		}, 1, Start{From: FromRefusal, At: at(5), Ready: at(20), FirstToken: at(22)}, 2},
		{"no process start, seen loading: from the first unready", []event{
			scrape(1, unready, none), poll(2, unready), poll(10, ready), scrape(11, ready, none), ok(12),
		}, 1, Start{From: FromUnready, At: at(1), Ready: at(10), FirstToken: at(12)}, 1},
		{"unready with a process start opens at once", []event{
			scrape(1, unready, at(0)), poll(2, unready),
		}, 1, Start{From: FromProcessStart, At: at(0)}, 0},
		{"unready with a process start, then ready", []event{
			scrape(1, unready, at(0)), poll(10, ready), scrape(11, ready, at(0)), ok(12),
		}, 1, Start{From: FromProcessStart, At: at(0), Ready: at(10), FirstToken: at(12)}, 1},
		{"no health endpoint: no ready phase, even later", []event{
			scrape(1, unreachable, none), scrape(5, answering, none), ok(6), scrape(20, ready, none),
		}, 1, Start{From: FromRefusal, At: at(1), FirstToken: at(6)}, 1},
		{"the first success after the start gives the first token, once", []event{
			scrape(1, unreachable, none), scrape(5, ready, at(0.5)), ok(0.4), ok(8), ok(7),
		}, 1, Start{From: FromProcessStart, At: at(0.5), Ready: at(5), FirstToken: at(8)}, 1},
		{"a success before a down poll is not the next start's", []event{
			scrape(1, ready, none), scrape(2, unreachable, none), ok(1.5), poll(3, unreachable), poll(9, ready), scrape(10, ready, none),
		}, 1, Start{From: FromRefusal, At: at(2), Ready: at(9)}, 2},
		{"two restarts", []event{
			scrape(1, unreachable, none), scrape(5, ready, at(0)), ok(6),
			scrape(20, unreachable, none), poll(40, ready), scrape(41, ready, at(25)), ok(42),
		}, 2, Start{From: FromProcessStart, At: at(25), Ready: at(40), FirstToken: at(42)}, 2},
		{"a restart seen loading (503) after serving", []event{
			scrape(1, ready, at(0)), ok(2), scrape(20, unready, at(15)), poll(25, unready), poll(30, ready), ok(31),
		}, 1, Start{From: FromProcessStart, At: at(15), Ready: at(30), FirstToken: at(31)}, 2},
		{"Ollama: ready at once, the model loaded by the first request", []event{
			scrape(1, unreachable, none), poll(2, unreachable), poll(3, ready), scrape(4, ready, none), okSent(5, 12),
		}, 1, Start{From: FromRefusal, At: at(1), Ready: at(3), FirstToken: at(12), FirstRequest: at(5)}, 1},
		{"the first success sent before the start: no first request TTFT", []event{
			scrape(1, ready, at(0)), ok(2), scrape(20, ready, at(15)), okSent(14, 21), ok(30),
		}, 1, Start{From: FromProcessStart, At: at(15), Ready: at(20), FirstToken: at(21)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(nil)
			feed(tr, tc.events)
			if e := tr.Epoch("t"); e != tc.epoch {
				t.Errorf("epoch %d, want %d", e, tc.epoch)
			}
			got, n, found := tr.Latest("t")
			if n != tc.starts || found != (tc.starts > 0) {
				t.Fatalf("%d starts (found %v), want %d", n, found, tc.starts)
			}
			// The first request is the one that gave the first token:
			// ok's, sent a tick before, unless the case says otherwise.
			wantFirst := tc.want.FirstRequest
			if wantFirst.IsZero() && !tc.want.FirstToken.IsZero() {
				for _, e := range tc.events {
					if e.ok.Equal(tc.want.FirstToken) && !e.sent.Before(tc.want.At) {
						wantFirst = e.sent
					}
				}
			}
			if found && (got.From != tc.want.From || !got.At.Equal(tc.want.At) || !got.Ready.Equal(tc.want.Ready) || !got.FirstToken.Equal(tc.want.FirstToken) || !got.FirstRequest.Equal(wantFirst)) {
				t.Errorf("start\n got  %s\n want %s", show(got), show(tc.want))
			}
		})
	}
}

// show writes a start in tenths of a second since t0.
func show(s Start) string {
	f := func(x time.Time) string {
		if x.IsZero() {
			return "-"
		}
		return (x.Sub(t0) * 10).Truncate(time.Millisecond).String()
	}
	return s.From + " at " + f(s.At) + " ready " + f(s.Ready) + " first token " + f(s.FirstToken) + " first request " + f(s.FirstRequest) + " (tenths)"
}

// TestTrackerSeries: the series say the latest start and its phases, and
// the histogram every start's; the counter and the histogram exist from 0
// for a polled target, nothing for a target never polled.
func TestTrackerSeries(t *testing.T) {
	tr := New(nil)
	tr.Polled(engine.Poll{Target: "idle", At: at(1), Readiness: engine.Ready, Full: true})
	tr.Observer("unpolled").Done(&observation.Request{Outcome: observation.Success, FirstToken: at(1)})
	feed(tr, []event{
		scrape(1, engine.Unreachable, none), poll(25, engine.Ready), scrape(26, engine.Ready, at(5)), ok(40), ok(41),
		scrape(50, engine.Unreachable, none), poll(90, engine.Ready), ok(91), scrape(92, engine.Ready, at(60)),
	})
	want := `
# HELP infer_server_last_cold_start_seconds The latest server start's seconds to its readiness (ready), first served token (first_token), and that token's request's TTFT (first_request_ttft).
# TYPE infer_server_last_cold_start_seconds gauge
infer_server_last_cold_start_seconds{from="process_start",phase="first_request_ttft",target="t"} 0.1
infer_server_last_cold_start_seconds{from="process_start",phase="first_token",target="t"} 3.1
infer_server_last_cold_start_seconds{from="process_start",phase="ready",target="t"} 3
# HELP infer_server_last_start_time_seconds Unix time of the latest server start seen; from says whose clock: process_start, first_refusal or first_unready.
# TYPE infer_server_last_start_time_seconds gauge
infer_server_last_start_time_seconds{from="process_start",target="t"} 1.700000006e+09
# HELP infer_server_starts_total Server starts the exporter saw behind the target (a new process start, or serving again after refusing).
# TYPE infer_server_starts_total counter
infer_server_starts_total{target="idle"} 0
infer_server_starts_total{target="t"} 2
`
	if err := testutil.CollectAndCompare(tr, strings.NewReader(want), "infer_server_last_cold_start_seconds",
		"infer_server_last_start_time_seconds", "infer_server_starts_total"); err != nil {
		t.Error(err)
	}
	// The histogram: both starts, each phase once; the idle target at zero.
	for _, tc := range []struct {
		target, phase string
		count         uint64
		sum           float64
	}{
		{"t", PhaseReady, 2, 2 + 3},
		{"t", PhaseFirstToken, 2, 3.5 + 3.1},
		{"t", PhaseFirstRequestTTFT, 2, 0.1 + 0.1},
		{"idle", PhaseReady, 0, 0},
		{"idle", PhaseFirstToken, 0, 0},
		{"idle", PhaseFirstRequestTTFT, 0, 0},
	} {
		var m dto.Metric
		if err := tr.hist.WithLabelValues(tc.target, tc.phase).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		h := m.GetHistogram()
		if h.GetSampleCount() != tc.count || math.Abs(h.GetSampleSum()-tc.sum) > 1e-9 {
			t.Errorf("%s %s: %d observations summing %v, want %d summing %v", tc.target, tc.phase, h.GetSampleCount(), h.GetSampleSum(), tc.count, tc.sum)
		}
	}
	if err := tr.Apply(context.Background(), &config.Config{Targets: []config.Target{{Name: "t"}}}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(tr, "infer_server_starts_total"); n != 1 {
		t.Errorf("after a configuration without target idle: %d starts series, want 1", n)
	}
	if n := testutil.CollectAndCount(tr, "infer_server_cold_start_seconds"); n != len(Phases) {
		t.Errorf("after a configuration without target idle: %d histogram series, want %d", n, len(Phases))
	}
}

// stallCounter is an Observe hook's observer that hears stall scans.
type stallCounter struct {
	workload.EndObserver
	done, stalls int
}

func (s *stallCounter) Done(*observation.Request)    { s.done++ }
func (s *stallCounter) Dropped(*observation.Request) {}
func (s *stallCounter) Stalls(workload.StallScan)    { s.stalls++ }

// TestObserveHook: the wrapped hook feeds both the tracker and the other
// observer, and keeps the other's stall scans.
func TestObserveHook(t *testing.T) {
	target, w := &config.Target{Name: "t"}, &config.Workload{Name: "w"}
	for _, tc := range []struct {
		name       string
		next       func(*config.Target, *config.Workload) workload.Observer
		other      *stallCounter
		wantStalls bool
	}{
		{"no other hook", nil, nil, false},
		{"another hook returning nil", func(*config.Target, *config.Workload) workload.Observer { return nil }, nil, false},
		{"another hook hearing stalls", nil, &stallCounter{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := tc.next
			if tc.other != nil {
				next = func(*config.Target, *config.Workload) workload.Observer { return tc.other }
			}
			tr := New(nil)
			tr.Polled(engine.Poll{Target: "t", At: at(1), Readiness: engine.Unreachable, Full: true})
			tr.Polled(engine.Poll{Target: "t", At: at(5), Readiness: engine.Answering, Full: true})
			o := tr.Observe(next)(target, w)
			o.Done(&observation.Request{Outcome: observation.Success, FirstToken: at(6)})
			if s, _, _ := tr.Latest("t"); !s.FirstToken.Equal(at(6)) {
				t.Errorf("the tracker's first token %v, want %v", s.FirstToken, at(6))
			}
			st, hears := o.(interface{ Stalls(workload.StallScan) })
			if hears != tc.wantStalls {
				t.Fatalf("observer hears stalls: %v, want %v", hears, tc.wantStalls)
			}
			if tc.other != nil {
				st.Stalls(workload.StallScan{})
				if tc.other.done != 1 || tc.other.stalls != 1 {
					t.Errorf("other observer: %d done, %d stall scans, want 1 and 1", tc.other.done, tc.other.stalls)
				}
			}
		})
	}
}
