package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// polls records what a scraper reports.
type polls struct {
	mu  sync.Mutex
	all []Poll
}

func (p *polls) Polled(x Poll) { p.mu.Lock(); p.all = append(p.all, x); p.mu.Unlock() }

// wait returns the first poll that cond accepts, failing after 20 s.
func (p *polls) wait(t *testing.T, what string, cond func(Poll) bool) Poll {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, x := range p.all {
			if cond(x) {
				p.mu.Unlock()
				return x
			}
		}
		p.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no poll: %s", what)
	return Poll{}
}

// applyOne scrapes one target at url, with extra metrics settings.
func applyOne(t *testing.T, sm *Scraper, url, metrics string) {
	t.Helper()
	c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - name: s\n    url: %s\n    model: m\n    metrics: {interval: 1h%s}\n", url, metrics)), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.ApplyConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// TestScrapeReadiness: the first scrape's poll says what the server's
// health endpoint (or, without one, its metrics) said, and the process start
// it exports.
func TestScrapeReadiness(t *testing.T) {
	vllm, err := os.ReadFile("testdata/server/metrics_vllm_v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	// Before the recording, whose last line has no newline.
	const ps = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7710423823425e+09\n"
	psTime := time.Unix(1771042382, 342500000)
	for _, tc := range []struct {
		name    string
		metrics int    // status of /metrics
		body    string // its body when 200
		health  int    // status of /health; 0: not routed (404)
		engine  string // metrics.engine, "" for auto
		want    Readiness
		start   time.Time
	}{
		{"vllm ready", 200, ps + string(vllm), 200, "", Ready, psTime},
		{"vllm unready", 200, ps + string(vllm), 503, "", Unready, psTime},
		{"vllm without process start", 200, string(vllm), 200, "", Ready, time.Time{}},
		{"health path absent", 200, string(vllm), 0, "", Answering, time.Time{}},
		{"unknown engine answering", 200, "up 1\n", 0, "", Answering, time.Time{}},
		{"unknown engine 503", 503, "", 0, "", Unready, time.Time{}},
		{"configured llamacpp loading", 503, "", 503, ", engine: llamacpp", Unready, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/metrics" && tc.metrics == 200:
					w.Header().Set("Content-Type", "text/plain; version=0.0.4")
					w.Write([]byte(tc.body))
				case r.URL.Path == "/metrics":
					w.WriteHeader(tc.metrics)
				case r.URL.Path == "/health" && tc.health != 0:
					w.WriteHeader(tc.health)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			var got polls
			sm := NewScraper(slog.New(slog.DiscardHandler), WithPollObserver(&got))
			defer sm.Close()
			applyOne(t, sm, srv.URL, tc.engine)
			p := got.wait(t, "a full scrape", func(p Poll) bool { return p.Full })
			if p.Target != "s" || p.Readiness != tc.want || !p.ProcessStart.Equal(tc.start) {
				t.Errorf("poll %+v, want readiness %v and process start %v", p, tc.want, tc.start)
			}
		})
	}
}

// TestScrapeUnreachable: a closed port is Unreachable.
func TestScrapeUnreachable(t *testing.T) {
	_, _, got := scrapeClosedPort(t)
	if p := got.wait(t, "a full scrape", func(p Poll) bool { return p.Full }); p.Readiness != Unreachable {
		t.Errorf("closed port: %v, want unreachable", p.Readiness)
	}
}

// TestReadinessPollBringsScrapeForward: with an hour between scrapes, a
// server that comes up after refusing is scraped (its process start read,
// its engine detected) as soon as a readiness poll sees it answer, and
// the simulator's load is seen unready and then ready.
func TestReadinessPollBringsScrapeForward(t *testing.T) {
	addr, sm, got := scrapeClosedPort(t)
	got.wait(t, "a refused scrape", func(p Poll) bool { return p.Full && p.Readiness == Unreachable })
	got.wait(t, "a readiness poll", func(p Poll) bool { return !p.Full && p.Readiness == Unreachable })

	cfg := simulatortest.InstantConfig()
	cfg.LoadDelay, cfg.LoadMode = 500*time.Millisecond, simulator.LoadUnready
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- sim.ListenAndServe(ctx, addr) }()
	defer func() { cancel(); <-errc }()

	unready := got.wait(t, "a scrape of the loading server", func(p Poll) bool { return p.Full && p.Readiness == Unready })
	if d := unready.ProcessStart.Sub(sim.StartedAt()); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("process start %v, want the simulator's start %v", unready.ProcessStart, sim.StartedAt())
	}
	ready := got.wait(t, "a scrape of the loaded server", func(p Poll) bool { return p.Full && p.Readiness == Ready })
	if ready.At.Before(sim.ReadyAt()) {
		t.Errorf("ready at %v, %v before the load ended", ready.At, sim.ReadyAt().Sub(ready.At))
	}
	snap, _ := sm.Snapshot("s")
	if snap.Engine != engineVLLM {
		t.Errorf("engine %q after the scrape brought forward, want vllm", snap.Engine)
	}
	// No poll said it served before its health endpoint did: the first
	// readiness poll to reach the loading server finds its metrics
	// answering while its engine, and so its health endpoint, is not yet
	// known; reported as answering, it let the workloads send to a server
	// that answers 503 (seen once in TestEndToEndLifecycle/unready).
	got.mu.Lock()
	defer got.mu.Unlock()
	for _, p := range got.all {
		if p.Readiness == Ready {
			break
		}
		if p.Readiness.Serving() {
			t.Errorf("poll %+v says the loading server serves, before its health endpoint said ready", p)
		}
	}
}

func TestProcessStart(t *testing.T) {
	gauge := func(vs ...float64) map[string]*dto.MetricFamily {
		mf := &dto.MetricFamily{Name: proto.String("process_start_time_seconds"), Type: dto.MetricType_GAUGE.Enum()}
		for _, v := range vs {
			mf.Metric = append(mf.Metric, &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(v)}})
		}
		return map[string]*dto.MetricFamily{"process_start_time_seconds": mf}
	}
	for _, tc := range []struct {
		name string
		fams map[string]*dto.MetricFamily
		want time.Time
	}{
		{"absent", nil, time.Time{}},
		{"one", gauge(1.5e9 + 0.25), time.Unix(1.5e9, 250000000)},
		{"latest of several", gauge(1.5e9, 1.6e9), time.Unix(1.6e9, 0)},
		{"zero", gauge(0), time.Time{}},
		{"negative", gauge(-1), time.Time{}},
		{"NaN", gauge(math.NaN()), time.Time{}},
		{"milliseconds, not seconds", gauge(1.5e12), time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := processStart(tc.fams); !got.Equal(tc.want) {
				t.Errorf("processStart = %v, want %v", got, tc.want)
			}
		})
	}
}

// scrapeClosedPort starts a scraper with a poll observer on a port where
// nothing listens, and returns the address, the scraper (closed at the
// test's end) and its polls.
func scrapeClosedPort(t *testing.T) (string, *Scraper, *polls) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	got := &polls{}
	sm := NewScraper(nil, WithPollObserver(got))
	t.Cleanup(sm.Close)
	applyOne(t, sm, "http://"+addr, "")
	return addr, sm, got
}
