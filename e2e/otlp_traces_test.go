package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/realstack"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// jsonSpan is a span as the collector's file exporter writes it (OTLP
// JSON: ids in hex, 64-bit integers as strings), which protojson, reading
// ids as base64, does not take.
type jsonSpan struct {
	TraceID    string    `json:"traceId"`
	SpanID     string    `json:"spanId"`
	ParentID   string    `json:"parentSpanId"`
	Name       string    `json:"name"`
	Kind       int       `json:"kind"`
	Start      string    `json:"startTimeUnixNano"`
	End        string    `json:"endTimeUnixNano"`
	Attributes []jsonKV  `json:"attributes"`
	Events     []jsonEvt `json:"events"`
	Status     struct {
		Code int `json:"code"`
	} `json:"status"`
}

type jsonKV struct {
	Key   string `json:"key"`
	Value struct {
		String *string   `json:"stringValue"`
		Int    *string   `json:"intValue"`
		Double *float64  `json:"doubleValue"`
		Bool   *bool     `json:"boolValue"`
		Other  *struct{} `json:"arrayValue"`
	} `json:"value"`
}

type jsonEvt struct {
	Name string `json:"name"`
	Time string `json:"timeUnixNano"`
}

func (s *jsonSpan) attr(key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value; {
		case v.String != nil:
			return *v.String
		case v.Int != nil:
			return *v.Int
		case v.Double != nil:
			return fmt.Sprint(*v.Double)
		case v.Bool != nil:
			return fmt.Sprint(*v.Bool)
		}
		return "?"
	}
	return ""
}

// spans reads every span the collector wrote so far, with its resource's
// service.name.
func (c *collector) spans(t *testing.T) []jsonSpan {
	t.Helper()
	b, err := os.ReadFile(c.traces)
	if err != nil {
		return nil
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []jsonSpan
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []jsonSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			t.Fatalf("the collector's traces are not OTLP JSON: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

// simulatorTraceparents reads the simulator's debug log: each request's id
// and the traceparent it arrived with.
func simulatorTraceparents(t *testing.T, logPath string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(logPath)
	must(t, err)
	out := map[string]string{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var rec struct {
			Msg         string `json:"msg"`
			RequestID   string `json:"request_id"`
			Traceparent string `json:"traceparent"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Msg != "request received" {
			continue
		}
		if _, dup := out[rec.RequestID]; dup {
			t.Errorf("request id %s received twice", rec.RequestID)
		}
		out[rec.RequestID] = rec.Traceparent
	}
	return out
}

// checkSpans: the spans at the collector are one per request the head
// sampler chose, and one per other request that failed or stalled, none
// for the rest; each named and attributed as the GenAI conventions name a
// client span, with the first-token event for each success; and the
// traceparent the simulator received with each request is the span's own
// context (its trace and span ids, sampled exactly when the head sampler
// chose it), so that a server that continues it makes its spans children
// of the client's.
func checkSpans(t *testing.T, ctx context.Context, col *collector, simLog, metricsURL string, operations map[string]string) {
	t.Helper()
	prom, err := scrape(ctx, metricsURL)
	must(t, err)
	want := promSum(prom, "infer_exporter_otlp_spans_total", nil)
	var spans []jsonSpan
	waitFor(t, ctx, 30*time.Second, "every span at the collector", func() (bool, string) {
		spans = col.spans(t)
		return float64(len(spans)) == want, fmt.Sprintf("%d spans of %v", len(spans), want)
	})
	if f := promSum(prom, "infer_exporter_otlp_span_export_failures_total", nil); f != 0 {
		t.Errorf("%v span exports failed", f)
	}
	sent := simulatorTraceparents(t, simLog)
	bySpan := map[string]*jsonSpan{}
	kept := map[string]int{}
	for i := range spans {
		s := &spans[i]
		bySpan[s.SpanID] = s
		id, wl, by, outcome := s.attr("infer_probe.request_id"), s.attr("infer_probe.workload"), s.attr("infer_probe.sampled_by"), s.attr("infer_probe.outcome")
		kept[by]++
		if s.Name != operations[wl]+" sim-model" || s.Kind != 3 || s.ParentID != "" {
			t.Errorf("%s: span %q kind %d parent %q, want %q, client (3), a root", id, s.Name, s.Kind, s.ParentID, operations[wl]+" sim-model")
		}
		for k, v := range map[string]string{
			"gen_ai.operation.name": operations[wl], "gen_ai.provider.name": "openai", "gen_ai.request.model": "sim-model",
			"server.address": "127.0.0.1", "infer_probe.target": map[string]string{"chat": "sim", "complete": "sim-completions"}[wl],
		} {
			if got := s.attr(k); got != v {
				t.Errorf("%s: %s = %q, want %q", id, k, got, v)
			}
		}
		for _, k := range []string{"server.port", "infer_probe.scheduled", "infer_probe.schedule_lag", "http.response.status_code"} {
			if s.attr(k) == "" {
				t.Errorf("%s: no %s", id, k)
			}
		}
		flag := "00"
		switch by {
		case "head":
			flag = "01"
		case "failure":
			if outcome == "success" {
				t.Errorf("%s: kept as a failure, but a success", id)
			}
		case "stall":
			if s.attr("infer_probe.stalled") != "true" || wl != "complete" {
				t.Errorf("%s: kept as a stall, stalled %q, workload %s", id, s.attr("infer_probe.stalled"), wl)
			}
		default:
			t.Errorf("%s: sampled_by %q", id, by)
		}
		if outcome == "success" {
			if s.attr("error.type") != "" || s.Status.Code == 2 || s.attr("gen_ai.usage.output_tokens") == "" {
				t.Errorf("%s: a success with error.type %q, status %d, output tokens %q", id, s.attr("error.type"), s.Status.Code, s.attr("gen_ai.usage.output_tokens"))
			}
			var first int
			for _, e := range s.Events {
				if e.Name == "infer_probe.first_token" && e.Time > s.Start && e.Time <= s.End {
					first++
				}
			}
			if first != 1 {
				t.Errorf("%s: %d first-token events within the span, want 1: %+v", id, first, s.Events)
			}
		} else if s.attr("error.type") != outcome || s.Status.Code != 2 {
			t.Errorf("%s: outcome %s with error.type %q and status %d", id, outcome, s.attr("error.type"), s.Status.Code)
		}
		if got, want := sent[id], "00-"+s.TraceID+"-"+s.SpanID+"-"+flag; got != want {
			t.Errorf("%s: the simulator received traceparent %q, the span is %q", id, got, want)
		}
	}
	// Every request chosen by the head sampler has its span; the chat's
	// successes that it did not choose have none.
	chosen, unchosen := 0, 0
	for id, tp := range sent {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
			t.Errorf("%s: traceparent %q", id, tp)
			continue
		}
		s, ok := bySpan[parts[2]]
		switch {
		case parts[3] == "01":
			chosen++
			if !ok {
				t.Errorf("%s: sampled, but no span", id)
			}
		case strings.HasPrefix(id, "chat-"):
			if ok && s.attr("infer_probe.sampled_by") != "failure" {
				t.Errorf("%s: not sampled, not failed, yet a span (%s)", id, s.attr("infer_probe.sampled_by"))
			}
			if !ok {
				unchosen++
			}
		}
	}
	if kept["head"] != chosen || chosen == 0 || unchosen == 0 || kept["failure"] == 0 || kept["stall"] == 0 {
		t.Errorf("spans kept %v; %d requests sampled, %d chat successes not: every kind must occur, head spans = sampled", kept, chosen, unchosen)
	}
	for by, n := range kept {
		if got := promSum(prom, "infer_exporter_otlp_spans_total", map[string]string{"sampled_by": by}); got != float64(n) {
			t.Errorf("infer_exporter_otlp_spans_total{sampled_by=%q} = %v, the collector has %d", by, got, n)
		}
	}
	t.Logf("%d spans: %v; %d requests received by the simulator, %d sampled", len(spans), kept, len(sent), chosen)
}

// TestOTLPProtocolRefused: an unknown OTEL_EXPORTER_OTLP_PROTOCOL stops
// the exporter at start, saying what it takes, rather than pushing in a
// transport the collector may not speak.
func TestOTLPProtocolRefused(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, in `make test-e2e`")
	}
	exporter := realstack.BuildExporter(t)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "bogus")
	out, err := realstack.Run(t, exporter, "--demo", "--web.listen-address="+realstack.FreeAddr(t), "--no-collector.nvml",
		"--otlp.endpoint=http://127.0.0.1:4318")
	if err == nil || !strings.Contains(out, `OTEL_EXPORTER_OTLP_PROTOCOL=\"bogus\": unknown OTLP protocol; want \"grpc\" or \"http/protobuf\"`) {
		t.Errorf("exit %v, output:\n%s\nwant a failure naming the variable and the values it takes", err, out)
	}
}

// TestOTLPGRPCAgainstHTTPOnly: gRPC pushed to a port that speaks only
// OTLP/HTTP fails; each failure is counted, and the log names the URL and
// protocol it resolved, so that the mistake shows as more than a counter.
func TestOTLPGRPCAgainstHTTPOnly(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("runs without the race detector, in `make test-e2e`")
	}
	exporter := realstack.BuildExporter(t)
	col := startCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "500")
	t.Setenv("OTEL_METRIC_EXPORT_TIMEOUT", "2000")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	expAddr := realstack.FreeAddr(t)
	endpoint := "http://" + col.addr // the HTTP receiver's port
	exp := realstack.Start(t, "exporter", "", exporter, "--demo", "--web.listen-address="+expAddr,
		"--no-collector.nvml", "--log.level=info", "--otlp.endpoint="+endpoint)
	must(t, exp.WaitHTTP(ctx, "http://"+expAddr+"/-/ready"))
	waitFor(t, ctx, 45*time.Second, "a counted failure and its log line", func() (bool, string) {
		prom, err := scrape(ctx, "http://"+expAddr+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		f := promSum(prom, "infer_exporter_otlp_export_failures_total", nil)
		b, _ := os.ReadFile(exp.Log)
		logged := bytes.Contains(b, []byte("OTLP push failed")) && bytes.Contains(b, []byte("endpoint="+endpoint)) && bytes.Contains(b, []byte("protocol=grpc"))
		return f > 0 && logged, fmt.Sprintf("%v failures, logged with the URL: %v", f, logged)
	})
	if col.last(t) != nil {
		t.Error("the HTTP receiver received metrics from a gRPC push")
	}
}
