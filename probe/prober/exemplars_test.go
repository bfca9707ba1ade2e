package prober

import (
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// randomSpans hands out random trace contexts, as the OTLP head sampler
// does, and keeps what ended, by trace id.
type randomSpans struct {
	mu    sync.Mutex
	ended map[string]observation.Request
}

func (r *randomSpans) Trace() observation.Trace {
	var t observation.Trace
	for i := range t.TraceID {
		t.TraceID[i] = byte(rand.Uint32())
	}
	for i := range t.SpanID {
		t.SpanID[i] = byte(rand.Uint32())
	}
	t.TraceID[0], t.SpanID[0] = 1, 1 // never the invalid all-zero ids
	return t
}

func (r *randomSpans) Done(o *observation.Request) {
	traceID, _ := o.Trace.IDs()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended[traceID] = *o
}

// probeOpenMetrics runs a probe of module against target, asking for the
// OpenMetrics text as Prometheus does.
func probeOpenMetrics(t *testing.T, e *testEnv, module, target string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/probe?module="+module+"&target="+target, nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "30")
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Result().Body)
	if ct := w.Header().Get("Content-Type"); w.Code != http.StatusOK || !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("probe: %d %q, want OpenMetrics:\n%s", w.Code, ct, body)
	}
	return string(body)
}

// probeExemplar is a traced histogram's bucket with its exemplar.
var probeExemplar = regexp.MustCompile(`^(probe_[a-z0-9_]+_histogram_seconds)_bucket\{le="([^"]+)"\} \d+ # \{trace_id="([0-9a-f]{32})",span_id="([0-9a-f]{16})"\} (\S+) \S+$`)

// TestProbeExemplarsJoinServerTraceparents: a traced probe's answer in
// OpenMetrics carries its latencies as histograms whose bucket exemplars
// name the trace and span ids of traceparents the simulator logged
// receiving; each exemplar lies in its bucket and is its request's
// measured TTFT or E2E, and each histogram counts what its summary
// counts. An untraced probe has no such histogram.
func TestProbeExemplarsJoinServerTraceparents(t *testing.T) {
	var serverLog testenv.Buffer
	url, _ := simulatortest.StartTestLogged(t, instantSim(), slog.New(slog.NewJSONHandler(&serverLog, &slog.HandlerOptions{Level: slog.LevelDebug})))
	e := newEnv(t, loadConfig(t, simConfig, url), nil)

	if body := probeOpenMetrics(t, e, "chat", url); strings.Contains(body, "_histogram_seconds") || strings.Contains(body, "trace_id") {
		t.Fatalf("an untraced probe has traced histograms:\n%s", body)
	}

	spans := &randomSpans{ended: map[string]observation.Request{}}
	e.h.opts.Spans = func(*config.Target, string, config.Sampling) Spans { return spans }
	body := probeOpenMetrics(t, e, "chat", url)

	received := map[string]string{} // span id by trace id
	for _, line := range strings.Split(serverLog.String(), "\n") {
		var rec struct {
			Msg         string `json:"msg"`
			Traceparent string `json:"traceparent"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request received" {
			if parts := strings.Split(rec.Traceparent, "-"); len(parts) == 4 {
				received[parts[1]] = parts[2]
			}
		}
	}
	found := map[string]int{}
	lastLE := map[string]float64{}
	counts := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.HasSuffix(f[0], "_count") {
			counts[strings.TrimSuffix(f[0], "_count")] = f[1]
		}
		if !strings.Contains(line, "_histogram_seconds_bucket") {
			continue
		}
		le, _ := strconv.ParseFloat(line[strings.Index(line, `le="`)+4:strings.Index(line, `"}`)], 64)
		name := line[:strings.Index(line, "_bucket")]
		lower, ok := lastLE[name]
		if !ok {
			lower = math.Inf(-1) // the first bucket holds every value up to its bound, 0 included
		}
		lastLE[name] = le
		if !strings.Contains(line, " # ") {
			continue
		}
		m := probeExemplar.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("malformed exemplar: %s", line)
			continue
		}
		traceID, spanID := m[3], m[4]
		found[name]++
		if received[traceID] != spanID {
			t.Errorf("exemplar %s/%s on %s: no such traceparent received by the server", traceID, spanID, name)
		}
		v, err := strconv.ParseFloat(m[5], 64)
		if err != nil || v <= lower || v > le {
			t.Errorf("exemplar %v outside its bucket (%v, %v]: %s", v, lower, le, line)
		}
		spans.mu.Lock()
		o, ok := spans.ended[traceID]
		spans.mu.Unlock()
		if !ok {
			t.Errorf("exemplar of trace %s: no such request", traceID)
			continue
		}
		var want time.Duration
		switch name {
		case "probe_time_to_first_token_histogram_seconds":
			want, _ = o.TTFT()
		case "probe_e2e_latency_histogram_seconds":
			want, _ = o.E2E()
		default:
			continue
		}
		if v != want.Seconds() {
			t.Errorf("%s exemplar of trace %s: %v, its request measured %v", name, traceID, v, want.Seconds())
		}
	}
	for summary, hist := range map[string]string{
		"probe_time_to_first_token_seconds":   "probe_time_to_first_token_histogram_seconds",
		"probe_time_per_output_token_seconds": "probe_time_per_output_token_histogram_seconds",
		"probe_inter_token_latency_seconds":   "probe_inter_token_latency_histogram_seconds",
		"probe_e2e_latency_seconds":           "probe_e2e_latency_histogram_seconds",
	} {
		if found[hist] == 0 {
			t.Errorf("no exemplar on %s:\n%s", hist, body)
		}
		if counts[hist] == "" || counts[hist] != counts[summary] {
			t.Errorf("%s counts %q, %s %q", hist, counts[hist], summary, counts[summary])
		}
	}
}

// TestTracedBucketsAreTheLiveOnes: the traced histograms' buckets are the
// continuous probe's, read from its source.
func TestTracedBucketsAreTheLiveOnes(t *testing.T) {
	src, err := os.ReadFile("../live/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	for name, ours := range map[string][]float64{"latencyBuckets": latencyBuckets, "tokenBuckets": tokenBuckets} {
		m := regexp.MustCompile(`\t` + name + ` += \[\]float64\{([^}]*)\}`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("no %s in probe/live/metrics.go", name)
		}
		var live []float64
		for _, f := range strings.Split(string(m[1]), ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, v)
		}
		if !slices.Equal(live, ours) {
			t.Errorf("%s: live %v, /probe %v", name, live, ours)
		}
	}
}
