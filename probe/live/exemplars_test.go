package live

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/simulator/simulatortest"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/plan"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// randomTracer gives each request random ids, as the OTLP head sampler
// does, sampled or not at random: exemplars do not depend on the flag.
type randomTracer struct{}

func (randomTracer) Trace() observation.Trace {
	var t observation.Trace
	for i := range t.TraceID {
		t.TraceID[i] = byte(rand.Uint32())
	}
	for i := range t.SpanID {
		t.SpanID[i] = byte(rand.Uint32())
	}
	t.TraceID[0], t.SpanID[0] = 1, 1 // never the invalid all-zero ids
	t.Sampled = rand.Uint32()%2 == 0
	return t
}

// bucketExemplar is the exemplar of one classic bucket of one series.
func bucketExemplar(t *testing.T, h *exemplarHistogram, le float64) *dto.Exemplar {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetExemplar()
		}
	}
	t.Fatalf("no bucket le=%v", le)
	return nil
}

func exemplarTraceIDOf(e *dto.Exemplar) string {
	for _, l := range e.GetLabel() {
		if l.GetName() == exemplarTraceID {
			return l.GetValue()
		}
	}
	return ""
}

// TestExemplarOncePerBucketAndSecond: a bucket's exemplar is a traced
// request's, replaced by a later one only a second after it on the
// requests' clock, and each bucket is replaced on its own; an untraced
// request gives none. The native histogram's exemplars stay within their
// bound however many requests come.
func TestExemplarOncePerBucketAndSecond(t *testing.T) {
	h := newExemplarHistogram(histogram("x_seconds", "x", latencyBuckets).WithLabelValues("t", "m", "w"), latencyBuckets)
	t0 := time.Unix(1_700_000_000, 0)
	tracer := randomTracer{}
	a, b, c, d, e := tracer.Trace(), tracer.Trace(), tracer.Trace(), tracer.Trace(), tracer.Trace()
	id := func(t observation.Trace) string { s, _ := t.IDs(); return s }

	h.observe(0.02, t0, observation.Trace{}) // le=0.025, untraced
	if e := bucketExemplar(t, h, 0.025); e != nil {
		t.Fatalf("an untraced request left the exemplar %v", e)
	}
	for _, step := range []struct {
		name string
		v    float64
		at   time.Duration
		tr   observation.Trace
		le   float64
		want observation.Trace // the bucket's exemplar after the step
	}{
		{"the first traced request", 0.02, 0, a, 0.025, a},
		{"half a second later, kept", 0.021, 500 * time.Millisecond, b, 0.025, a},
		{"another bucket, its own", 0.2, 600 * time.Millisecond, d, 0.2, d},
		{"a second later, replaced", 0.022, time.Second, c, 0.025, c},
		{"told late, earlier than the exemplar: kept", 0.023, 900 * time.Millisecond, e, 0.025, c},
	} {
		h.observe(step.v, t0.Add(step.at), step.tr)
		if got := exemplarTraceIDOf(bucketExemplar(t, h, step.le)); got != id(step.want) {
			t.Errorf("%s: exemplar %s, want %s", step.name, got, id(step.want))
		}
	}

	// An hour of requests, ten a second over every bucket: at most one
	// native exemplar per classic bucket.
	for i := range 36_000 {
		h.observe(float64(i%130)+0.0005, t0.Add(2*time.Second+time.Duration(i)*100*time.Millisecond), tracer.Trace())
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n, max := len(m.GetHistogram().GetExemplars()), len(latencyBuckets)+1; n == 0 || n > max {
		t.Errorf("%d native exemplars, want 1 to %d", n, max)
	}
}

// exemplarLine is one classic bucket with its exemplar in the OpenMetrics
// text: `name_bucket{labels} count # {trace_id="<32 hex>",span_id="<16
// hex>"} value timestamp`, the ids in that order (exemplarVec), the
// timestamp in seconds (client_golang writes it as 1.7e+09).
var exemplarLine = regexp.MustCompile(`^(infer_probe_[a-z_]+_seconds)_bucket\{[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})",span_id="([0-9a-f]{16})"\} (\S+) (\S+)$`)

// TestExemplarsJoinTheServersTraceparents: a traced workload against the
// simulator, its /metrics read in the OpenMetrics format. Every exemplar
// on the TTFT, TPOT, ITL and E2E buckets (each has some) names the trace
// and span ids of a traceparent the simulator logged receiving, the parent
// a server that continues the trace gives its spans, and its value is
// that request's measured TTFT or E2E. The native histograms' exemplars
// come from the same requests.
func TestExemplarsJoinTheServersTraceparents(t *testing.T) {
	start := time.Now()
	var serverLog testenv.Buffer
	cfg := simulator.DefaultConfig()
	cfg.TimeScale = 0.2 // 4 ms decode steps
	baseURL, _ := simulatortest.StartTestLogged(t, cfg, slog.New(slog.NewJSONHandler(&serverLog, &slog.HandlerOptions{Level: slog.LevelDebug})))
	cl := client.New(client.Options{MaxConnsPerHost: 64})
	t.Cleanup(cl.Close)
	reg := prometheus.NewRegistry()
	s := NewMetrics(reg).Series("sim", cfg.Model, "live", config.SLO{})
	offsets := make([]time.Duration, 12)
	for i := range offsets {
		offsets[i] = time.Duration(i) * 20 * time.Millisecond
	}
	r := workload.Plan{
		Name: "live", Target: &client.Target{Name: "sim", BaseURL: baseURL, Model: cfg.Model, Flavor: client.OpenAIChat},
		Source: workload.OpenLoop{Schedule: &listSchedule{offsets: offsets}, Prompts: prompt.New(config.Distribution{Dist: "fixed", Mean: 32}, config.Distribution{Dist: "fixed", Mean: 16}, 1)},
		Client: cl, Limits: workload.Limits{MaxInFlight: 64}, Observer: s, Monitor: s, Tracer: randomTracer{},
		Template: plan.Template{Sampling: config.Sampling{IgnoreEOS: true}, Timeout: time.Minute},
	}.Runner()
	var mu sync.Mutex
	measured := map[string]*observation.Request{} // by trace id
	onResult(r, func(o *observation.Request) {
		traceID, _ := o.Trace.IDs()
		c := *o
		mu.Lock()
		measured[traceID] = &c
		mu.Unlock()
	})
	r.Run(context.Background())
	if len(measured) != len(offsets) {
		t.Fatalf("%d requests measured, want %d", len(measured), len(offsets))
	}

	// The traceparents the server received: "00-<trace id>-<span id>-<flags>".
	received := map[string]string{} // span id by trace id
	for _, line := range strings.Split(serverLog.String(), "\n") {
		var rec struct {
			Msg         string `json:"msg"`
			Traceparent string `json:"traceparent"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "request received" {
			continue
		}
		if parts := strings.Split(rec.Traceparent, "-"); len(parts) == 4 {
			received[parts[1]] = parts[2]
		}
	}
	if len(received) != len(offsets) {
		t.Fatalf("the simulator logged %d traceparents, want %d:\n%s", len(received), len(offsets), serverLog.String())
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("Content-Type %q, want OpenMetrics", ct)
	}
	found := map[string]int{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.Contains(line, "_bucket{") || !strings.Contains(line, " # ") {
			continue
		}
		m := exemplarLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("malformed exemplar: %s", line)
			continue
		}
		name, traceID, spanID := m[1], m[2], m[3]
		found[name]++
		if received[traceID] != spanID {
			t.Errorf("exemplar %s/%s on %s: no such traceparent received by the server", traceID, spanID, name)
		}
		o := measured[traceID]
		if o == nil {
			t.Errorf("exemplar of trace %s on %s: no such request measured", traceID, name)
			continue
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			t.Fatal(err)
		}
		// When the exemplar was taken: during the run.
		if ts, err := strconv.ParseFloat(m[5], 64); err != nil || ts < float64(start.Unix()) || ts > float64(time.Now().Unix()+1) {
			t.Errorf("exemplar timestamp %s outside the run (%v to now): %v", m[5], start.Unix(), err)
		}
		var want time.Duration
		switch name {
		case "infer_probe_time_to_first_token_seconds":
			want, _ = o.TTFT()
		case "infer_probe_request_duration_seconds":
			want, _ = o.E2E()
		default:
			continue // a gap or a mean of gaps: the joins above suffice
		}
		if v != want.Seconds() {
			t.Errorf("%s exemplar of trace %s: %v, its request measured %v", name, traceID, v, want.Seconds())
		}
	}
	for _, name := range []string{
		"infer_probe_time_to_first_token_seconds", "infer_probe_request_duration_seconds",
		"infer_probe_time_per_output_token_seconds", "infer_probe_inter_token_latency_seconds",
	} {
		if found[name] == 0 {
			t.Errorf("no exemplar on %s:\n%s", name, body)
		}
	}

	// The native histograms' exemplars, in the protobuf exposition.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "infer_probe_time_to_first_token_seconds" && mf.GetName() != "infer_probe_request_duration_seconds" {
			continue
		}
		es := mf.GetMetric()[0].GetHistogram().GetExemplars()
		if len(es) == 0 {
			t.Errorf("%s: no native exemplar", mf.GetName())
		}
		for _, e := range es {
			if id := exemplarTraceIDOf(e); measured[id] == nil {
				t.Errorf("%s: native exemplar of trace %q, no such request", mf.GetName(), id)
			}
		}
	}
}
