package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// omExemplar is a classic bucket's line with its exemplar in the
// OpenMetrics text: `name_bucket{labels} count # {trace_id="<32
// hex>",span_id="<16 hex>"} value timestamp`.
var omExemplar = regexp.MustCompile(`^([a-z0-9_]+)_bucket\{[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})",span_id="([0-9a-f]{16})"\} \S+ \S+$`)

// getOpenMetrics fetches url asking for the OpenMetrics text, as
// Prometheus does, and fails unless that is what comes back.
func getOpenMetrics(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/openmetrics-text")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("GET %s: %d %q, want OpenMetrics text:\n%s", url, resp.StatusCode, ct, body)
	}
	return string(body)
}

// exemplarsOf are the exemplars of body's buckets, [name, trace id, span
// id] each; a bucket line with a malformed exemplar fails the test.
func exemplarsOf(t *testing.T, body string) [][3]string {
	t.Helper()
	var out [][3]string
	for _, line := range strings.Split(body, "\n") {
		if !strings.Contains(line, "_bucket{") || !strings.Contains(line, " # ") {
			continue
		}
		m := omExemplar.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("malformed exemplar: %s", line)
			continue
		}
		out = append(out, [3]string{m[1], m[2], m[3]})
	}
	return out
}

// receivedTraceparents are the traceparents the simulator logged
// receiving: the span id of each trace id.
func receivedTraceparents(log string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Msg         string `json:"msg"`
			Traceparent string `json:"traceparent"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "request received" {
			continue
		}
		if parts := strings.Split(rec.Traceparent, "-"); len(parts) == 4 {
			out[parts[1]] = parts[2]
		}
	}
	return out
}

// otlpSink accepts OTLP/HTTP pushes and keeps nothing.
func otlpSink(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestExemplarsJoinServerTraceparents is the acceptance of the
// exemplars: the exporter runs a workload against a simulator that logs
// each request's traceparent, spans pushed at a head ratio of 0 (no
// request's span chosen, every traceparent sent with flag 00) or not
// pushed at all. Its /metrics, asked for OpenMetrics, shows
// `# {trace_id="<32 hex>",span_id="<16 hex>"} value timestamp` on the TTFT
// and E2E buckets, as does a probe's answer, and every exemplar names the
// trace and span ids of a traceparent the server received. With
// --no-probe.traceparent and no push, the server receives no traceparent
// and there is no exemplar.
func TestExemplarsJoinServerTraceparents(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      func(t *testing.T) []string
		exemplars bool
	}{
		{"spans pushed", func(t *testing.T) []string {
			return []string{"--otlp.endpoint=" + otlpSink(t), "--otlp.traces.sample-ratio=0"}
		}, true},
		{"no push", func(*testing.T) []string { return nil }, true},
		{"no push, no traceparent", func(*testing.T) []string { return []string{"--no-probe.traceparent"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testExemplars(t, tc.args(t), tc.exemplars)
		})
	}
}

func testExemplars(t *testing.T, args []string, want bool) {
	var serverLog testenv.Buffer
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.1
	simURL, _ := simulatortest.StartTestLogged(t, cfg, slog.New(slog.NewJSONHandler(&serverLog, &slog.HandlerOptions{Level: slog.LevelDebug})))
	file := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`targets:
  - {name: t, url: %q, model: sim-model, timeout: 30s, metrics: {engine: none}}
modules:
  m:
    target: t
    requests: 3
    prompt:
      output_tokens: {dist: fixed, mean: 4}
    sampling: {ignore_eos: true}
workloads:
  - name: w
    target: t
    arrival: {process: constant, rate: 10}
    prompt:
      input_tokens: {dist: fixed, mean: 16}
      output_tokens: {dist: fixed, mean: 8}
    sampling: {ignore_eos: true}
`, simURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startExporter(t, append([]string{"--config.file=" + file}, args...)...)

	// A poll: requests are seconds apart on a busy machine.
	deadline := time.Now().Add(30 * time.Second)
	for {
		body := getOpenMetrics(t, base+"/metrics")
		exemplars := exemplarsOf(t, body)
		found := map[string]bool{}
		for _, e := range exemplars {
			found[e[0]] = true
		}
		if !want {
			if len(exemplars) > 0 {
				t.Fatalf("exemplars without a traceparent: %v", exemplars)
			}
			// Some requests ended (TTFT and E2E observed, buckets written),
			// and a probe answered: none sent a traceparent.
			if !strings.Contains(body, "infer_probe_request_duration_seconds_count{") || time.Now().Before(deadline.Add(-25*time.Second)) {
				if time.Now().After(deadline) {
					t.Fatalf("no request ended within 30 s:\n%s", body)
				}
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if probe := exemplarsOf(t, getOpenMetrics(t, base+"/probe?module=m&target="+url.QueryEscape(simURL))); len(probe) > 0 {
				t.Errorf("a probe's answer has exemplars without a traceparent: %v", probe)
			}
			if received := receivedTraceparents(serverLog.String()); len(received) > 0 {
				t.Errorf("the server received %d traceparents with --no-probe.traceparent", len(received))
			}
			return
		}
		if found["infer_probe_time_to_first_token_seconds"] && found["infer_probe_request_duration_seconds"] {
			// And a probe's: its traced histograms' buckets.
			probe := exemplarsOf(t, getOpenMetrics(t, base+"/probe?module=m&target="+url.QueryEscape(simURL)))
			probed := map[string]bool{}
			for _, e := range probe {
				probed[e[0]] = true
			}
			if !probed["probe_time_to_first_token_histogram_seconds"] || !probed["probe_e2e_latency_histogram_seconds"] {
				t.Errorf("a probe's answer has no exemplar on its TTFT and E2E buckets: %v", probe)
			}
			// Read after the scrapes: each request was logged before its answer.
			received := receivedTraceparents(serverLog.String())
			for _, e := range append(exemplars, probe...) {
				if span, ok := received[e[1]]; !ok || span != e[2] {
					t.Errorf("exemplar on %s: trace %s span %s, which the server never received (it logged %d traceparents)", e[0], e[1], e[2], len(received))
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no exemplar on the TTFT and E2E buckets within 30 s:\n%s", body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
