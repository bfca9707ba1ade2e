package simulator

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file is the simulated model load: the interval after start during
// which a real server is up but cannot serve, because it is still reading
// its weights, compiling or warming up. A cold-start measurement is tested
// against it: the simulator knows, exactly, when it started (StartedAt, and
// process_start_time_seconds on /metrics where the engine exports it) and
// when it became ready (ReadyAt).

// Load modes: what a client sees while the model loads.
const (
	// LoadRefuse: nothing listens until the load is done, so connections
	// are refused. vLLM's OpenAI server behaves so: it accepts connections
	// only once its engine is up. Only Serve and ListenAndServe can refuse;
	// a Handler served by someone else's listener answers as LoadUnready.
	LoadRefuse = "refuse"
	// LoadUnready: the server listens at once and answers 503 until
	// loaded, /health included, as llama.cpp's server does ("Loading
	// model").
	LoadUnready = "unready"
)

// MaxLoadDelay bounds Config.LoadDelay.
const MaxLoadDelay = time.Hour

// EngineLoadMode is the load mode of the real engine the simulator
// impersonates: LoadUnready for llama.cpp (its server documents /health 503
// "Loading model" while it loads), LoadRefuse for the others.
func EngineLoadMode(engine string) string {
	if engine == EngineLlamaCpp {
		return LoadUnready
	}
	return LoadRefuse
}

// loadMode resolves Config.LoadMode.
func (c Config) loadMode() string {
	if c.LoadMode != "" {
		return c.LoadMode
	}
	return EngineLoadMode(c.Engine)
}

// StartedAt is when the simulator was created: the start of its "process"
// (in `infer_exporter simulate`, within milliseconds of the process's own
// start), as its process_start_time_seconds reports it.
func (s *Simulator) StartedAt() time.Time { return s.started }

// ReadyAt is when the load ends: StartedAt plus Config.LoadDelay. From this
// instant on the handler serves; before it, it answers 503 (and Serve does
// not listen, in LoadRefuse mode). It is the ground truth of a cold start's
// readiness.
func (s *Simulator) ReadyAt() time.Time { return s.started.Add(s.cfg.LoadDelay) }

// loading reports whether the model is still loading at now.
func (s *Simulator) loading(now time.Time) bool { return now.Before(s.ReadyAt()) }

// loadGate answers every request 503 while the model loads, except
// /metrics (so that a reader of an unready server can see its
// process_start_time_seconds) and /admin/faults (the test's own controls).
func (s *Simulator) loadGate(next http.Handler) http.Handler {
	if s.cfg.LoadDelay <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.loading(time.Now()) || r.URL.Path == "/metrics" || strings.HasPrefix(r.URL.Path, "/admin/") {
			next.ServeHTTP(w, r)
			return
		}
		if s.cfg.Engine == EngineLlamaCpp {
			// llama.cpp's own body for this state.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`))
			return
		}
		writeError(w, http.StatusServiceUnavailable, "the model is loading")
	})
}

// waitLoaded waits until ReadyAt, or until done is closed; it reports
// whether the load ended.
func (s *Simulator) waitLoaded(done <-chan struct{}) bool {
	return wait(time.Until(s.ReadyAt()), done, nil)
}

// registerProcessStart exposes process_start_time_seconds as client
// libraries' process collectors do (the same name, unit and help), with the
// simulator's own start rather than the OS process's, so that several
// simulators in one test process each tell their own. Only the engines
// whose real server exports it keep it (engines.go drops it for the
// others): vLLM's Python server registers the process collector.
func registerProcessStart(reg prometheus.Registerer, started time.Time) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "process_start_time_seconds",
		Help: "Start time of the process since unix epoch in seconds.",
	})
	g.Set(float64(started.UnixNano()) / 1e9)
	reg.MustRegister(g)
}
