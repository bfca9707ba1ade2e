package live

import (
	"bytes"
	"context"
	"errors"
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// logBuffer is a slog destination that tests can read while request
// goroutines write to it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the log lines that contain s.
func (l *logBuffer) lines(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

const (
	contextWarning = "longer than the target's context length"
	refusalWarning = "the target refused a replayed request"
)

// azureTrace writes an Azure trace of (prompt, output) rows 1 ms apart.
func azureTrace(t *testing.T, rows [][2]int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	for i, r := range rows {
		fmt.Fprintf(&b, "2023-11-16 18:17:03.%03d0000,%d,%d\n", i, r[0], r[1])
	}
	p := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runReplay builds the configuration's one replay workload, as the
// exporter does, runs it to the end of its trace and returns its
// observations and log.
func runReplay(t *testing.T, url, trace string) ([]observation.Request, *logBuffer) {
	t.Helper()
	c, err := config.Parse([]byte(fmt.Sprintf(`
targets:
  - {name: t, url: %q, model: sim-model, flavor: openai-completions, timeout: 10s}
workloads:
  - name: replay
    target: t
    max_in_flight: 100
    replay: {source: azure, path: %q, max_rate: 100000}
`, url, trace)), filepath.Join(t.TempDir(), "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	runners, clients, err := Build(context.Background(), c, NewMetrics(prometheus.NewRegistry()), Options{}, logger)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var obs []observation.Request
	runners[0].Observer = workload.Observers{runners[0].Observer, workload.Results(func(o *observation.Request) {
		mu.Lock()
		obs = append(obs, *o)
		mu.Unlock()
	})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runners[0].Run(ctx)
	return obs, logs
}

func count(obs []observation.Request, o observation.Outcome) int {
	n := 0
	for i := range obs {
		if obs[i].Outcome == o {
			n++
		}
	}
	return n
}

// TestReplayOverContext: against the simulator, which tells its context
// length in its /tokenize answer, the trace rows longer than it are
// announced at load (how many, the largest), and the first refusal of the
// run is logged once with the server's message.
func TestReplayOverContext(t *testing.T) {
	cfg := simulatortest.InstantConfig()
	cfg.MaxModelLen = 64
	url, _ := simulatortest.StartTest(t, cfg)
	trace := azureTrace(t, [][2]int{{10, 2}, {100, 2}, {60, 10}, {20, 2}, {63, 1}, {64, 1}})
	obs, logs := runReplay(t, url, trace)

	if got := count(obs, observation.HTTP4xx); got != 3 || count(obs, observation.Success) != 3 {
		t.Fatalf("%d refused, %d served; want 3 and 3", got, count(obs, observation.Success))
	}
	load := logs.lines(contextWarning)
	want := []string{"level=WARN", "records=3", "of=6", "context_length=64", "largest=102", "largest_at=" + trace + ":3"}
	if len(load) != 1 || !containsAll(load[0], want) {
		t.Errorf("load warnings %q, want one holding %q", load, want)
	}
	refusals := logs.lines(refusalWarning)
	want = []string{"level=WARN", "status=400", "context_length=64", "This model's maximum context length is 64 tokens"}
	if len(refusals) != 1 || !containsAll(refusals[0], want) {
		t.Errorf("refusal warnings %q, want one holding %q", refusals, want)
	}
}

// TestReplayRefusalUnknownContext: a target that does not tell its
// context length gets no load warning; its first refusal is still logged,
// the message taken out of its JSON error; 429s are load, not refusals.
func TestReplayRefusalUnknownContext(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		refusals int
		message  string
	}{
		{"vllm", 400, `{"object":"error","message":"prompt is too long for this model","type":"BadRequestError","param":null,"code":400}`, 1, `server="prompt is too long for this model"`},
		{"openai", 413, `{"error":{"message":"request too large","type":"invalid_request_error"}}`, 1, `server="request too large"`},
		{"text", 422, "no\n", 1, "server=no"},
		{"429", 429, `{"error":{"message":"slow down"}}`, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body) // else the server lingers 500 ms on close
				if r.URL.Path == "/tokenize" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			obs, logs := runReplay(t, srv.URL+"/v1", azureTrace(t, [][2]int{{10, 2}, {100000, 2}, {10, 2}}))
			if count(obs, observation.HTTP4xx) != 3 {
				t.Fatalf("outcomes %v", obs)
			}
			if l := logs.lines(contextWarning); len(l) != 0 {
				t.Errorf("load warnings %q without a known context length", l)
			}
			if l := logs.lines("context length is unknown"); len(l) != 1 || !strings.Contains(l[0], "level=DEBUG") {
				t.Errorf("debug lines %q", l)
			}
			refusals := logs.lines(refusalWarning)
			if len(refusals) != tc.refusals || tc.refusals > 0 && !strings.Contains(refusals[0], tc.message) {
				t.Errorf("refusal warnings %q, want %d holding %s", refusals, tc.refusals, tc.message)
			}
		})
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestServerMessage(t *testing.T) {
	long := strings.Repeat("é", 1000)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"vllm", &client.HTTPError{StatusCode: 400, Body: `{"object":"error","message":"too long","code":400}`}, "too long"},
		{"openai", &client.HTTPError{StatusCode: 400, Body: `{"error":{"message":"too long","type":"x"}}`}, "too long"},
		{"string error", &client.HTTPError{StatusCode: 400, Body: `{"error":"too long"}`}, "too long"},
		{"text", &client.HTTPError{StatusCode: 400, Body: " too long\n"}, "too long"},
		{"empty body", &client.HTTPError{StatusCode: 404}, "HTTP 404 Not Found"},
		{"other error", errors.New("HTTP 400 Bad Request: redacted"), "HTTP 400 Bad Request: redacted"},
		{"long", &client.HTTPError{StatusCode: 400, Body: long}, strings.Repeat("é", maxServerMessage/2) + "… (2000 bytes)"},
	} {
		if got := serverMessage(tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
