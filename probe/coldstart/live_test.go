package coldstart

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/engine"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/probe/live"
)

// The load delay of the live tests, and how late the exporter may see what
// the simulator did: a readiness poll every engine.ReadyPollInterval, the
// workload's next request at 5 req/s, and a loaded machine under the race
// detector.
const (
	liveLoadDelay = time.Second
	liveLateness  = 1500 * time.Millisecond
)

// recordingPolls forwards every poll to the tracker and remembers the
// instants of the unreachable ones.
type recordingPolls struct {
	tracker *Tracker
	mu      sync.Mutex
	refused []time.Time
}

func (r *recordingPolls) Polled(p engine.Poll) {
	if p.Readiness == engine.Unreachable {
		r.mu.Lock()
		r.refused = append(r.refused, p.At)
		r.mu.Unlock()
	}
	r.tracker.Polled(p)
}

// refusedSince reports whether a poll after t found the server unreachable.
func (r *recordingPolls) refusedSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.refused {
		if at.After(t) {
			return true
		}
	}
	return false
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// server is one run of the simulator on addr, as one server process.
type server struct {
	sim    *simulator.Simulator
	cancel context.CancelFunc
	done   chan error
}

func startServer(t *testing.T, addr, engineName string) *server {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.TimeScale, cfg.Engine, cfg.LoadDelay = 0, engineName, liveLoadDelay
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{sim: sim, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- sim.ListenAndServe(ctx, addr) }()
	return s
}

func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	if err := <-s.done; err != nil {
		t.Errorf("simulator: %v", err)
	}
}

// aroundMicro is the microsecond around t: a process start is read from a
// float of Unix seconds, to the microsecond.
func aroundMicro(t time.Time) (time.Time, time.Time) {
	return t.Add(-time.Microsecond), t.Add(time.Microsecond)
}

// checkStart compares a start the tracker reports with the simulator's
// ground truth: the start's clock (from, and an instant in [lo, hi]), and
// readiness and first token no earlier than the load's end and no later
// than liveLateness after it.
func checkStart(t *testing.T, got Start, sim *simulator.Simulator, from string, lo, hi time.Time) {
	t.Helper()
	t.Logf("start from %s: ready after %v, first token after %v (load delay %v)",
		got.From, got.Ready.Sub(got.At), got.FirstToken.Sub(got.At), liveLoadDelay)
	if got.From != from {
		t.Errorf("from %q, want %q", got.From, from)
	}
	if got.At.Before(lo) || got.At.After(hi) {
		t.Errorf("start at %v, want within [%v, %v]", got.At, lo, hi)
	}
	for _, p := range []struct {
		name string
		at   time.Time
	}{{PhaseReady, got.Ready}, {PhaseFirstToken, got.FirstToken}} {
		if late := p.at.Sub(sim.ReadyAt()); late < 0 || late > liveLateness {
			t.Errorf("%s at %v after the simulator was ready, want within [0, %v]", p.name, late, liveLateness)
		}
	}
}

// TestLiveColdStarts runs the exporter's scraper and a workload against a
// simulator with a model-load delay, starts it, restarts it, and checks
// both starts against the simulator's own instants, for an engine that
// exports its process start and refuses while loading (vLLM), one that
// exports none and refuses (TGI), and one that exports none and answers
// 503 while loading (llama.cpp).
func TestLiveColdStarts(t *testing.T) {
	for _, tc := range []struct {
		engine, flavor string
		// firstFrom is the first start's clock; it is seen from the
		// exporter's start, before the server's, except for unready
		// servers, which the test starts first to see them loading.
		firstFrom      string
		serverFirst    bool
		processStarted bool
	}{
		{simulator.EngineVLLM, "openai-completions", FromProcessStart, false, true},
		{simulator.EngineTGI, "tgi", FromRefusal, false, false},
		{simulator.EngineLlamaCpp, "llamacpp", FromUnready, true, false},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			c, err := config.Parse([]byte(fmt.Sprintf(`targets:
  - name: sim
    url: http://%s
    flavor: %s
    model: sim-model
    timeout: 5s
    metrics: {interval: 500ms, timeout: 400ms}
workloads:
  - name: steady
    target: sim
    arrival: {process: constant, rate: 5}
    max_in_flight: 16
    prompt:
      input_tokens: {dist: fixed, mean: 8}
      output_tokens: {dist: fixed, mean: 4}
`, addr, tc.flavor)), "live.yml")
			if err != nil {
				t.Fatal(err)
			}
			tracker := New(nil)
			polls := &recordingPolls{tracker: tracker}
			var first *server
			if tc.serverFirst {
				first = startServer(t, addr, tc.engine)
				// Its listener bound before the exporter's first poll,
				// which would otherwise read a refusal, not the 503 of
				// the load (startServer listens in a goroutine: under
				// the race detector beside other packages' tests, the
				// first poll once came first).
				waitUntil(t, "the server to listen", func() bool {
					c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
					if err == nil {
						c.Close()
					}
					return err == nil
				})
			}
			testStart := time.Now()
			scraper := engine.NewScraper(nil, engine.WithPollObserver(polls))
			defer scraper.Close()
			manager := live.NewManager(live.NewMetrics(prometheus.NewRegistry()),
				live.Options{Observe: tracker.Observe(nil)}, slog.New(slog.DiscardHandler))
			defer manager.Stop()
			ctx := context.Background()
			for _, a := range []config.Applier{scraper, manager, tracker} {
				if err := a.Apply(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			if first == nil {
				waitUntil(t, "a refused poll", func() bool { return polls.refusedSince(testStart) })
				first = startServer(t, addr, tc.engine)
			}

			// The first start.
			var got Start
			waitUntil(t, "the first start's first token", func() bool {
				var n uint64
				got, n, _ = tracker.Latest("sim")
				return n == 1 && !got.FirstToken.IsZero()
			})
			lo, hi := testStart, first.sim.StartedAt()
			switch {
			case tc.processStarted:
				lo, hi = aroundMicro(first.sim.StartedAt())
			case tc.serverFirst:
				lo, hi = first.sim.StartedAt(), first.sim.ReadyAt()
			}
			checkStart(t, got, first.sim, tc.firstFrom, lo, hi)

			// The restart: the server stops, the exporter sees it refuse,
			// and a new one loads.
			stopped := time.Now()
			first.stop(t)
			waitUntil(t, "a refused poll after the stop", func() bool { return polls.refusedSince(stopped) })
			second := startServer(t, addr, tc.engine)
			defer second.stop(t)
			waitUntil(t, "the restart's first token", func() bool {
				var n uint64
				got, n, _ = tracker.Latest("sim")
				return n == 2 && !got.FirstToken.IsZero()
			})
			from, lo, hi := FromRefusal, stopped, second.sim.StartedAt()
			if tc.processStarted {
				from = FromProcessStart
				lo, hi = aroundMicro(second.sim.StartedAt())
			}
			checkStart(t, got, second.sim, from, lo, hi)
		})
	}
}
