package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// startScraper applies a one-target configuration (a scrape interval of an
// hour) and returns its scraper once the first scrape is done, with the
// scraper's goroutine stopped: the test then calls scrape itself, and
// nothing else runs it. (The goroutine also scrapes again early when a
// readiness poll's answer changes, as a poll that times out on a busy
// machine does: such a scrape beside the test's raced with it.)
//
// The scrape's timeout is the time the test has left, not the 5 s
// default: these tests are about what a scrape makes of an answer, and on
// a busy machine, under the race detector, reading and cutting two 1 MB
// documents took longer than 5 s (the info then went unread).
func startScraper(t *testing.T, sm *Scraper, url, metrics string) *targetScraper {
	t.Helper()
	timeout := min(time.Until(testDeadline(t)), time.Hour).Truncate(time.Second)
	c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - name: s\n    url: %s\n    model: m\n    metrics: {interval: 1h, timeout: %s%s}\n", url, timeout, metrics)), "c.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sm.ApplyConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, sm, "s")
	sm.mu.Lock()
	sc := sm.scrapers["s"]
	sm.mu.Unlock()
	sc.stop()
	return sc
}

// testDeadline is when a test's waits give up: a little before go test's
// -timeout ends the process, so that the failure says what was awaited;
// an hour away when there is no such timeout.
func testDeadline(t *testing.T) time.Time {
	if d, ok := t.Deadline(); ok {
		return d.Add(-10 * time.Second)
	}
	return time.Now().Add(time.Hour)
}

// TestServerMetricsEngineLogs: an engine named in metrics.engine is logged
// as configured, never as detected; a detected one says what it was
// detected from.
func TestServerMetricsEngineLogs(t *testing.T) {
	cases := []struct {
		name    string
		routes  map[string]string
		metrics string
		want    []string
		wantNot string
	}{
		{"configured", map[string]string{"/metrics": "metrics_vllm_v1.txt"}, ", engine: vllm",
			[]string{`msg="server metrics: engine configured" target=s engine=vllm url=`}, "engine detected"},
		{"detected from metric names", map[string]string{"/metrics": "metrics_vllm_v1.txt"}, "",
			[]string{`msg="server metrics: engine detected" target=s engine=vllm from="metric names"`}, "engine configured"},
		{"detected from info endpoints", map[string]string{"/api/version": "ollama_api_version.json", "/api/ps": "ollama_api_ps.json"}, "",
			[]string{`msg="server metrics: engine detected" target=s engine=ollama from="info endpoints"`}, "engine configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(serveFiles(tc.routes))
			defer srv.Close()
			var logs logBuffer
			sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
			defer sm.Close()
			startScraper(t, sm, srv.URL, tc.metrics)
			got := logs.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in the log:\n%s", w, got)
				}
			}
			if strings.Contains(got, tc.wantNot) {
				t.Errorf("%q in the log:\n%s", tc.wantNot, got)
			}
		})
	}
}

// TestServerMetricsConfiguredEngineAbsent: a configured engine whose metric
// families are not in a successful scrape (the URL points at another
// exporter) is warned about, naming the engine and the families it expects;
// once per change, not on every scrape.
func TestServerMetricsConfiguredEngineAbsent(t *testing.T) {
	var file atomic.Value
	file.Store("metrics_dcgm.txt")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveFiles(map[string]string{"/metrics": file.Load().(string)}).ServeHTTP(w, r)
	}))
	defer srv.Close()
	var logs logBuffer
	sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
	defer sm.Close()
	sc := startScraper(t, sm, srv.URL, ", engine: vllm")
	const warning = "engine configured but none of its metric families are in the scrape"
	warnings := func() int { return strings.Count(logs.String(), warning) }

	if s := sc.snap.Load(); !s.up || s.engine != engineVLLM {
		t.Fatalf("up %v engine %q, want up and vllm", s.up, s.engine)
	}
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings after the first scrape, want 1:\n%s", n, logs.String())
	}
	line := logs.String()
	for _, w := range []string{"level=WARN", "engine=vllm", "url=" + srv.URL + "/metrics",
		"expected=vllm:num_requests_running,vllm:num_requests_waiting,vllm:kv_cache_usage_perc,", "metrics.url or metrics.engine"} {
		if !strings.Contains(line, w) {
			t.Errorf("warning lacks %q:\n%s", w, line)
		}
	}
	for range 3 {
		sc.scrape(context.Background())
	}
	if n := warnings(); n != 1 {
		t.Errorf("%d warnings after four scrapes of the same body, want 1", n)
	}
	// The families appear: no warning; they go again: one more.
	file.Store("metrics_vllm_v1.txt")
	sc.scrape(context.Background())
	sc.scrape(context.Background())
	if n := warnings(); n != 1 {
		t.Errorf("%d warnings while the families are there, want 1", n)
	}
	file.Store("metrics_dcgm.txt")
	sc.scrape(context.Background())
	sc.scrape(context.Background())
	if n := warnings(); n != 2 {
		t.Errorf("%d warnings after the families went again, want 2:\n%s", n, logs.String())
	}
	// A failed scrape says nothing about the families: no warning.
	file.Store("absent.txt")
	sc.scrape(context.Background())
	if n := warnings(); n != 2 {
		t.Errorf("%d warnings after a failed scrape, want 2", n)
	}
}

// TestServerMetricsConfiguredEnginePresent: no warning when the configured
// engine's families are there, nor for an engine that serves no metrics.
func TestServerMetricsConfiguredEnginePresent(t *testing.T) {
	for _, tc := range []struct {
		engine string
		routes map[string]string
	}{
		{"vllm", map[string]string{"/metrics": "metrics_vllm_v1.txt"}},
		{"ollama", map[string]string{"/metrics": "metrics_dcgm.txt", "/api/version": "ollama_api_version.json", "/api/ps": "ollama_api_ps.json"}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			srv := httptest.NewServer(serveFiles(tc.routes))
			defer srv.Close()
			var logs logBuffer
			sm := NewScraper(slog.New(slog.NewTextHandler(&logs, nil)))
			defer sm.Close()
			startScraper(t, sm, srv.URL, ", engine: "+tc.engine)
			if strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("warning:\n%s", logs.String())
			}
		})
	}
}
