package otlp

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// DefaultSampleRatio is the head sampler's ratio when neither the option
// nor OTEL_TRACES_SAMPLER sets one: low, so that a workload at thousands
// of requests a second sends a collector tens of spans a second, not
// thousands. Failures and stalls are kept whatever the ratio (below).
const DefaultSampleRatio = 0.01

// The standard variables of the traces that this package reads itself.
const (
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envSampler        = "OTEL_TRACES_SAMPLER"
	envSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
)

// Why a span was kept: the infer_probe.sampled_by attribute and the label
// of infer_exporter_otlp_spans_total.
const (
	// KeptHead: the head sampler chose the request before it was sent;
	// its traceparent said sampled, so the server's spans exist too.
	KeptHead = "head"
	// KeptFailure: not chosen, but it failed (error.type); its traceparent
	// said not sampled, so a server that follows its parent kept none.
	KeptFailure = "failure"
	// KeptStall: not chosen, did not fail, but stalled (the stall scan's
	// stall_threshold), with the same caveat.
	KeptStall = "stall"
	// KeptProbe: a /probe request: every one is sampled, a probe being
	// rare and asked for by name.
	KeptProbe = "probe"
)

var keptReasons = []string{KeptHead, KeptFailure, KeptStall, KeptProbe}

// Our span attributes beside the conventions'.
const (
	AttrRequestID   = attribute.Key("infer_probe.request_id")
	AttrScheduled   = attribute.Key("infer_probe.scheduled")
	AttrScheduleLag = attribute.Key("infer_probe.schedule_lag")
	AttrSampledBy   = attribute.Key("infer_probe.sampled_by")
	AttrStalled     = attribute.Key("infer_probe.stalled")
	AttrOutcome     = attribute.Key("infer_probe.outcome")
	AttrModule      = attribute.Key("infer_probe.module")
)

// The span events.
const (
	EventFirstToken  = "infer_probe.first_token"
	EventFirstAnswer = "infer_probe.first_answer_token"
)

func tracesEnabled(endpoint string, getenv func(string) string) bool {
	if sdkDisabled(getenv) || strings.EqualFold(strings.TrimSpace(getenv(envTracesExporter)), "none") {
		return false
	}
	return endpoint != "" || getenv(envTracesEndpoint) != "" || getenv(envEndpoint) != ""
}

// sampleRatio resolves the head sampler's ratio: the option, else the
// standard sampler variables (always_on 1, always_off 0, traceidratio and
// their parentbased_ forms, whose parent is never set here: a probe's
// request is a root), else DefaultSampleRatio.
func sampleRatio(opts *Options) (float64, error) {
	check := func(r float64, from string) (float64, error) {
		if r < 0 || r > 1 || r != r {
			return 0, fmt.Errorf("otlp trace sample ratio %v (%s): want 0 to 1", r, from)
		}
		return r, nil
	}
	if opts.SampleRatio != nil {
		return check(*opts.SampleRatio, "--otlp.traces.sample-ratio")
	}
	switch v := strings.ToLower(strings.TrimSpace(opts.getenv(envSampler))); v {
	case "":
		return DefaultSampleRatio, nil
	case "always_on", "parentbased_always_on":
		return 1, nil
	case "always_off", "parentbased_always_off":
		return 0, nil
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(opts.getenv(envSamplerArg))
		if arg == "" {
			return 1, nil // the specification's default for the ratio samplers
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: not a number", envSamplerArg, arg)
		}
		return check(r, envSamplerArg)
	default:
		return 0, fmt.Errorf("%s=%q: want always_on, always_off, traceidratio or their parentbased_ forms", envSampler, v)
	}
}

// traces is the spans' pipeline: the SDK's tracer provider, whose batch
// processor exports in its own goroutine and drops rather than blocks when
// its queue is full, and the head sampler.
type traces struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	head     headSampler
	kept     *prometheus.CounterVec
}

func newTraces(ctx context.Context, opts *Options, logger *slog.Logger) (*traces, error) {
	ratio, err := sampleRatio(opts)
	if err != nil {
		return nil, err
	}
	proto, err := protocol(opts, signalTraces)
	if err != nil {
		return nil, err
	}
	ep, err := resolveEndpoint(opts, signalTraces, proto)
	if err != nil {
		return nil, err
	}
	// OTEL_BSP_* set the batch processor's queue, batch size and delay,
	// read and bounded here (env.go), not by the SDK.
	batch, err := batchOptions(opts.getenv)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case GRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(ep.url))
	default:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(ep.url))
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	counted := newCountingSpanExporter(exp, opts.Registerer, logger, ep)
	tr, err := newTracesWith(ctx, opts, ratio, sdktrace.WithBatcher(counted, batch...))
	if err != nil {
		return nil, err
	}
	logger.Info("pushing OTLP spans", "endpoint", ep.url, "protocol", ep.protocol, "from", ep.from, "sample_ratio", ratio)
	return tr, nil
}

// newTracesWith builds the tracer provider around a span processor (the
// batcher of the OTLP exporter, or a test's recorder).
func newTracesWith(ctx context.Context, opts *Options, ratio float64, processor sdktrace.TracerProviderOption) (*traces, error) {
	res, err := newResource(ctx, opts)
	if err != nil {
		return nil, err
	}
	tr := &traces{
		head: newHeadSampler(ratio),
		kept: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "infer_exporter_otlp_spans_total",
			Help: "Request spans handed to the OTLP trace exporter, by why each was kept (sampled_by: head, failure, stall, probe)."}, []string{"sampled_by"}),
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(tr.kept)
	}
	for _, k := range keptReasons {
		tr.kept.WithLabelValues(k)
	}
	tr.provider = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		// The decision is ours, made before the span exists (the head
		// sampler, at admission) or at its end (failures, stalls): every
		// span started is one to export.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		// Its ids are those the request's traceparent carried.
		sdktrace.WithIDGenerator(presetIDs{}),
		processor,
	)
	tr.tracer = tr.provider.Tracer(scopeName, trace.WithInstrumentationVersion(opts.Version), trace.WithSchemaURL(semconv.SchemaURL))
	return tr, nil
}

// headSampler gives each request its trace context and decides, from its
// trace id alone, whether its span is recorded: the rule of the SDK's
// TraceIDRatioBased sampler (the trace id's last 8 bytes, shifted right
// once, below ratio·2^63), so that a collector's or server's ratio
// sampler of the same ratio agrees. It implements workload.Tracer; its
// cost is three random numbers per request (math/rand/v2's per-thread
// generator: no lock, no allocation).
type headSampler struct {
	bound uint64
	all   bool
}

func newHeadSampler(ratio float64) headSampler {
	if ratio >= 1 {
		return headSampler{all: true}
	}
	return headSampler{bound: uint64(ratio * (1 << 63))}
}

// Trace implements workload.Tracer.
func (h headSampler) Trace() observation.Trace {
	var t observation.Trace
	hi, lo := rand.Uint64(), rand.Uint64()
	if hi == 0 && lo == 0 {
		lo = 1 // W3C: an all-zero trace id is invalid
	}
	binary.BigEndian.PutUint64(t.TraceID[:8], hi)
	binary.BigEndian.PutUint64(t.TraceID[8:], lo)
	s := rand.Uint64()
	if s == 0 {
		s = 1
	}
	binary.BigEndian.PutUint64(t.SpanID[:], s)
	t.Sampled = h.all || lo>>1 < h.bound
	return t
}

// Tracer is the head sampler of the requests, for workload.Plan.Tracer;
// nil when no spans are pushed (then no traceparent is sent either).
func (p *Pusher) Tracer() workload.Tracer {
	if p.traces == nil {
		return nil
	}
	return p.traces.head
}

// idsKey carries a request's trace context to the id generator.
type idsKey struct{}

// presetIDs is the tracer provider's id generator: a request's span takes
// the ids its traceparent was sent with (so the server's spans are its
// children), put in the context by the span recorder.
type presetIDs struct{}

func (presetIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if t, ok := ctx.Value(idsKey{}).(observation.Trace); ok {
		return t.TraceID, t.SpanID
	}
	t := headSampler{}.Trace()
	return t.TraceID, t.SpanID
}

func (presetIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	return headSampler{}.Trace().SpanID
}

// spanRecorder builds one workload's request spans at their ends.
type spanRecorder struct {
	tr   *traces
	name string
	base []attribute.KeyValue
	kept map[string]prometheus.Counter
}

func (p *Pusher) spanRecorder(name string, base []attribute.KeyValue) *spanRecorder {
	if p.traces == nil {
		return nil
	}
	s := &spanRecorder{tr: p.traces, name: name, base: base, kept: map[string]prometheus.Counter{}}
	for _, k := range keptReasons {
		s.kept[k] = p.traces.kept.WithLabelValues(k)
	}
	return s
}

// keptBy says whether a request's span is exported, and why. The head
// decision was made before the request was sent, and only a span it chose
// had a sampled traceparent; a failure or a stall is known only at the
// end, so its span is built then, from the observation, which holds every
// instant: nothing is recorded per chunk for any request.
func keptBy(r *observation.Request) string {
	switch {
	case r.Trace.Sampled:
		return KeptHead
	case r.Outcome != observation.Success && r.Outcome != observation.Cancelled && r.Outcome != observation.Dropped:
		return KeptFailure
	case r.Stalled:
		return KeptStall
	}
	return ""
}

// done builds and ends r's span if it is kept.
func (s *spanRecorder) done(r *observation.Request) {
	if by := keptBy(r); by != "" {
		s.record(r, by)
	}
}

// record builds and ends r's span, kept for the reason by.
func (s *spanRecorder) record(r *observation.Request, by string) {
	if !r.Trace.Valid() || r.Sent.IsZero() {
		return // never sent, or sent without a trace context
	}
	end := r.End
	if end.IsZero() {
		end = r.Sent
	}
	attrs := make([]attribute.KeyValue, 0, len(s.base)+12)
	attrs = append(attrs, s.base...)
	attrs = append(attrs,
		AttrSampledBy.String(by),
		AttrOutcome.String(string(r.Outcome)),
		AttrScheduled.String(r.Scheduled.UTC().Format(time.RFC3339Nano)),
	)
	if r.RequestID != "" {
		attrs = append(attrs, AttrRequestID.String(r.RequestID))
	}
	if d, ok := r.ScheduleLag(); ok {
		attrs = append(attrs, AttrScheduleLag.Float64(d.Seconds()))
	}
	if d, ok := r.TTFT(); ok {
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk(d.Seconds()))
	}
	if r.HTTPStatus != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(r.HTTPStatus))
	}
	if r.PromptTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(r.PromptTokens))
	}
	if r.OutputTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens(r.OutputTokens))
	}
	if r.ReasoningTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokens(r.ReasoningTokens))
	}
	if r.Stalled {
		attrs = append(attrs, AttrStalled.Bool(true))
	}
	failed := r.Outcome != observation.Success && r.Outcome != observation.Cancelled
	if failed {
		attrs = append(attrs, semconv.ErrorTypeKey.String(string(r.Outcome)))
	}
	ctx := context.WithValue(context.Background(), idsKey{}, r.Trace)
	_, span := s.tr.tracer.Start(ctx, s.name,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(r.Sent),
		trace.WithAttributes(attrs...),
	)
	if !r.FirstToken.IsZero() {
		span.AddEvent(EventFirstToken, trace.WithTimestamp(r.FirstToken))
	}
	if !r.FirstAnswer.IsZero() && r.FirstAnswer.After(r.FirstToken) {
		// A reasoning model: it starts answering after it has reasoned.
		span.AddEvent(EventFirstAnswer, trace.WithTimestamp(r.FirstAnswer))
	}
	if failed {
		msg := string(r.Outcome)
		if r.Err != nil {
			msg = r.Err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(end))
	s.kept[by].Inc()
}

// countingSpanExporter is the span exporter with its exports counted, as
// the metrics' pushes are.
type countingSpanExporter struct {
	sdktrace.SpanExporter
	*exportCounts
}

func newCountingSpanExporter(e sdktrace.SpanExporter, reg prometheus.Registerer, logger *slog.Logger, ep endpoint) *countingSpanExporter {
	return &countingSpanExporter{SpanExporter: e, exportCounts: newExportCounts(reg, logger, ep, "OTLP span export",
		prometheus.CounterOpts{Name: "infer_exporter_otlp_span_exports_total",
			Help: "OTLP span exports attempted (batches of request spans)."},
		prometheus.CounterOpts{Name: "infer_exporter_otlp_span_export_failures_total",
			Help: "OTLP span exports that failed after the exporter's retries; their spans are lost, measurement goes on."})}
}

// ExportSpans implements sdktrace.SpanExporter.
func (c *countingSpanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.observe(c.SpanExporter.ExportSpans(ctx, spans))
	return nil
}

// ProbeSpans records the spans of one /probe run's requests: every one is
// sampled (its traceparent says 01) and kept, as sampled_by=probe. It
// implements prober.Spans.
type ProbeSpans struct {
	s *spanRecorder
}

// Probe is the span recorder of a probe of the module named module, whose
// requests are sent with sampling, against t; nil when no spans are
// pushed.
func (p *Pusher) Probe(t *config.Target, module string, sampling config.Sampling) *ProbeSpans {
	if p.traces == nil {
		return nil
	}
	facts, kvs := targetAttrs(t, AttrModule.String(module))
	return &ProbeSpans{s: p.spanRecorder(operationName(facts)+" "+t.Model, spanAttrs(kvs, sampling))}
}

// Trace gives a probe's request its trace context, always sampled.
func (ps *ProbeSpans) Trace() observation.Trace { return headSampler{all: true}.Trace() }

// Done records r's span.
func (ps *ProbeSpans) Done(r *observation.Request) { ps.s.record(r, KeptProbe) }

// TraceContexts gives each request a trace context without pushing any
// span: for when no spans are pushed but every request is still sent with a
// traceparent (the serve command's --probe.traceparent), so that a server
// that traces continues the trace and the latency histograms' exemplars
// name it. The sampled flag follows the head sampler's ratio, resolved as
// when spans are pushed (opts.SampleRatio, else OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, else DefaultSampleRatio): a server whose sampler
// follows its parent records that share of the requests.
func TraceContexts(opts Options) (workload.Tracer, error) {
	ratio, err := sampleRatio(&opts)
	if err != nil {
		return nil, err
	}
	return newHeadSampler(ratio), nil
}

// ProbeTraceContexts gives a /probe request its trace context, sampled as
// when spans are pushed (a probe is asked for, one at a time, so its
// requests are traced whole), and records no span: prober.Spans for when
// no spans are pushed.
type ProbeTraceContexts struct{}

// Trace implements prober.Spans.
func (ProbeTraceContexts) Trace() observation.Trace { return headSampler{all: true}.Trace() }

// Done implements prober.Spans: no span is recorded.
func (ProbeTraceContexts) Done(*observation.Request) {}
