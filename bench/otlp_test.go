package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP endpoint that keeps what it receives.
type otlpReceiver struct {
	mu      sync.Mutex
	metrics []*colmetrics.ExportMetricsServiceRequest
	traces  []*coltrace.ExportTraceServiceRequest
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	defer o.mu.Unlock()
	switch r.URL.Path {
	case "/v1/metrics":
		var m colmetrics.ExportMetricsServiceRequest
		if proto.Unmarshal(b, &m) == nil {
			o.metrics = append(o.metrics, &m)
		}
	case "/v1/traces":
		var tr coltrace.ExportTraceServiceRequest
		if proto.Unmarshal(b, &tr) == nil {
			o.traces = append(o.traces, &tr)
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func kv(kvs []*commonpb.KeyValue, key string) string {
	for _, a := range kvs {
		if a.GetKey() == key {
			switch v := a.GetValue().GetValue().(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return fmt.Sprint(v.IntValue)
			}
		}
	}
	return ""
}

// TestBenchOTLP: `bench --otlp.endpoint` pushes every repeat's requests as
// the exporter does, metrics and spans, each with infer_bench.cell and
// infer_bench.repeat; at ratio 1 every request sent has its span, whose
// ids are those of the traceparent the server received.
func TestBenchOTLP(t *testing.T) {
	st := startSim(t, 5*time.Millisecond, 1, 0)
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "b.yml", targetsYAML([]string{"sim"}, []*simTarget{st})+`
bench:
  matrix: {process: constant, rates: [10], shapes: [{name: s, input_tokens: 16, output_tokens: 4}]}
  warmup: 100ms
  duration: 600ms
  repeats: 2
  prompt_set_size: 8
  stability: {enabled: false}
  ranking: {resamples: 100}
`)
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+filepath.Join(dir, "out"),
		"--otlp.endpoint="+srv.URL, "--otlp.traces.sample-ratio=1")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	// The last push holds the totals: its duration points by repeat.
	if len(recv.metrics) == 0 {
		t.Fatal("no metrics pushed")
	}
	last := recv.metrics[len(recv.metrics)-1]
	perRepeat := map[string]uint64{}
	for _, rm := range last.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() != "gen_ai.client.operation.duration" {
					continue
				}
				for _, dp := range m.GetExponentialHistogram().GetDataPoints() {
					if kv(dp.GetAttributes(), "infer_bench.cell") == "" {
						t.Errorf("a point without infer_bench.cell: %v", dp.GetAttributes())
					}
					perRepeat[kv(dp.GetAttributes(), "infer_bench.repeat")] += dp.GetCount()
				}
			}
		}
	}
	if len(perRepeat) != 2 || perRepeat["0"] == 0 || perRepeat["1"] == 0 {
		t.Errorf("durations by repeat %v, want repeats 0 and 1", perRepeat)
	}
	spans := map[string]string{} // request id -> traceparent of its span
	for _, tr := range recv.traces {
		for _, rs := range tr.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					if kv(s.GetAttributes(), "infer_bench.cell") == "" || kv(s.GetAttributes(), "infer_bench.repeat") == "" {
						t.Errorf("span %s without the cell or repeat", s.GetName())
					}
					spans[kv(s.GetAttributes(), "infer_probe.request_id")] = "00-" + hex.EncodeToString(s.GetTraceId()) + "-" + hex.EncodeToString(s.GetSpanId()) + "-01"
				}
			}
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.traceparents) == 0 || len(st.traceparents) != len(st.ids) {
		t.Fatalf("%d of %d requests carried a traceparent", len(st.traceparents), len(st.ids))
	}
	for id, tp := range st.traceparents {
		if strings.Contains(id, "#") && spans[id] != tp {
			t.Errorf("%s: received %q, its span %q", id, tp, spans[id])
		}
	}
}
