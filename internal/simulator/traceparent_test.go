package simulator_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// syncBuffer is a log sink that the handlers and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTraceparentLogged: at debug level, each generation request is logged
// with its X-Request-Id and the traceparent it came with, as a server that
// continues the client's trace would take it; an injected error is logged
// too (a real server received that request), and nothing at info level.
func TestTraceparentLogged(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name   string
		level  slog.Level
		errors float64
		logged bool
	}{
		{"debug", slog.LevelDebug, 0, true},
		{"debug, injected error", slog.LevelDebug, 1, true},
		{"info", slog.LevelInfo, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncBuffer
			cfg := simulator.DefaultConfig()
			cfg.TimeScale = 0
			cfg.Faults.ErrorRate, cfg.Faults.ErrorStatus = tc.errors, 500
			sim, err := simulator.New(cfg, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim.Handler())
			defer srv.Close()
			defer sim.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(`{"model":"sim-model","prompt":"hi","max_tokens":2}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(simulator.RequestIDHeader, "w-7")
			req.Header.Set("Traceparent", tp)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var found bool
			for _, line := range strings.Split(buf.String(), "\n") {
				var rec struct {
					Msg         string `json:"msg"`
					RequestID   string `json:"request_id"`
					Traceparent string `json:"traceparent"`
				}
				if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "request received" {
					continue
				}
				if rec.RequestID != "w-7" || rec.Traceparent != tp {
					t.Errorf("logged %q %q, want w-7 %s", rec.RequestID, rec.Traceparent, tp)
				}
				found = true
			}
			if found != tc.logged {
				t.Errorf("logged %v, want %v: %s", found, tc.logged, buf.String())
			}
		})
	}
}
