// Package simulatortest starts an in-process simulator for tests of other
// packages.
package simulatortest

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// StartTest starts a simulator with cfg behind an HTTP server on
// 127.0.0.1:0 and returns its base URL (http://127.0.0.1:PORT, without a
// trailing slash) and the simulator. Cleanup closes the simulator first
// (cutting streams still in flight) and then the server, so no goroutine
// outlives the test.
func StartTest(tb testing.TB, cfg simulator.Config) (baseURL string, sim *simulator.Simulator) {
	tb.Helper()
	return StartTestLogged(tb, cfg, slog.New(slog.DiscardHandler))
}

// StartTestLogged is StartTest with the simulator logging to logger: at
// debug level, each generation request with its X-Request-Id and
// traceparent, which a test joins with what the client measured.
func StartTestLogged(tb testing.TB, cfg simulator.Config, logger *slog.Logger) (baseURL string, sim *simulator.Simulator) {
	tb.Helper()
	sim, err := simulator.New(cfg, logger)
	if err != nil {
		tb.Fatalf("simulator: %v", err)
	}
	srv := httptest.NewServer(sim.Handler()) // httptest listens on 127.0.0.1
	// Cleanups run last-in first-out: the simulator closes before the
	// server, whose Close waits for handlers that only the simulator's
	// Close ends.
	tb.Cleanup(srv.Close)
	tb.Cleanup(func() { sim.Close() })
	return srv.URL, sim
}

// InstantConfig is DefaultConfig with TimeScale 0: steps cost no wall time.
func InstantConfig() simulator.Config {
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0
	return cfg
}
