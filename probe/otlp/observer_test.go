package otlp

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/live"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

func times(ms ...float64) []time.Time {
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		out[i] = at(m)
	}
	return out
}

// requests covers every path through the observers: streamed successes
// that meet and miss the SLO, an answer in one event (no TPOT, no gaps), a
// success without usage, failures before and after their first token, and
// arrivals never sent.
var requests = []observation.Request{
	{Scheduled: at(0), Sent: at(0.2), FirstToken: at(100), TokenTimes: times(100, 120, 150, 190), End: at(200),
		Outcome: observation.Success, PromptTokens: 64, OutputTokens: 4, TokenSource: observation.TokensFromUsage, ContentEvents: 4},
	{Scheduled: at(10), Sent: at(10.5), FirstToken: at(400), TokenTimes: times(400, 450, 520), End: at(530),
		Outcome: observation.Success, PromptTokens: 64, OutputTokens: 3, TokenSource: observation.TokensFromUsage, ContentEvents: 3},
	{Scheduled: at(20), Sent: at(20.1), FirstToken: at(90), TokenTimes: times(90), End: at(90),
		Outcome: observation.Success, PromptTokens: 32, OutputTokens: 8, TokenSource: observation.TokensFromUsage, ContentEvents: 1},
	{Scheduled: at(30), Sent: at(30.1), FirstToken: at(80), TokenTimes: times(80, 95), End: at(96),
		Outcome: observation.Success, OutputTokens: 2, TokenSource: observation.TokensFromEvents, ContentEvents: 2},
	{Scheduled: at(40), Sent: at(40.3), End: at(60), Outcome: observation.HTTP5xx, HTTPStatus: 500},
	{Scheduled: at(50), Sent: at(50.1), End: at(70), Outcome: observation.HTTP4xx, HTTPStatus: 429},
	{Scheduled: at(60), Sent: at(60.2), FirstToken: at(150), TokenTimes: times(150, 170), End: at(175),
		Outcome: observation.Disconnected, OutputTokens: 2, TokenSource: observation.TokensFromEvents, ContentEvents: 2},
	{Scheduled: at(70), Sent: at(70.1), End: at(1070), Outcome: observation.Timeout},
	{Scheduled: at(80), Outcome: observation.Dropped, DropReason: workload.DropInFlightCap},
	{Scheduled: at(90), Outcome: observation.Dropped, DropReason: workload.DropRateCeiling},
	{Scheduled: at(95), Outcome: observation.Dropped, DropReason: "bad_request"},
}

var (
	testTarget   = config.Target{Name: "sim", URL: "http://127.0.0.1:8000/v1", Flavor: "openai-chat", Model: "sim-model"}
	testWorkload = config.Workload{Name: "chat", SLO: config.SLO{TTFT: 150 * time.Millisecond}}
)

// play tells o of r as the runner and the client would: Sent, each content
// event as it arrives, then Done, or Dropped for an arrival never sent (a
// request the client could not build ends in Done as dropped).
func play(o workload.Observer, r observation.Request) {
	if r.Outcome == observation.Dropped && r.DropReason != "bad_request" {
		o.Dropped(&r)
		return
	}
	live := observation.Request{Scheduled: r.Scheduled, Sent: r.Sent}
	if !r.Sent.IsZero() {
		o.Sent(&live)
	}
	for _, tt := range r.TokenTimes {
		live.TokenTimes = append(live.TokenTimes, tt)
		live.ContentEvents++
		if live.ContentEvents == 1 {
			live.FirstToken = tt
			o.FirstToken(&live)
		}
		o.Token(&live)
	}
	o.Done(&r)
}

// newTestPusher records into a manual reader, with the aggregation h.
func newTestPusher(tb testing.TB, h Histograms) (*Pusher, *sdkmetric.ManualReader) {
	tb.Helper()
	return newTestPusherTemporality(tb, h, metricdata.CumulativeTemporality)
}

func newTestPusherTemporality(tb testing.TB, h Histograms, temporality metricdata.Temporality) (*Pusher, *sdkmetric.ManualReader) {
	tb.Helper()
	var reader *sdkmetric.ManualReader
	newReader := func(producer sdkmetric.ReaderOption) sdkmetric.Reader {
		reader = sdkmetric.NewManualReader(producer, sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return temporality }))
		return reader
	}
	p, err := newPusher(context.Background(), newReader, temporality, h, &Options{Version: "test", Getenv: func(string) string { return "" }})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, reader
}

func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// point is one data point's count and sum (a counter's value is its sum),
// with its attributes.
type point struct {
	attrs      attribute.Set
	count      uint64
	sum        float64
	exp        bool      // an exponential histogram
	boundaries []float64 // an explicit one's
}

func points(m metricdata.Metrics) []point {
	var out []point
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: p.Attributes, count: p.Count, sum: p.Sum, boundaries: p.Bounds})
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: p.Attributes, count: p.Count, sum: float64(p.Sum), boundaries: p.Bounds})
		}
	case metricdata.ExponentialHistogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: p.Attributes, count: p.Count, sum: p.Sum, exp: true})
		}
	case metricdata.ExponentialHistogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: p.Attributes, count: p.Count, sum: float64(p.Sum), exp: true})
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, point{attrs: p.Attributes, count: uint64(p.Value), sum: float64(p.Value)})
		}
	}
	return out
}

// total adds up the points of m whose attributes pass keep (nil: all).
func total(ms map[string]metricdata.Metrics, name string, keep func(attribute.Set) bool) (uint64, float64) {
	var n uint64
	var s float64
	for _, p := range points(ms[name]) {
		if keep == nil || keep(p.attrs) {
			n += p.count
			s += p.sum
		}
	}
	return n, s
}

func has(k attribute.Key, v string) func(attribute.Set) bool {
	return func(s attribute.Set) bool { got, ok := s.Value(k); return ok && got.AsString() == v }
}

func lacks(k attribute.Key) func(attribute.Set) bool {
	return func(s attribute.Set) bool { return !s.HasValue(k) }
}

// prom is what the Prometheus side holds, by metric name: a histogram's
// count and sum, a counter's value, summed over the series whose labels
// pass keep.
func prom(t *testing.T, reg *prometheus.Registry, name string, keep func(map[string]string) bool) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	var s float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if keep != nil && !keep(labels) {
				continue
			}
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				n += m.GetHistogram().GetSampleCount()
				s += m.GetHistogram().GetSampleSum()
			case dto.MetricType_COUNTER:
				n += uint64(m.GetCounter().GetValue())
				s += m.GetCounter().GetValue()
			}
		}
	}
	return n, s
}

func label(k, v string) func(map[string]string) bool {
	return func(l map[string]string) bool { return l[k] == v }
}

// TestAgreesWithPrometheus: the same requests told to the live series and
// to the OTLP observer give the same counts and sums, figure by figure,
// and the counts the requests above imply.
func TestAgreesWithPrometheus(t *testing.T) {
	reg := prometheus.NewRegistry()
	series := live.NewMetrics(reg).Series(testTarget.Name, testTarget.Model, testWorkload.Name, testWorkload.SLO)
	p, reader := newTestPusher(t, Exponential)
	obs := p.Workload(&testTarget, &testWorkload)
	both := workload.Observers{series, obs}
	for _, r := range requests {
		play(both, r)
	}
	scan := workload.StallScan{Stalled: 2, New: 2}
	series.Stalls(scan)
	obs.Stalls(scan)
	ms := collect(t, reader)

	notDropped := func(l map[string]string) bool { return l["outcome"] != string(observation.Dropped) }
	for _, tc := range []struct {
		name       string
		otlp       string
		keep       func(attribute.Set) bool
		prometheus string
		promKeep   func(map[string]string) bool
		want       uint64 // the count the requests above give
		noSum      bool   // the Prometheus side counts requests where OTLP sums seconds
	}{
		{"ttft", NameTimeToFirstChunk, nil, "infer_probe_time_to_first_token_seconds", nil, 5, false},
		{"itl", NameTimePerOutputChunk, nil, "infer_probe_inter_token_latency_seconds", nil, 3 + 2 + 1 + 1, false},
		{"e2e of successes", NameOperationDuration, lacks("error.type"), "infer_probe_request_duration_seconds", nil, 4, false},
		{"every sent request", NameOperationDuration, nil, "infer_probe_requests_total", notDropped, 8, true},
		{"http_5xx", NameOperationDuration, has("error.type", "http_5xx"), "infer_probe_requests_total", label("outcome", "http_5xx"), 1, true},
		{"timeout", NameOperationDuration, has("error.type", "timeout"), "infer_probe_requests_total", label("outcome", "timeout"), 1, true},
		{"tpot", NameTimePerOutputToken, nil, "infer_probe_time_per_output_token_seconds", nil, 3, false},
		{"schedule lag", NameScheduleLag, nil, "infer_probe_schedule_lag_seconds", nil, 8, false},
		{"goodput", NameGoodput, nil, "infer_probe_goodput_requests_total", nil, 3, false},
		{"stalls", NameStalls, nil, "infer_probe_stalls_total", nil, 2, false},
		{"dropped", NameDropped, nil, "infer_probe_requests_total", label("outcome", "dropped"), 3, false},
		{"dropped at the cap", NameDropped, has(AttrDropReason, workload.DropInFlightCap), "infer_probe_dropped_requests_total", label("reason", workload.DropInFlightCap), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, s := total(ms, tc.otlp, tc.keep)
			pn, ps := prom(t, reg, tc.prometheus, tc.promKeep)
			if n != pn || n != tc.want {
				t.Errorf("%s count %d, Prometheus %s %d, want %d", tc.otlp, n, tc.prometheus, pn, tc.want)
			}
			if !tc.noSum && math.Abs(s-ps) > 1e-9*math.Max(1, math.Abs(ps)) {
				t.Errorf("%s sum %g, Prometheus %s %g", tc.otlp, s, tc.prometheus, ps)
			}
		})
	}
	// Tokens: the histogram's sums are the Prometheus counters.
	for _, tc := range []struct{ kind, counter string }{
		{"input", "infer_probe_prompt_tokens_total"},
		{"output", "infer_probe_completion_tokens_total"},
	} {
		_, s := total(ms, NameTokenUsage, has("gen_ai.token.type", tc.kind))
		_, ps := prom(t, reg, tc.counter, nil)
		if s != ps || s == 0 {
			t.Errorf("%s tokens %g, Prometheus %s %g", tc.kind, s, tc.counter, ps)
		}
	}
	// Usage is recorded only where it is known: the success without usage
	// has no input tokens.
	if n, _ := total(ms, NameTokenUsage, has("gen_ai.token.type", "input")); n != 3 {
		t.Errorf("input token records %d, want 3 (the success without usage has none)", n)
	}
}

// TestAttributes: the conventions' attributes, from the target's flavor
// and URL, on every point; error.type only on failures.
func TestAttributes(t *testing.T) {
	for _, tc := range []struct {
		flavor, url         string
		operation, provider string
		address             string
		port                int64
	}{
		{"openai-chat", "http://vllm.example:8000/v1", "chat", "openai", "vllm.example", 8000},
		{"", "https://api.example/v1", "chat", "openai", "api.example", 443},
		{"openai-completions", "http://[::1]:9000", "text_completion", "openai", "::1", 9000},
		{"openai-responses", "https://api.openai.example/v1", "chat", "openai", "api.openai.example", 443},
		{"tgi", "http://tgi:80", "text_completion", "tgi", "tgi", 80},
		{"llamacpp", "http://llama", "text_completion", "llama_cpp", "llama", 80},
		{"ollama-chat", "http://ollama:11434", "chat", "ollama", "ollama", 11434},
		{"ollama-generate", "http://ollama:11434", "text_completion", "ollama", "ollama", 11434},
		{"triton", "http://triton:8000", "text_completion", "triton", "triton", 8000},
		{"sglang", "http://sglang:30000", "text_completion", "sglang", "sglang", 30000},
	} {
		t.Run(tc.flavor+" "+tc.url, func(t *testing.T) {
			p, reader := newTestPusher(t, Exponential)
			target := config.Target{Name: "t", URL: tc.url, Flavor: config.Flavor(tc.flavor), Model: "m-1"}
			o := p.Workload(&target, &config.Workload{Name: "w"})
			for _, r := range requests {
				play(o, r)
			}
			ms := collect(t, reader)
			for _, name := range []string{NameOperationDuration, NameTimeToFirstChunk, NameTimePerOutputChunk, NameTokenUsage} {
				ps := points(ms[name])
				if len(ps) == 0 {
					t.Fatalf("%s: no points", name)
				}
				for _, pt := range ps {
					for k, want := range map[attribute.Key]attribute.Value{
						"gen_ai.operation.name": attribute.StringValue(tc.operation),
						"gen_ai.provider.name":  attribute.StringValue(tc.provider),
						"gen_ai.request.model":  attribute.StringValue("m-1"),
						"server.address":        attribute.StringValue(tc.address),
						"server.port":           attribute.Int64Value(tc.port),
						AttrTarget:              attribute.StringValue("t"),
						AttrWorkload:            attribute.StringValue("w"),
					} {
						if got, ok := pt.attrs.Value(k); !ok || got != want {
							t.Errorf("%s: %s = %v, want %v", name, k, got.Emit(), want.Emit())
						}
					}
				}
			}
			var errorTypes []string
			for _, pt := range points(ms[NameOperationDuration]) {
				if v, ok := pt.attrs.Value("error.type"); ok {
					errorTypes = append(errorTypes, v.AsString())
				}
			}
			slices.Sort(errorTypes)
			if want := []string{"disconnected", "http_4xx", "http_5xx", "timeout"}; !slices.Equal(errorTypes, want) {
				t.Errorf("error.type values %v, want %v", errorTypes, want)
			}
		})
	}
}

// TestNamesUnitsAggregation: every instrument with its unit and a short
// description, histograms exponential or with the conventions' buckets as
// asked.
func TestNamesUnitsAggregation(t *testing.T) {
	units := map[string]string{
		NameOperationDuration: "s", NameTimeToFirstChunk: "s", NameTimePerOutputChunk: "s",
		NameTokenUsage: "{token}", NameTimePerOutputToken: "s", NameScheduleLag: "s",
		NameGoodput: "{request}", NameStalls: "{stall}", NameDropped: "{request}",
	}
	for _, tc := range []struct {
		h      Histograms
		bounds map[string][]float64 // explicit boundaries by name; nil for exponential
	}{
		{Exponential, nil},
		{Explicit, map[string][]float64{
			NameOperationDuration: conventionSeconds, NameTimeToFirstChunk: conventionSeconds,
			NameTimePerOutputChunk: conventionSeconds, NameTokenUsage: conventionTokens,
			NameTimePerOutputToken: tokenGapSeconds, NameScheduleLag: lagSeconds,
		}},
	} {
		t.Run(string(tc.h), func(t *testing.T) {
			p, reader := newTestPusher(t, tc.h)
			o := p.Workload(&testTarget, &testWorkload)
			for _, r := range requests {
				play(o, r)
			}
			o.Stalls(workload.StallScan{New: 1})
			ms := collect(t, reader)
			if len(ms) != len(units) {
				t.Errorf("%d metrics, want %d", len(ms), len(units))
			}
			for name, unit := range units {
				m, ok := ms[name]
				if !ok {
					t.Errorf("%s missing", name)
					continue
				}
				if m.Unit != unit || m.Description == "" || len(m.Description) > 150 {
					t.Errorf("%s: unit %q (want %q), description of %d characters", name, m.Unit, unit, len(m.Description))
				}
				for _, pt := range points(m) {
					want, isHist := tc.bounds[name]
					switch {
					case tc.bounds == nil && histogramNamed(name) && !pt.exp:
						t.Errorf("%s: not exponential", name)
					case isHist && !slices.Equal(pt.boundaries, want):
						t.Errorf("%s: boundaries %v, want %v", name, pt.boundaries, want)
					}
				}
			}
		})
	}
}

func histogramNamed(name string) bool {
	return slices.ContainsFunc(histogramDefs, func(d histogramDef) bool { return d.name == name })
}

// TestRecordingAllocatesNothing: the per-chunk path (a gap between two
// content events) costs no allocation.
func TestRecordingAllocatesNothing(t *testing.T) {
	p, _ := newTestPusher(t, Exponential)
	o := p.Workload(&testTarget, &testWorkload)
	r := requests[0]
	if n := testing.AllocsPerRun(1000, func() { o.Token(&r) }); n != 0 {
		t.Errorf("Token allocates %v times per call", n)
	}
}

// BenchmarkToken is the OTLP observer's cost per streamed chunk.
func BenchmarkToken(b *testing.B) {
	p, _ := newTestPusher(b, Exponential)
	o := p.Workload(&testTarget, &testWorkload)
	r := requests[0]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.Token(&r)
		}
	})
}
