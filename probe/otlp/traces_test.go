package otlp

import (
	"context"
	"math"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// newTestTracingPusher records metrics into a manual reader and spans into
// a recorder, the head sampler at ratio.
func newTestTracingPusher(tb testing.TB, ratio float64) (*Pusher, *tracetest.SpanRecorder) {
	tb.Helper()
	p, _ := newTestPusher(tb, Exponential)
	rec := tracetest.NewSpanRecorder()
	tr, err := newTracesWith(context.Background(), &Options{Version: "test", Getenv: env()}, ratio, sdktrace.WithSpanProcessor(rec))
	if err != nil {
		tb.Fatal(err)
	}
	p.traces = tr
	return p, rec
}

func TestSampleRatio(t *testing.T) {
	half := 0.5
	bad := 1.5
	for _, tc := range []struct {
		name string
		opt  *float64
		env  func(string) string
		want float64
		err  bool
	}{
		{"default", nil, env(), DefaultSampleRatio, false},
		{"option", &half, env(envSampler, "always_on"), 0.5, false},
		{"option out of range", &bad, env(), 0, true},
		{"always_on", nil, env(envSampler, "always_on"), 1, false},
		{"parentbased_always_off", nil, env(envSampler, "parentbased_always_off"), 0, false},
		{"traceidratio", nil, env(envSampler, "traceidratio", envSamplerArg, "0.25"), 0.25, false},
		{"traceidratio without arg", nil, env(envSampler, "parentbased_traceidratio"), 1, false},
		{"traceidratio bad arg", nil, env(envSampler, "traceidratio", envSamplerArg, "x"), 0, true},
		{"traceidratio arg out of range", nil, env(envSampler, "traceidratio", envSamplerArg, "2"), 0, true},
		{"unknown sampler", nil, env(envSampler, "jaeger_remote"), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sampleRatio(&Options{SampleRatio: tc.opt, Getenv: tc.env})
			if (err != nil) != tc.err || (err == nil && got != tc.want) {
				t.Errorf("sampleRatio = %v %v, want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestHeadSampler: every trace context is valid and its own; the share
// chosen is the ratio, within 6 standard deviations of the binomial (a
// false failure about once in 10^9 runs), and the decision is the SDK's
// TraceIDRatioBased rule on the same trace id, so that a collector's or a
// server's ratio sampler agrees.
func TestHeadSampler(t *testing.T) {
	const n = 100000
	for _, ratio := range []float64{0, 0.01, 0.1, 1} {
		h := newHeadSampler(ratio)
		sdk := sdktrace.TraceIDRatioBased(ratio)
		seen := map[[16]byte]bool{}
		sampled := 0
		for range n {
			tr := h.Trace()
			if !tr.Valid() || seen[tr.TraceID] {
				t.Fatalf("ratio %v: trace %+v invalid or repeated", ratio, tr)
			}
			seen[tr.TraceID] = true
			if tr.Sampled {
				sampled++
			}
			res := sdk.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tr.TraceID})
			if (res.Decision == sdktrace.RecordAndSample) != tr.Sampled {
				t.Fatalf("ratio %v: trace %x sampled %v, the SDK's rule says %v", ratio, tr.TraceID, tr.Sampled, res.Decision)
			}
		}
		sd := math.Sqrt(n * ratio * (1 - ratio))
		if math.Abs(float64(sampled)-n*ratio) > 6*sd {
			t.Errorf("ratio %v: %d of %d sampled", ratio, sampled, n)
		}
	}
}

func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// TestSpans: the spans of the requests, each with its trace context as a
// head sampler would give it (every other one sampled), one stalled: a
// span for each sampled request, and for each failed or stalled one not
// sampled, none for the rest nor for arrivals never sent; each named and
// attributed as the GenAI conventions name a client span, with the ids of
// its traceparent, the sent and end instants, the first-token event, and
// an error status on failure.
func TestSpans(t *testing.T) {
	p, rec := newTestTracingPusher(t, 0)
	o := p.Workload(&testTarget, &testWorkload)
	want := map[trace.SpanID]observation.Request{}
	kept := map[string]int{}
	for i, r := range requests {
		r.RequestID = "chat-" + string(rune('a'+i))
		r.Trace = observation.Trace{TraceID: [16]byte{byte(i + 1)}, SpanID: [8]byte{byte(i + 1)}, Sampled: i%2 == 0}
		if i == 1 {
			r.Stalled = true
		}
		if r.Outcome == observation.Dropped {
			r.Trace = observation.Trace{} // never sent: never given one
		}
		play(o, r)
		if by := keptBy(&r); by != "" && r.Trace.Valid() {
			want[trace.SpanID(r.Trace.SpanID)] = r
			kept[by]++
		}
	}
	if kept[KeptHead] == 0 || kept[KeptFailure] == 0 || kept[KeptStall] == 0 {
		t.Fatalf("the requests do not cover every reason: %v", kept)
	}
	spans := rec.Ended()
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d (%v)", len(spans), len(want), kept)
	}
	for _, s := range spans {
		r, ok := want[s.SpanContext().SpanID()]
		if !ok {
			t.Errorf("span %s not wanted", s.SpanContext().SpanID())
			continue
		}
		if s.SpanContext().TraceID() != trace.TraceID(r.Trace.TraceID) || s.Parent().IsValid() {
			t.Errorf("%s: trace %s parent %v, want the traceparent's %x and no parent", r.RequestID, s.SpanContext().TraceID(), s.Parent(), r.Trace.TraceID)
		}
		if s.Name() != "chat sim-model" || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: span %q kind %v, want \"chat sim-model\", client", r.RequestID, s.Name(), s.SpanKind())
		}
		if !s.StartTime().Equal(r.Sent) || !s.EndTime().Equal(r.End) {
			t.Errorf("%s: span %v to %v, want sent %v to end %v", r.RequestID, s.StartTime(), s.EndTime(), r.Sent, r.End)
		}
		a := attrMap(s.Attributes())
		for k, v := range map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "sim-model",
			"server.address": "127.0.0.1", "infer_probe.target": "sim", "infer_probe.workload": "chat",
			"infer_probe.request_id": r.RequestID, "infer_probe.sampled_by": keptBy(&r), "infer_probe.outcome": string(r.Outcome),
			"infer_probe.scheduled": r.Scheduled.UTC().Format(time.RFC3339Nano),
		} {
			if got := a[k].AsString(); got != v {
				t.Errorf("%s: %s = %q, want %q", r.RequestID, k, got, v)
			}
		}
		if a["server.port"].AsInt64() != 8000 {
			t.Errorf("%s: server.port %v", r.RequestID, a["server.port"])
		}
		lag, _ := r.ScheduleLag()
		if got := a["infer_probe.schedule_lag"].AsFloat64(); math.Abs(got-lag.Seconds()) > 1e-12 {
			t.Errorf("%s: schedule_lag %v, want %v", r.RequestID, got, lag.Seconds())
		}
		if r.PromptTokens > 0 && a["gen_ai.usage.input_tokens"].AsInt64() != int64(r.PromptTokens) ||
			r.OutputTokens > 0 && a["gen_ai.usage.output_tokens"].AsInt64() != int64(r.OutputTokens) {
			t.Errorf("%s: usage %v %v, want %d %d", r.RequestID, a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"], r.PromptTokens, r.OutputTokens)
		}
		failed := r.Outcome != observation.Success
		if failed != (s.Status().Code == codes.Error) || failed != (a["error.type"].AsString() == string(r.Outcome)) {
			t.Errorf("%s: status %v error.type %q for outcome %s", r.RequestID, s.Status(), a["error.type"].AsString(), r.Outcome)
		}
		var first []time.Time
		for _, e := range s.Events() {
			if e.Name == EventFirstToken {
				first = append(first, e.Time)
			}
		}
		if r.FirstToken.IsZero() != (len(first) == 0) || len(first) > 1 || (len(first) == 1 && !first[0].Equal(r.FirstToken)) {
			t.Errorf("%s: first-token events %v, want one at %v", r.RequestID, first, r.FirstToken)
		}
		if d, ok := r.TTFT(); ok && math.Abs(a["gen_ai.response.time_to_first_chunk"].AsFloat64()-d.Seconds()) > 1e-12 {
			t.Errorf("%s: time_to_first_chunk %v, want %v", r.RequestID, a["gen_ai.response.time_to_first_chunk"], d.Seconds())
		}
	}
}

// TestSpanFirstAnswer: a reasoning model's span has the first token and,
// later, the first answer token; a plain one the first token only.
func TestSpanFirstAnswer(t *testing.T) {
	p, rec := newTestTracingPusher(t, 1)
	o := p.Workload(&testTarget, &testWorkload)
	tr := observation.Trace{TraceID: [16]byte{1}, SpanID: [8]byte{1}, Sampled: true}
	r := observation.Request{Scheduled: at(0), Sent: at(1), FirstToken: at(50), FirstAnswer: at(400), TokenTimes: times(50, 400), End: at(500),
		Outcome: observation.Success, OutputTokens: 2, ReasoningTokens: 1, ContentEvents: 2, Trace: tr}
	o.Done(&r)
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	ev := spans[0].Events()
	if len(ev) != 2 || ev[0].Name != EventFirstToken || !ev[0].Time.Equal(at(50)) || ev[1].Name != EventFirstAnswer || !ev[1].Time.Equal(at(400)) {
		t.Errorf("events %+v, want the first token at 50 ms and the first answer at 400 ms", ev)
	}
	if got := attrMap(spans[0].Attributes())["gen_ai.usage.reasoning.output_tokens"].AsInt64(); got != 1 {
		t.Errorf("reasoning tokens %d, want 1", got)
	}
}

// TestNoTracesNoTracer: without spans there is no head sampler, so no
// traceparent goes out, and the observer builds none.
func TestNoTracesNoTracer(t *testing.T) {
	p, _ := newTestPusher(t, Exponential)
	if p.Tracer() != nil {
		t.Error("a tracer without spans")
	}
	if o := p.Workload(&testTarget, &testWorkload); o.spans != nil {
		t.Error("a span recorder without spans")
	}
	tp, _ := newTestTracingPusher(t, 0.5)
	if tp.Tracer() == nil {
		t.Error("no tracer with spans")
	}
}

// TestProbeSpansKept: a probe's requests are always sampled, and each has its
// span, kept as sampled_by=probe with the module's name, a success too.
func TestProbeSpansKept(t *testing.T) {
	p, rec := newTestTracingPusher(t, 0)
	ps := p.Probe(&testTarget, "chat", config.Sampling{})
	for i := range 3 {
		tr := ps.Trace()
		if !tr.Valid() || !tr.Sampled {
			t.Fatalf("trace %+v: want valid and sampled", tr)
		}
		r := requests[0]
		r.Trace, r.RequestID = tr, "probe-chat-1-"+string(rune('0'+i))
		ps.Done(&r)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for _, s := range spans {
		a := attrMap(s.Attributes())
		if a["infer_probe.sampled_by"].AsString() != KeptProbe || a["infer_probe.module"].AsString() != "chat" || s.Name() != "chat sim-model" {
			t.Errorf("span %q: %v", s.Name(), a)
		}
	}
	np, _ := newTestPusher(t, Exponential)
	if np.Probe(&testTarget, "chat", config.Sampling{}) != nil {
		t.Error("probe spans without spans pushed")
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Skip(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardSpans is a span exporter that drops every batch.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkSpanDone: what one kept request's span costs, built at its end
// and handed to the batch processor (whose export is to a discarding
// exporter, so the OTLP encoding is not counted), and what an unchosen
// request's end costs the span path (nothing kept).
func BenchmarkSpanDone(b *testing.B) {
	for _, sampled := range []bool{true, false} {
		b.Run(map[bool]string{true: "kept", false: "not kept"}[sampled], func(b *testing.B) {
			p, _ := newTestPusher(b, Exponential)
			tr, err := newTracesWith(context.Background(), &Options{Version: "bench", Getenv: env()}, 1, sdktrace.WithBatcher(discardSpans{}))
			if err != nil {
				b.Fatal(err)
			}
			p.traces = tr
			s := p.Workload(&testTarget, &testWorkload).spans
			r := requests[0]
			r.RequestID = "chat-1"
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				r.Trace = tr.head.Trace()
				r.Trace.Sampled = sampled
				s.done(&r)
			}
			// Spans are handed to the batcher's queue: flush, so that its
			// goroutine's work is in the process's CPU time too. On a
			// loaded machine the CPU time, not ns/op, is the cost.
			_ = tr.provider.ForceFlush(context.Background())
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
