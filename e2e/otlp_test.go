package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// otlpExporterConfig: two workloads of a fixed duration on the simulator,
// one per API (chat, completions), so that they finish and their totals
// stand still. The completions' stall threshold is below the simulator's
// mid-stream stall, so that every one of its requests that reaches it
// stalls once (and keeps its span); the chat's is above it, so that its
// successes keep a span only when the head sampler chose them.
const otlpExporterConfig = `targets:
  - name: sim
    url: SIM
    flavor: openai-chat
    model: sim-model
    timeout: 30s
  - name: sim-completions
    url: SIM
    flavor: openai-completions
    model: sim-model
    timeout: 30s
workloads:
  - name: chat
    target: sim
    arrival: {process: poisson, rate: 8, max_rate: 40}
    max_in_flight: 64
    duration: 6s
    stall_threshold: 2s
    prompt:
      input_tokens: {dist: fixed, mean: 64}
      output_tokens: {dist: fixed, mean: 16}
      seed: 1
    sampling: {ignore_eos: true}
    slo: {ttft: 100ms}
  - name: complete
    target: sim-completions
    arrival: {process: constant, rate: 4, max_rate: 40}
    max_in_flight: 64
    duration: 6s
    stall_threshold: 150ms
    prompt:
      input_tokens: {dist: fixed, mean: 32}
      output_tokens: {dist: fixed, mean: 12}
      seed: 2
    sampling: {ignore_eos: true}
`

// otelcolConfig: the OTLP receiver, HTTP on ADDR and gRPC on GRPCADDR;
// the metrics written as OTLP JSON lines to FILE, the spans to TRACES;
// the collector's own metrics off, so that it opens no other port.
const otelcolConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: ADDR
      grpc:
        endpoint: GRPCADDR
exporters:
  file:
    path: FILE
    flush_interval: 100ms
  file/traces:
    path: TRACES
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [file]
    traces:
      receivers: [otlp]
      exporters: [file/traces]
`

// TestOTLPEndToEnd: the exporter pushes to a real OpenTelemetry Collector
// (tools/otelcol), over OTLP/HTTP and over gRPC, while Prometheus-style
// /metrics serves the same observations. Once the workloads have finished,
// the collector's output holds the conventions' names, units and
// attributes, and every count equals the /metrics side's; the spans are
// those of checkSpans.
func TestOTLPEndToEnd(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, in `make test-e2e`")
	}
	testenv.Slow(t, "-short: the OTLP end-to-end test takes about a minute")
	exporter := realstack.BuildExporter(t)
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "_"), func(t *testing.T) { testOTLPEndToEnd(t, exporter, protocol) })
	}
}

func testOTLPEndToEnd(t *testing.T, exporter, protocol string) {
	col := startCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	simAddr := realstack.FreeAddr(t)
	_, simPort, _ := net.SplitHostPort(simAddr)
	// One request in five fails with a 500; the others pause 400 ms after
	// their eighth token (a stall beyond the 150 ms threshold).
	// At debug level it logs each request's traceparent, as a server
	// that continues traces takes it.
	sim := realstack.Start(t, "simulator", "", exporter, "simulate", "--web.listen-address="+simAddr, "--log.level=debug", "--log.format=json",
		"--fault.error-rate=0.2", "--fault.error-status=500", "--fault.stall-mid-stream=400ms", "--fault.stall-after-tokens=8")
	simURL := "http://" + simAddr
	must(t, sim.WaitHTTP(ctx, simURL+"/health"))

	cfgFile := filepath.Join(t.TempDir(), "exporter.yml")
	must(t, os.WriteFile(cfgFile, []byte(strings.ReplaceAll(otlpExporterConfig, "SIM", simURL)), 0o644))
	expAddr := realstack.FreeAddr(t)
	// Pushed every half second, so the totals arrive soon after the end;
	// spans exported every half second too.
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "500")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "500")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
	endpoint := "http://" + col.addr
	if protocol == "grpc" {
		endpoint = "http://" + col.grpcAddr
	}
	// Half the requests chosen by the head sampler: both kinds are many.
	exp := realstack.Start(t, "exporter", "", exporter, "--config.file="+cfgFile, "--web.listen-address="+expAddr,
		"--no-collector.nvml", "--log.level=info", "--otlp.endpoint="+endpoint, "--otlp.traces.sample-ratio=0.5")
	metricsURL := "http://" + expAddr + "/metrics"
	must(t, exp.WaitHTTP(ctx, "http://"+expAddr+"/-/ready"))

	// Both workloads run for 6 s, then wait for their last requests.
	var prom map[string]*dto.MetricFamily
	waitFor(t, ctx, time.Minute, "both workloads to finish", func() (bool, string) {
		var err error
		if prom, err = scrape(ctx, metricsURL); err != nil {
			return false, err.Error()
		}
		finished := promSum(prom, "infer_probe_workload_state", map[string]string{"state": "finished"})
		return finished == 2, fmt.Sprintf("%v of 2 finished", finished)
	})
	// The totals stand still now; the next pushes carry them.
	prom, err := scrape(ctx, metricsURL)
	must(t, err)

	// How an OTLP figure is compared with its /metrics one.
	const (
		histograms = iota // count and sum of a histogram on both sides
		count             // the OTLP count (or a counter's value) is the counter's value
		sum               // the OTLP histogram's sum is the counter's value (tokens)
	)
	type check struct {
		name       string
		otlp       string
		attrs      map[string]string // "" as a value: the attribute is absent
		prometheus string
		labels     map[string]string
		how        int
	}
	var checks []check
	for _, wl := range []string{"chat", "complete"} {
		w := map[string]string{"infer_probe.workload": wl}
		l := map[string]string{"workload": wl}
		with := func(m map[string]string, k, v string) map[string]string {
			out := map[string]string{k: v}
			for a, b := range m {
				out[a] = b
			}
			return out
		}
		checks = append(checks,
			check{wl + " ttft", "gen_ai.client.operation.time_to_first_chunk", w, "infer_probe_time_to_first_token_seconds", l, histograms},
			check{wl + " itl", "gen_ai.client.operation.time_per_output_chunk", w, "infer_probe_inter_token_latency_seconds", l, histograms},
			check{wl + " e2e", "gen_ai.client.operation.duration", with(w, "error.type", ""), "infer_probe_request_duration_seconds", l, histograms},
			check{wl + " 5xx", "gen_ai.client.operation.duration", with(w, "error.type", "http_5xx"), "infer_probe_requests_total", with(l, "outcome", "http_5xx"), count},
			check{wl + " tpot", "infer_probe.time_per_output_token", w, "infer_probe_time_per_output_token_seconds", l, histograms},
			check{wl + " lag", "infer_probe.schedule_lag", w, "infer_probe_schedule_lag_seconds", l, histograms},
			check{wl + " goodput", "infer_probe.goodput", w, "infer_probe_goodput_requests_total", l, count},
			check{wl + " stalls", "infer_probe.stalls", w, "infer_probe_stalls_total", l, count},
			check{wl + " input tokens", "gen_ai.client.token.usage", with(w, "gen_ai.token.type", "input"), "infer_probe_prompt_tokens_total", l, sum},
			check{wl + " output tokens", "gen_ai.client.token.usage", with(w, "gen_ai.token.type", "output"), "infer_probe_completion_tokens_total", l, sum},
		)
	}
	var last *colmetrics.ExportMetricsServiceRequest
	waitFor(t, ctx, 30*time.Second, "the collector's totals to equal /metrics", func() (bool, string) {
		if last = col.last(t); last == nil {
			return false, "nothing received"
		}
		var diffs []string
		for _, c := range checks {
			n, s := otlpTotal(last, c.otlp, c.attrs)
			var same bool
			var want string
			switch c.how {
			case histograms:
				pn, ps := promHistogram(prom, c.prometheus, c.labels)
				// The sums add the same float64 values, perhaps in
				// another order.
				same = n == pn && math.Abs(s-ps) <= 1e-9*math.Max(1, math.Abs(ps))
				want = fmt.Sprintf("count %v sum %v", pn, ps)
			case count:
				pv := promSum(prom, c.prometheus, c.labels)
				same, want = n == pv, fmt.Sprint(pv)
			case sum:
				pv := promSum(prom, c.prometheus, c.labels)
				same, want = s == pv, fmt.Sprint(pv)
			}
			if !same {
				diffs = append(diffs, fmt.Sprintf("%s: OTLP %s count %v sum %v, /metrics %s %s", c.name, c.otlp, n, s, c.prometheus, want))
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
	for _, c := range checks {
		n, _ := otlpTotal(last, c.otlp, c.attrs)
		t.Logf("%s: %s = %v", c.name, c.otlp, n)
	}
	// The run was not trivial: failures, stalls and goodput all happened.
	for _, c := range []struct {
		what string
		v    float64
	}{
		{"5xx", promSum(prom, "infer_probe_requests_total", map[string]string{"outcome": "http_5xx"})},
		{"stalls", promSum(prom, "infer_probe_stalls_total", nil)},
		{"goodput", promSum(prom, "infer_probe_goodput_requests_total", nil)},
		{"successes", promSum(prom, "infer_probe_requests_total", map[string]string{"outcome": "success"})},
	} {
		if c.v == 0 {
			t.Errorf("no %s in the run: the comparison proves less than it should", c.what)
		}
	}
	if f := promSum(prom, "infer_exporter_otlp_export_failures_total", nil); f != 0 {
		t.Errorf("%v pushes failed", f)
	}

	// Names and units, the conventions' attributes, and the resource.
	units := map[string]string{
		"gen_ai.client.operation.duration": "s", "gen_ai.client.operation.time_to_first_chunk": "s",
		"gen_ai.client.operation.time_per_output_chunk": "s", "gen_ai.client.token.usage": "{token}",
		"infer_probe.time_per_output_token": "s", "infer_probe.schedule_lag": "s",
		"infer_probe.goodput": "{request}", "infer_probe.stalls": "{stall}",
	}
	seen := map[string]bool{}
	operations := map[string]string{"chat": "chat", "complete": "text_completion"}
	for _, rm := range last.GetResourceMetrics() {
		if v := attr(rm.GetResource().GetAttributes(), "service.name"); v != "infer_exporter" {
			t.Errorf("resource service.name %q", v)
		}
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				want, ok := units[m.GetName()]
				if !ok {
					continue
				}
				seen[m.GetName()] = true
				if m.GetUnit() != want {
					t.Errorf("%s: unit %q, want %q", m.GetName(), m.GetUnit(), want)
				}
				if m.GetExponentialHistogram() == nil && m.GetSum() == nil {
					t.Errorf("%s: neither an exponential histogram nor a sum", m.GetName())
				}
				for _, kvs := range pointAttrs(m) {
					wl := attr(kvs, "infer_probe.workload")
					for k, v := range map[string]string{
						"gen_ai.operation.name": operations[wl], "gen_ai.provider.name": "openai",
						"gen_ai.request.model": "sim-model", "server.address": "127.0.0.1", "server.port": simPort,
					} {
						if got := attr(kvs, k); got != v {
							t.Errorf("%s (workload %q): %s = %q, want %q", m.GetName(), wl, k, got, v)
						}
					}
				}
			}
		}
	}
	for name := range units {
		if !seen[name] {
			t.Errorf("%s never arrived", name)
		}
	}
	if b, err := os.ReadFile(exp.Log); err != nil || !bytes.Contains(b, []byte("endpoint="+endpoint)) || !bytes.Contains(b, []byte("protocol="+protocol)) {
		t.Errorf("the exporter's log does not name the endpoint %s and protocol %s it resolved", endpoint, protocol)
	}
	checkSpans(t, ctx, col, sim.Log, metricsURL, operations)
}

// TestOTLPDemoEndToEnd: `--demo --otlp.endpoint=...` with
// OTEL_METRIC_EXPORT_INTERVAL=2000: the collector receives the duration,
// the time to first chunk and the token usage, with gen_ai.request.model,
// within 15 s of the exporter's start (the bound).
func TestOTLPDemoEndToEnd(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, in `make test-e2e`")
	}
	exporter := realstack.BuildExporter(t)
	col := startCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "2000")
	expAddr := realstack.FreeAddr(t)
	started := time.Now()
	exp := realstack.Start(t, "exporter", "", exporter, "--demo", "--web.listen-address="+expAddr,
		"--no-collector.nvml", "--log.level=info", "--otlp.endpoint=http://"+col.addr)
	want := []string{"gen_ai.client.operation.duration", "gen_ai.client.operation.time_to_first_chunk", "gen_ai.client.token.usage"}
	waitFor(t, ctx, 15*time.Second, "the demo's metrics at the collector", func() (bool, string) {
		if exited, err := exp.Exited(); exited {
			t.Fatalf("the exporter exited: %v", err)
		}
		last := col.last(t)
		var missing []string
		for _, name := range want {
			if otlpCount(last, name, map[string]string{"gen_ai.request.model": "sim-model"}) == 0 {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not yet with gen_ai.request.model: %v", missing)
	})
	t.Logf("the collector had %v %s after the exporter's start", want, time.Since(started).Round(100*time.Millisecond))
}

// collector is a running tools/otelcol.
type collector struct {
	addr     string // its OTLP/HTTP receiver
	grpcAddr string // its OTLP/gRPC receiver
	file     string // where it writes the metrics it receives, one JSON request a line
	traces   string // and the spans
}

// startCollector runs the pinned collector with the configuration above.
func startCollector(t *testing.T) *collector {
	t.Helper()
	bin := otelcolTool(t)
	dir := t.TempDir()
	c := &collector{addr: realstack.FreeAddr(t), grpcAddr: realstack.FreeAddr(t), file: filepath.Join(dir, "metrics.jsonl"), traces: filepath.Join(dir, "traces.jsonl")}
	cfg := filepath.Join(dir, "otelcol.yaml")
	must(t, os.WriteFile(cfg, []byte(strings.NewReplacer("GRPCADDR", c.grpcAddr, "ADDR", c.addr, "TRACES", c.traces, "FILE", c.file).Replace(otelcolConfig)), 0o644))
	p := realstack.Start(t, "otelcol", dir, bin, "--config="+cfg)
	// The receiver answers only POSTs: wait until it accepts a connection.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", c.grpcAddr, time.Second); err == nil {
			conn.Close()
			if conn, err := net.DialTimeout("tcp", c.addr, time.Second); err == nil {
				conn.Close()
				return c
			}
		}
		if exited, err := p.Exited(); exited {
			t.Fatalf("otelcol exited: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("otelcol did not listen within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// last is the latest complete request the collector wrote; the exporter's
// temporality is cumulative, so it holds every series' totals.
func (c *collector) last(t *testing.T) *colmetrics.ExportMetricsServiceRequest {
	t.Helper()
	b, err := os.ReadFile(c.file)
	if err != nil || len(b) == 0 {
		return nil
	}
	// A line still being written has no newline yet.
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var lastLine []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			lastLine = append(lastLine[:0], sc.Bytes()...)
		}
	}
	if lastLine == nil {
		return nil
	}
	var req colmetrics.ExportMetricsServiceRequest
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(lastLine, &req); err != nil {
		t.Fatalf("the collector's output is not OTLP JSON: %v", err)
	}
	return &req
}

// otelcolTool builds (or finds in Go's cache) the collector of
// tools/otelcol. Like realstack.Tool, a missing tool fails in CI and skips
// elsewhere.
func otelcolTool(t *testing.T) string {
	t.Helper()
	return realstack.ModuleTool(t, "tools/otelcol", "otelcol")
}

// matches says whether kvs have every attribute of want ("" for absent).
func matches(kvs []*commonpb.KeyValue, want map[string]string) bool {
	for k, v := range want {
		if attr(kvs, k) != v {
			return false
		}
	}
	return true
}

// attr is an attribute's value as text ("" when absent).
func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() != key {
			continue
		}
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		default:
			return kv.GetValue().String()
		}
	}
	return ""
}

func pointAttrs(m *metricspb.Metric) [][]*commonpb.KeyValue {
	var out [][]*commonpb.KeyValue
	for _, p := range m.GetExponentialHistogram().GetDataPoints() {
		out = append(out, p.GetAttributes())
	}
	for _, p := range m.GetHistogram().GetDataPoints() {
		out = append(out, p.GetAttributes())
	}
	for _, p := range m.GetSum().GetDataPoints() {
		out = append(out, p.GetAttributes())
	}
	return out
}

// otlpTotal adds up a metric's points that match attrs: a histogram's
// counts and sums, a counter's values (as both).
func otlpTotal(req *colmetrics.ExportMetricsServiceRequest, name string, attrs map[string]string) (float64, float64) {
	var n, s float64
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() != name {
					continue
				}
				for _, p := range m.GetExponentialHistogram().GetDataPoints() {
					if matches(p.GetAttributes(), attrs) {
						n, s = n+float64(p.GetCount()), s+p.GetSum()
					}
				}
				for _, p := range m.GetHistogram().GetDataPoints() {
					if matches(p.GetAttributes(), attrs) {
						n, s = n+float64(p.GetCount()), s+p.GetSum()
					}
				}
				for _, p := range m.GetSum().GetDataPoints() {
					if matches(p.GetAttributes(), attrs) {
						v := float64(p.GetAsInt()) + p.GetAsDouble()
						n, s = n+v, s+v
					}
				}
			}
		}
	}
	return n, s
}

// otlpCount is the number of measurements of a histogram that match attrs.
func otlpCount(req *colmetrics.ExportMetricsServiceRequest, name string, attrs map[string]string) uint64 {
	n, _ := otlpTotal(req, name, attrs)
	return uint64(n)
}

// scrape reads the exporter's /metrics in the text format.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func promMatches(m *dto.Metric, labels map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if have[k] != v {
			return false
		}
	}
	return true
}

// promSum adds up the counters or gauges of a family whose labels match.
func promSum(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	v := 0.0
	for _, m := range mfs[name].GetMetric() {
		if promMatches(m, labels) {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return v
}

// promHistogram adds up the counts and sums of a histogram family's series
// whose labels match.
func promHistogram(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, float64) {
	var n, s float64
	for _, m := range mfs[name].GetMetric() {
		if promMatches(m, labels) {
			n += float64(m.GetHistogram().GetSampleCount())
			s += m.GetHistogram().GetSampleSum()
		}
	}
	return n, s
}
