package simulator_test

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
)

// get answers a GET's status, or 0 when no answer came.
func get(t testing.TB, client *http.Client, url string) int {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// processStart reads process_start_time_seconds from /metrics; false when
// the engine does not export it.
func processStart(t testing.TB, client *http.Client, base string) (float64, bool) {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	mf := mfs["process_start_time_seconds"]
	if mf == nil {
		return 0, false
	}
	return mf.GetMetric()[0].GetGauge().GetValue(), true
}

// TestLoadDelayUnready: served by another listener (LoadUnready behaviour
// whatever the mode), the simulator answers 503 on /health and on
// completions until ReadyAt, serves /metrics meanwhile, and serves
// normally from ReadyAt; StartedAt is the process start it exports where
// the engine exports one.
func TestLoadDelayUnready(t *testing.T) {
	const delay = 400 * time.Millisecond
	for _, tc := range []struct {
		engine, mode    string
		health, request string
		processStart    bool
	}{
		{simulator.EngineVLLM, "", "/health", "/v1/completions", true},
		{simulator.EngineVLLMLegacy, simulator.LoadUnready, "/health", "/v1/completions", true},
		{simulator.EngineLlamaCpp, "", "/health", "/completion", false},
		{simulator.EngineSGLang, simulator.LoadUnready, "/health", "/generate", false},
		{simulator.EngineTriton, simulator.LoadUnready, "/v2/health/ready", "/v2/models/sim-model/generate_stream", false},
		{simulator.EngineOllama, simulator.LoadUnready, "/", "/api/generate", false},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			cfg := simulatortest.InstantConfig()
			cfg.Engine, cfg.LoadMode, cfg.LoadDelay = tc.engine, tc.mode, delay
			base, sim := simulatortest.StartTest(t, cfg)
			client := newClient(t)
			if got := sim.ReadyAt().Sub(sim.StartedAt()); got != delay {
				t.Fatalf("ReadyAt - StartedAt = %v, want the load delay %v", got, delay)
			}
			if time.Now().After(sim.ReadyAt()) {
				t.Skip("the machine took longer than the load delay to reach the first request")
			}
			if got := get(t, client, base+tc.health); got != http.StatusServiceUnavailable {
				t.Errorf("while loading: GET %s = %d, want 503", tc.health, got)
			}
			resp, err := client.Post(base+tc.request, "application/json", strings.NewReader(`{"prompt":"a b","max_tokens":2,"stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("while loading: POST %s = %d, want 503", tc.request, resp.StatusCode)
			}
			if tc.engine != simulator.EngineOllama { // Ollama serves no /metrics
				ps, ok := processStart(t, client, base)
				if ok != tc.processStart {
					t.Fatalf("process_start_time_seconds exported: %v, want %v", ok, tc.processStart)
				}
				if want := float64(sim.StartedAt().UnixNano()) / 1e9; ok && math.Abs(ps-want) > 1e-6 {
					t.Errorf("process_start_time_seconds = %.6f, want StartedAt %.6f", ps, want)
				}
			}
			time.Sleep(time.Until(sim.ReadyAt()))
			if got := get(t, client, base+tc.health); got != http.StatusOK {
				t.Errorf("after ReadyAt: GET %s = %d, want 200", tc.health, got)
			}
		})
	}
}

// TestLoadDelayRefuse: ListenAndServe in LoadRefuse mode does not listen
// before ReadyAt (connections are refused) and serves from then on.
func TestLoadDelayRefuse(t *testing.T) {
	const delay = 600 * time.Millisecond
	for _, tc := range []struct{ engine, mode string }{
		{simulator.EngineVLLM, ""},
		{simulator.EngineLlamaCpp, simulator.LoadRefuse},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			cfg := simulatortest.InstantConfig()
			cfg.Engine, cfg.LoadMode, cfg.LoadDelay = tc.engine, tc.mode, delay
			sim, err := simulator.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- sim.ListenAndServe(ctx, addr) }()
			defer func() {
				cancel()
				if err := <-errc; err != nil {
					t.Errorf("ListenAndServe: %v", err)
				}
			}()
			client := newClient(t)
			refused := false
			for time.Now().Before(sim.ReadyAt().Add(-50 * time.Millisecond)) {
				_, err := client.Get("http://" + addr + "/health")
				if err == nil {
					t.Fatalf("a request was answered %v before ReadyAt", time.Until(sim.ReadyAt()))
				}
				refused = refused || errors.Is(err, syscall.ECONNREFUSED)
				time.Sleep(20 * time.Millisecond)
			}
			if !refused {
				t.Error("no connection was refused during the load")
			}
			var answered time.Time
			waitFor(t, "the server to listen", func() bool {
				ok := get(t, client, "http://"+addr+"/health") == http.StatusOK
				answered = time.Now()
				return ok
			})
			if answered.Before(sim.ReadyAt()) {
				t.Errorf("answered %v before ReadyAt", sim.ReadyAt().Sub(answered))
			}
		})
	}
}

// TestLoadDelayRefuseCancelled: a context that ends during the load ends
// ListenAndServe without listening.
func TestLoadDelayRefuseCancelled(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.LoadDelay = time.Hour
	sim, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := sim.ListenAndServe(ctx, "127.0.0.1:0"); err != nil {
		t.Errorf("ListenAndServe = %v, want nil after cancellation", err)
	}
}

func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
		mode  string
		ok    bool
	}{
		{"none", 0, "", true},
		{"refuse", time.Second, simulator.LoadRefuse, true},
		{"unready", time.Second, simulator.LoadUnready, true},
		{"maximum", simulator.MaxLoadDelay, "", true},
		{"negative", -time.Second, "", false},
		{"too long", simulator.MaxLoadDelay + time.Second, "", false},
		{"unknown mode", time.Second, "sleepy", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulator.DefaultConfig()
			cfg.LoadDelay, cfg.LoadMode = tc.delay, tc.mode
			if err := cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
	app := kingpin.New("test", "")
	cmd := app.Command("simulate", "")
	cfg := simulator.AddFlags(cmd)
	if _, err := app.Parse([]string{"simulate", "--sim.load-delay=90s", "--sim.load-mode=unready"}); err != nil {
		t.Fatal(err)
	}
	if cfg.LoadDelay != 90*time.Second || cfg.LoadMode != simulator.LoadUnready {
		t.Errorf("flags gave load delay %v, mode %q", cfg.LoadDelay, cfg.LoadMode)
	}
	for engine, want := range map[string]string{simulator.EngineVLLM: simulator.LoadRefuse, simulator.EngineLlamaCpp: simulator.LoadUnready, simulator.EngineTGI: simulator.LoadRefuse} {
		if got := simulator.EngineLoadMode(engine); got != want {
			t.Errorf("EngineLoadMode(%s) = %q, want %q", engine, got, want)
		}
	}
}
