package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// simTarget is a simulator serving on loopback, with a record of the prompts
// it received.
type simTarget struct {
	URL string
	Sim *simulator.Simulator

	mu      sync.Mutex
	prompts []string // completions bodies received, in arrival order
	ids     []string // their X-Request-Id
	// traceparents: their traceparent headers, by X-Request-Id.
	traceparents map[string]string
}

// startSim starts a simulator whose engine step costs step (in simulated
// time) at the given time scale. Every completion request's body is kept.
// Each tune, if any, changes the configuration last.
func startSim(t testing.TB, step time.Duration, scale float64, slowdown float64, tune ...func(*simulator.Config)) *simTarget {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = scale
	cfg.DecodeStep = step
	cfg.DecodePerSeq = 0
	cfg.PrefillTokensPerSecond = 1e6
	if slowdown > 0 {
		cfg.Faults.Slowdown = slowdown
	}
	for _, f := range tune {
		f(&cfg)
	}
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return wrapSim(t, sim)
}

// wrapSim serves sim on loopback, keeping every completion request's body.
func wrapSim(t testing.TB, sim *simulator.Simulator) *simTarget {
	t.Helper()
	st := &simTarget{Sim: sim}
	h := sim.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/completions") {
			b, _ := io.ReadAll(r.Body)
			st.mu.Lock()
			st.prompts = append(st.prompts, string(b))
			st.ids = append(st.ids, r.Header.Get("X-Request-Id"))
			if tp := r.Header.Get("traceparent"); tp != "" {
				if st.traceparents == nil {
					st.traceparents = map[string]string{}
				}
				st.traceparents[r.Header.Get("X-Request-Id")] = tp
			}
			st.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { sim.Close() })
	st.URL = srv.URL
	return st
}

// requestIDs are the X-Request-Id of every completion request received.
func (s *simTarget) requestIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

func (s *simTarget) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prompts...)
}

// writeFile writes content into dir/name and returns the path.
func writeTestFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// targetsYAML renders a targets section for simulators, by name.
func targetsYAML(names []string, sims []*simTarget) string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for i, n := range names {
		fmt.Fprintf(&b, "  - name: %s\n    url: %s\n    model: sim-model\n    flavor: openai-completions\n    timeout: 30s\n    metrics: {interval: 1s, timeout: 1s}\n", n, sims[i].URL)
	}
	return b.String()
}

// runBenchOK runs `bench` on the configuration yml (written to dir/b.yml)
// with its reports in dir/out, fails the test unless it exits ExitOK, and
// returns the output folder and the command's stdout.
func runBenchOK(t testing.TB, dir, yml string) (out, stdout string) {
	t.Helper()
	out = filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+writeTestFile(t, dir, "b.yml", yml), "--output.dir="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	return out, stdout
}

// runCLI runs the bench command as the exporter's main wires it, and
// returns its exit code and output.
func runCLI(t testing.TB, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	return runCLILogged(t, ctx, slog.New(slog.DiscardHandler), args...)
}

// runCLILogged is runCLI with the command's log to logger.
func runCLILogged(t testing.TB, ctx context.Context, logger *slog.Logger, args ...string) (int, string, string) {
	t.Helper()
	app := kingpin.New("infer_exporter", "")
	var stdout, stderr bytes.Buffer
	cmd, run := addCommand(app, false, &stdout, &stderr)
	got, err := app.Parse(args)
	if err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	if got != cmd.FullCommand() && !strings.HasPrefix(got, cmd.FullCommand()+" ") {
		t.Fatalf("parsed command %q", got)
	}
	code := run(ctx, logger)
	return code, stdout.String(), stderr.String()
}

// syncBuffer is a bytes.Buffer that goroutines may write at once (a
// command's log).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
