package otlp

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/slo"
	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// Our attributes beside the conventions': the configuration's target and
// workload names, which together with gen_ai.request.model are the
// Prometheus side's target, model and workload labels, and a drop's reason.
const (
	AttrTarget     = attribute.Key("infer_probe.target")
	AttrWorkload   = attribute.Key("infer_probe.workload")
	AttrDropReason = attribute.Key("infer_probe.drop_reason")
	// The bench's cell and repeat (bench --otlp.endpoint).
	AttrBenchCell   = attribute.Key("infer_bench.cell")
	AttrBenchRepeat = attribute.Key("infer_bench.repeat")
)

// operationName is the conventions' gen_ai.operation.name of a flavor's
// requests: "chat" for the chat APIs, "text_completion" for every other
// generation API. The provider name is a fact of the flavor
// (config.FlavorFacts.Provider).
func operationName(f config.FlavorFacts) string {
	if f.Chat() {
		return "chat"
	}
	return "text_completion"
}

// Observer records one workload's requests. It implements workload.Observer
// and hears the workload's stall scans (Stalls). Its methods run on the
// request goroutines; each records into an in-memory aggregation, the
// SDK's with an attribute set built once, here, or for each chunk the
// workload's own histogram (chunks.go): a lock held for nanoseconds, no
// allocation.
type Observer struct {
	in   *instruments
	gaps *chunkGaps // the time per output chunk (chunks.go); nil: metrics are not pushed
	slo  config.SLO
	// spans builds the request spans (traces.go); nil: none are pushed.
	spans *spanRecorder

	// The workload's attribute set, and with gen_ai.token.type per token
	// kind. ended is a request's duration's by outcome: with error.type
	// for a failed one, the workload's own for a success (and a drop,
	// which has no duration).
	base, input, output attrs
	ended               observation.ByOutcome[attrs]
	dropped             map[string]attrs
}

// attrs is an attribute set as the options of a recording, built once: an
// option slice passed on as it is costs no allocation per call, where a
// new variadic argument to an interface method would.
type attrs struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

func newAttrs(kvs ...attribute.KeyValue) attrs {
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return attrs{rec: []metric.RecordOption{opt}, add: []metric.AddOption{opt}}
}

var (
	_ workload.Observer = (*Observer)(nil)
	_ interface {
		Stalls(workload.StallScan)
	} = (*Observer)(nil)
)

// Workload returns the observer of workload w, which sends to target t.
// The attribute values come from the configuration, so the number of series
// is bounded by what the operator wrote. t's flavor must be one the
// configuration accepts (a loaded configuration's are), or empty for the
// default; another is a programming error, and panics rather than push
// made-up names.
func (p *Pusher) Workload(t *config.Target, w *config.Workload) *Observer {
	return p.WorkloadWith(t, w)
}

// WorkloadWith is Workload with attributes of the caller's beside ours on
// every metric point and span (the bench's cell and repeat), which must
// come from a bounded set as ours do.
func (p *Pusher) WorkloadWith(t *config.Target, w *config.Workload, extra ...attribute.KeyValue) *Observer {
	facts, kvs := targetAttrs(t, AttrWorkload.String(w.Name), extra...)
	with := func(extra ...attribute.KeyValue) attrs {
		return newAttrs(append(append([]attribute.KeyValue{}, kvs...), extra...)...)
	}
	o := &Observer{
		in: &p.inst, slo: w.SLO,
		spans:   p.spanRecorder(operationName(facts)+" "+t.Model, spanAttrs(kvs, w.Sampling)),
		base:    with(),
		input:   with(semconv.GenAITokenTypeInput),
		output:  with(semconv.GenAITokenTypeOutput),
		dropped: map[string]attrs{},
	}
	if p.metrics {
		o.gaps = p.chunks.forAttrs(attribute.NewSet(kvs...))
	}
	o.ended = observation.NewByOutcome(func(out observation.Outcome) attrs {
		if out == observation.Success || out == observation.Dropped {
			return o.base
		}
		// error.type is our outcome: a closed, documented set.
		return with(semconv.ErrorTypeKey.String(string(out)))
	})
	for _, r := range append(append([]string{}, workload.DropReasons...), dropBadRequest) {
		o.dropped[r] = with(AttrDropReason.String(r))
	}
	return o
}

// targetAttrs are the attributes of every point and span of requests to t:
// the conventions' (operation, provider, model, server) and ours (the
// target's name, who sent them: the workload, a probe's module), then
// extra.
func targetAttrs(t *config.Target, who attribute.KeyValue, extra ...attribute.KeyValue) (config.FlavorFacts, []attribute.KeyValue) {
	flavor := t.Flavor
	if flavor == "" {
		flavor = config.FlavorOpenAIChat
	}
	facts, ok := flavor.Facts()
	if !ok {
		panic(fmt.Sprintf("otlp: target %q has flavor %q, which is not one of %v", t.Name, flavor, config.Flavors))
	}
	kvs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(operationName(facts)),
		semconv.GenAIProviderNameKey.String(facts.Provider),
		semconv.GenAIRequestModel(t.Model),
		AttrTarget.String(t.Name),
		who,
	}
	if host, port, ok := serverAddress(t.URL); ok {
		kvs = append(kvs, semconv.ServerAddress(host), semconv.ServerPort(port))
	}
	return facts, append(kvs, extra...)
}

// spanAttrs are a span's attributes that every request of a workload or
// probe shares: the points' and the sampling parameters it is sent with.
func spanAttrs(kvs []attribute.KeyValue, sm config.Sampling) []attribute.KeyValue {
	out := append(append([]attribute.KeyValue{}, kvs...), semconv.GenAIRequestStream(true))
	if v := sm.Temperature; v != nil {
		out = append(out, semconv.GenAIRequestTemperature(*v))
	}
	if v := sm.TopP; v != nil {
		out = append(out, semconv.GenAIRequestTopP(*v))
	}
	if v := sm.Seed; v != nil {
		out = append(out, semconv.GenAIRequestSeed(int(*v)))
	}
	return out
}

// dropBadRequest is the reason the client gives a request it could not
// build (probe/client): it was never sent either.
const dropBadRequest = "bad_request"

// serverAddress is the target URL's host and port, the port defaulted from
// the scheme as the conventions ask.
func serverAddress(raw string) (string, int, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", 0, false
	}
	port := 0
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return "", 0, false
		}
		port = n
	} else if u.Scheme == "https" {
		port = 443
	} else {
		port = 80
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return host, port, true
}

// The Observer methods have no context to pass: the Observer seam carries
// none (its calls must not block, and a recording never does). The SDK
// reads a context only for exemplars, which are off.

// Sent implements workload.Observer.
func (o *Observer) Sent(*observation.Request) {}

// FirstToken implements workload.Observer: the time to the first chunk,
// when it arrives, for every request that gets one, whatever its outcome
// then (infer_probe_time_to_first_token_seconds's rule).
func (o *Observer) FirstToken(r *observation.Request) {
	if d, ok := r.TTFT(); ok {
		o.in.ttfc.Record(context.Background(), d.Seconds(), o.base.rec...)
	}
}

// Token implements workload.Observer: each gap between two content events,
// when it closes (infer_probe_inter_token_latency_seconds's rule).
func (o *Observer) Token(r *observation.Request) {
	if n := len(r.TokenTimes); n >= 2 && o.gaps != nil {
		o.gaps.record(r.TokenTimes[n-1].Sub(r.TokenTimes[n-2]).Seconds())
	}
}

// Done implements workload.Observer: what is known at the end, with the
// Prometheus side's rules (live.Series.Observe): the duration of every
// request that was sent (error.type set when it failed, where the
// Prometheus side keeps successes only and counts the rest by outcome),
// the schedule lag of every one, and for a success its TPOT, tokens and
// goodput.
func (o *Observer) Done(r *observation.Request) {
	ctx := context.Background()
	if r.Outcome == observation.Dropped {
		o.Dropped(r)
		return
	}
	if o.spans != nil {
		o.spans.done(r)
	}
	if d, ok := r.ScheduleLag(); ok {
		o.in.lag.Record(ctx, d.Seconds(), o.base.rec...)
	}
	a, ok := o.ended.Of(r.Outcome)
	if !ok {
		a = o.base
	}
	if d, ok := r.E2E(); ok {
		o.in.duration.Record(ctx, d.Seconds(), a.rec...)
	}
	if r.Outcome != observation.Success {
		return
	}
	if d, ok := r.TPOT(); ok {
		o.in.tpot.Record(ctx, d.Seconds(), o.base.rec...)
	}
	// The conventions: usage is reported when it is known, never as a
	// made-up zero; the Prometheus counters add the same numbers.
	if r.PromptTokens > 0 {
		o.in.tokens.Record(ctx, int64(r.PromptTokens), o.input.rec...)
	}
	if r.OutputTokens > 0 {
		o.in.tokens.Record(ctx, int64(r.OutputTokens), o.output.rec...)
	}
	if slo.Met(r, o.slo) {
		o.in.goodput.Add(ctx, 1, o.base.add...)
	}
}

// Dropped implements workload.Observer.
func (o *Observer) Dropped(r *observation.Request) {
	a, ok := o.dropped[r.DropReason]
	if !ok {
		a = o.base
	}
	o.in.dropped.Add(context.Background(), 1, a.add...)
}

// Stalls hears the workload's stall scans (workload.Monitor's Stalls): each
// new stall is counted once, as infer_probe_stalls_total counts it.
func (o *Observer) Stalls(s workload.StallScan) {
	if s.New > 0 {
		o.in.stalls.Add(context.Background(), int64(s.New), o.base.add...)
	}
}
