package prober

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// testToken is the bearer token of the test configurations. No test output
// may contain it.
const testToken = "sk-test-probe-token-do-not-leak-7f3a"

// fakeResolver resolves from a table and never asks DNS.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("lookup %s: no such host (test resolver)", host)
}

// connects records every connect() the guard let through. It refuses any
// address but 127.0.0.1 itself, as a safety net: a test that gets a guard
// bug sees the attempt recorded and fails, and nothing leaves the host.
type connects struct {
	mu    sync.Mutex
	addrs []string
}

func (c *connects) before(address string) error {
	c.mu.Lock()
	c.addrs = append(c.addrs, address)
	c.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || ap.Addr() != netip.MustParseAddr("127.0.0.1") {
		return fmt.Errorf("test safety net: connect to %s refused", address)
	}
	return nil
}

func (c *connects) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.addrs...)
}

// recorder wraps a server handler and records the arrival instant of every
// generation request, and how many were in flight at most.
type recorder struct {
	next http.Handler

	mu          sync.Mutex
	arrivals    []time.Time
	inFlight    int
	maxInFlight int
	arrived     chan struct{} // receives one value per arrival, if set
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	gen := req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/v1/")
	if gen {
		r.mu.Lock()
		r.arrivals = append(r.arrivals, time.Now())
		r.inFlight++
		r.maxInFlight = max(r.maxInFlight, r.inFlight)
		ch := r.arrived
		r.mu.Unlock()
		if ch != nil {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		defer func() {
			r.mu.Lock()
			r.inFlight--
			r.mu.Unlock()
		}()
	}
	r.next.ServeHTTP(w, req)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.arrivals)
}

// startSim starts the simulator behind a recorder on 127.0.0.1, as
// simulatortest.StartTest does.
func startSim(tb testing.TB, cfg simulator.Config) (string, *simulator.Simulator, *recorder) {
	tb.Helper()
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("simulator: %v", err)
	}
	rec := &recorder{next: sim.Handler()}
	srv := httptest.NewServer(rec)
	tb.Cleanup(srv.Close)
	tb.Cleanup(func() { sim.Close() })
	return srv.URL, sim, rec
}

// instantSim is a simulator whose engine takes no time, for tests that
// check logic, not timing.
func instantSim() simulator.Config {
	c := simulator.DefaultConfig()
	c.TimeScale = 0
	return c
}

// loadConfig parses a configuration. {{URL}} is replaced by url, and a
// token file holding testToken is available as "token".
func loadConfig(tb testing.TB, yml, url string) *config.Config {
	tb.Helper()
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	c, err := config.Parse([]byte(strings.ReplaceAll(yml, "{{URL}}", url)), filepath.Join(dir, "c.yml"))
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return c
}

// testEnv is a handler with its configuration, connect recorder, logs and
// history.
type testEnv struct {
	h        *Handler
	cfg      *config.Config
	connects *connects
	logs     *syncBuffer
	history  *History
}

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

func newEnv(tb testing.TB, cfg *config.Config, resolver Resolver) *testEnv {
	tb.Helper()
	e := &testEnv{cfg: cfg, connects: &connects{}, logs: &syncBuffer{}, history: NewHistory(0)}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if resolver == nil {
		resolver = fakeResolver{}
	}
	e.h = NewHandler(Options{
		Config:        func() *config.Config { return e.cfg },
		Logger:        logger,
		TimeoutOffset: 500 * time.Millisecond,
		History:       e.history,
		Resolver:      resolver,
		beforeConnect: e.connects.before,
	})
	return e
}

// scrape calls the handler as Prometheus would, with a scrape timeout of
// timeout seconds ("" sends no header).
func (e *testEnv) scrape(tb testing.TB, module, target, timeout string, debug bool) (int, string) {
	tb.Helper()
	q := url.Values{}
	if module != "" {
		q.Set("module", module)
	}
	if target != "" {
		q.Set("target", target)
	}
	if debug {
		q.Set("debug", "true")
	}
	req := httptest.NewRequest(http.MethodGet, "/probe?"+q.Encode(), nil)
	if timeout != "" {
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", timeout)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(body)
}

// metrics maps "name{k="v",...}" (labels sorted) to values; a summary
// gives name{quantile="q"}, name_sum and name_count.
type metrics map[string]float64

func parseMetrics(tb testing.TB, text string) metrics {
	tb.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		tb.Fatalf("parsing metrics: %v\n%s", err, text)
	}
	out := metrics{}
	for name, mf := range mfs {
		if mf.GetHelp() == "" {
			tb.Errorf("%s has no help text", name)
		}
		for _, m := range mf.GetMetric() {
			labels := labelText(m.GetLabel())
			switch mf.GetType() {
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				out[name+"_sum"+labels] = s.GetSampleSum()
				out[name+"_count"+labels] = float64(s.GetSampleCount())
				for _, q := range s.GetQuantile() {
					out[fmt.Sprintf("%s{quantile=%q}", name, model.FloatString(q.GetQuantile()).String())] = q.GetValue()
				}
			case dto.MetricType_COUNTER:
				out[name+labels] = m.GetCounter().GetValue()
			default:
				out[name+labels] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func labelText(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// must returns the value of key, failing the test when it is absent.
func (m metrics) must(tb testing.TB, key string) float64 {
	tb.Helper()
	v, ok := m[key]
	if !ok {
		tb.Fatalf("metric %s absent; have %v", key, m.keys())
	}
	return v
}

func (m metrics) keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// failedReason returns the reason whose probe_failed_due_to is 1, or "".
func (m metrics) failedReason(tb testing.TB) string {
	tb.Helper()
	reason := ""
	for _, r := range Reasons {
		if m.must(tb, fmt.Sprintf("probe_failed_due_to{reason=%q}", r)) == 1 {
			if reason != "" {
				tb.Errorf("two reasons set: %s and %s", reason, r)
			}
			reason = r
		}
	}
	return reason
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
