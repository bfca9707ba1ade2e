// Package otlp pushes the continuous probe's observations as OpenTelemetry
// metrics and per-request spans over OTLP (gRPC or HTTP/protobuf), named as the GenAI semantic conventions name a
// client's metrics (gen_ai.client.operation.duration, time_to_first_chunk,
// time_per_output_chunk, gen_ai.client.token.usage), with infer_probe.* names
// for what the conventions lack (TPOT, schedule lag, goodput, stalls, drops).
//
// It is one more observer of the same requests that the infer_probe_*
// Prometheus metrics hear (workload.Observer), and applies the same rules
// (probe/observation's figures, probe/slo's goodput), so that the two agree
// count for count. Recording is the OpenTelemetry SDK's in-memory
// aggregation; the push runs in the SDK's own reader goroutine, so a slow or
// failing collector never delays a request's measurement: it is counted in
// infer_exporter_otlp_export_failures_total and logged.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// Histograms selects how the histograms are aggregated.
type Histograms string

const (
	// Exponential: base-2 exponential histograms (the default): fine
	// resolution over any range, no buckets to choose, the OTLP shape of
	// Prometheus native histograms.
	Exponential Histograms = "exponential"
	// Explicit: fixed buckets, the boundaries the conventions advise for the
	// gen_ai.* histograms and the exporter's Prometheus buckets for the
	// infer_probe.* ones, for backends without exponential histograms.
	Explicit Histograms = "explicit"
)

// The standard variables this package reads itself; the OTLP exporter reads
// the other OTEL_EXPORTER_OTLP_* ones (headers, TLS, compression, timeout,
// temporality) on its own, after env.go has checked them.
const (
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	envMetricsExporter = "OTEL_METRICS_EXPORTER"
	envSDKDisabled     = "OTEL_SDK_DISABLED"
	envInterval        = "OTEL_METRIC_EXPORT_INTERVAL"
	envTimeout         = "OTEL_METRIC_EXPORT_TIMEOUT"
	envHistograms      = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
)

// Bounds on the export interval and timeout, wherever they come from: below
// 100 ms the push would cost more than the measurement it reports; above an
// hour a collector would take the exporter for gone.
const (
	minPeriod = 100 * time.Millisecond
	maxPeriod = time.Hour
)

// The SDK's defaults, which apply when neither an option nor the
// environment sets them.
const (
	defaultInterval = time.Minute
	defaultTimeout  = 30 * time.Second
)

// Options configure the push.
type Options struct {
	// Endpoint is the collector's URL, a base as OTEL_EXPORTER_OTLP_ENDPOINT
	// is: over OTLP/HTTP /v1/metrics and /v1/traces are appended to its
	// path (a path that already ends in /v1/metrics is the metrics URL, and
	// the traces' sits beside it); over gRPC its path is not used. Empty:
	// the standard variables say where (OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT,
	// else OTEL_EXPORTER_OTLP_ENDPOINT).
	Endpoint string
	// Protocol: GRPC or HTTPProtobuf; empty follows
	// OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
	// else http/protobuf.
	Protocol Protocol
	// Histograms: Exponential or Explicit; empty follows
	// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, else
	// Exponential.
	Histograms Histograms
	// Interval between pushes; 0 follows OTEL_METRIC_EXPORT_INTERVAL
	// (milliseconds), else 60 s.
	Interval time.Duration
	// Timeout of one push, retries included; 0 follows
	// OTEL_METRIC_EXPORT_TIMEOUT (milliseconds), else 30 s.
	Timeout time.Duration
	// SampleRatio is the share of requests whose spans the head sampler
	// chooses (traces.go); nil follows OTEL_TRACES_SAMPLER and
	// OTEL_TRACES_SAMPLER_ARG, else DefaultSampleRatio.
	SampleRatio *float64
	// NoTraces pushes metrics only, whatever the variables say.
	NoTraces bool
	// Version is the exporter's, for the resource's service.version.
	Version string
	// Registerer receives the push's own counters (exports, failures).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Getenv reads the environment; nil is os.Getenv (tests pass their own).
	Getenv func(string) string
}

func (o *Options) getenv(key string) string {
	if o.Getenv != nil {
		return o.Getenv(key)
	}
	return os.Getenv(key)
}

// Enabled reports whether the exporter should push anything: an endpoint
// was given, or the standard variables name one, and OTEL_SDK_DISABLED=true
// does not turn the SDK off, nor OTEL_METRICS_EXPORTER=none and
// OTEL_TRACES_EXPORTER=none both signals. Without it only the Prometheus
// endpoint serves the observations, as before.
func Enabled(endpoint string, getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	return metricsEnabled(endpoint, getenv) || tracesEnabled(endpoint, getenv)
}

func sdkDisabled(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true")
}

func metricsEnabled(endpoint string, getenv func(string) string) bool {
	if sdkDisabled(getenv) || strings.EqualFold(strings.TrimSpace(getenv(envMetricsExporter)), "none") {
		return false
	}
	return endpoint != "" || getenv(envMetricsEndpoint) != "" || getenv(envEndpoint) != ""
}

// Pusher holds the SDK's meter provider, its periodic OTLP reader and the
// instruments that every workload's Observer records into, and, when spans
// are pushed, their tracer (traces.go).
type Pusher struct {
	provider *sdkmetric.MeterProvider
	inst     instruments
	chunks   *chunkProducer
	// metrics: the metrics are pushed (else the provider has no reader,
	// and the per-chunk histogram records nothing).
	metrics bool
	traces  *traces // nil: no spans
}

// New starts pushing. The first push happens one interval after it returns;
// Shutdown pushes a last time.
func New(ctx context.Context, opts Options) (*Pusher, error) {
	getenv := opts.getenv
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Every variable is checked before anything is built, so that a
	// refused one stops the start before a first push is attempted.
	if err := checkEnv(&opts); err != nil {
		return nil, err
	}
	var p *Pusher
	if metricsEnabled(opts.Endpoint, getenv) {
		var err error
		if p, err = newMetrics(ctx, &opts, logger); err != nil {
			return nil, err
		}
	} else {
		// No reader: the instruments record into nothing.
		var err error
		noReader := func(sdkmetric.ReaderOption) sdkmetric.Reader { return nil }
		if p, err = newPusher(ctx, noReader, metricdata.CumulativeTemporality, Exponential, &opts); err != nil {
			return nil, err
		}
	}
	if !opts.NoTraces && tracesEnabled(opts.Endpoint, getenv) {
		tr, err := newTraces(ctx, &opts, logger)
		if err != nil {
			_ = p.provider.Shutdown(ctx)
			return nil, err
		}
		p.traces = tr
	}
	return p, nil
}

// newMetrics builds the metrics pipeline: the exporter of the resolved
// protocol and endpoint, counted, behind a periodic reader.
func newMetrics(ctx context.Context, opts *Options, logger *slog.Logger) (*Pusher, error) {
	hist, err := histograms(opts)
	if err != nil {
		return nil, err
	}
	interval, err := period(opts, opts.Interval, envInterval, defaultInterval)
	if err != nil {
		return nil, err
	}
	timeout, err := period(opts, opts.Timeout, envTimeout, defaultTimeout)
	if err != nil {
		return nil, err
	}
	proto, err := protocol(opts, signalMetrics)
	if err != nil {
		return nil, err
	}
	ep, err := resolveEndpoint(opts, signalMetrics, proto)
	if err != nil {
		return nil, err
	}
	// The resolved URL is handed over explicitly, so that what the log
	// says is where the push goes; the exporter reads the other variables
	// (headers, TLS, compression, temporality) itself.
	var exp sdkmetric.Exporter
	switch proto {
	case GRPC:
		exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(ep.url))
	default:
		exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(ep.url))
	}
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	counted := newCountingExporter(exp, opts.Registerer, logger, ep)
	newReader := func(producer sdkmetric.ReaderOption) sdkmetric.Reader {
		return sdkmetric.NewPeriodicReader(counted, sdkmetric.WithInterval(interval), sdkmetric.WithTimeout(timeout), producer)
	}
	p, err := newPusher(ctx, newReader, exp.Temporality(sdkmetric.InstrumentKindHistogram), hist, opts)
	if err != nil {
		return nil, err
	}
	logger.Info("pushing OTLP metrics", "endpoint", ep.url, "protocol", ep.protocol, "from", ep.from, "interval", interval, "histograms", hist)
	return p, nil
}

// newPusher builds the provider around the reader that newReader makes
// (the periodic OTLP reader, or a manual reader in tests; nil: none),
// handing it the producer of the per-chunk histogram (chunks.go), whose
// temporality is the exporter's.
func newPusher(ctx context.Context, newReader func(sdkmetric.ReaderOption) sdkmetric.Reader, temporality metricdata.Temporality, hist Histograms, opts *Options) (*Pusher, error) {
	res, err := newResource(ctx, opts)
	if err != nil {
		return nil, err
	}
	scope := instrumentation.Scope{Name: scopeName, Version: opts.Version, SchemaURL: semconv.SchemaURL}
	chunks := newChunkProducer(scope, hist, temporality)
	reader := newReader(sdkmetric.WithProducer(chunks))
	popts := []sdkmetric.Option{
		sdkmetric.WithResource(res),
		sdkmetric.WithView(views(hist)...),
		// Offering every measurement to an exemplar reservoir would cost
		// CPU per request; the spans are joined by their own ids.
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter),
	}
	if reader != nil {
		popts = append(popts, sdkmetric.WithReader(reader))
	}
	provider := sdkmetric.NewMeterProvider(popts...)
	meter := provider.Meter(scope.Name, metric.WithInstrumentationVersion(scope.Version), metric.WithSchemaURL(scope.SchemaURL))
	inst, err := newInstruments(meter)
	if err != nil {
		_ = provider.Shutdown(ctx)
		return nil, err
	}
	return &Pusher{provider: provider, inst: inst, chunks: chunks, metrics: reader != nil}, nil
}

// newResource is the resource of both signals.
func newResource(ctx context.Context, opts *Options) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("infer_exporter"), semconv.ServiceVersion(opts.Version)),
		// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES come last, so they
		// override the defaults above.
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("otlp resource: %w", err)
	}
	if err := checkResource(res); err != nil {
		return nil, err
	}
	return res, nil
}

// scopeName is the instrumentation scope of every metric pushed.
const scopeName = "github.com/infer-exporter/infer_exporter/probe/otlp"

// ForceFlush pushes now what was recorded so far (the load harness, tests);
// ctx bounds the push.
func (p *Pusher) ForceFlush(ctx context.Context) error {
	err := p.provider.ForceFlush(ctx)
	if p.traces != nil {
		err = errors.Join(err, p.traces.provider.ForceFlush(ctx))
	}
	return err
}

// Shutdown pushes what was recorded since the last push and stops. ctx
// bounds the last push.
func (p *Pusher) Shutdown(ctx context.Context) error {
	err := p.provider.Shutdown(ctx)
	if p.traces != nil {
		err = errors.Join(err, p.traces.provider.Shutdown(ctx))
	}
	return err
}

// histograms resolves the aggregation from the option or the variable.
func histograms(opts *Options) (Histograms, error) {
	switch opts.Histograms {
	case Exponential, Explicit:
		return opts.Histograms, nil
	case "":
	default:
		return "", fmt.Errorf("otlp histograms %q: want %q or %q", opts.Histograms, Exponential, Explicit)
	}
	switch v := strings.ToLower(strings.TrimSpace(opts.getenv(envHistograms))); v {
	case "", "base2_exponential_bucket_histogram":
		return Exponential, nil
	case "explicit_bucket_histogram":
		return Explicit, nil
	default:
		return "", fmt.Errorf("%s=%q: want explicit_bucket_histogram or base2_exponential_bucket_histogram", envHistograms, v)
	}
}

// period resolves an interval or timeout: the option, else the variable (in
// milliseconds, as the specification has it), else def; bounded either way.
func period(opts *Options, d time.Duration, env string, def time.Duration) (time.Duration, error) {
	what := "option"
	if d == 0 {
		if v := strings.TrimSpace(opts.getenv(env)); v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s=%q: not a number of milliseconds", env, v)
			}
			if ms < 0 || ms > int64(maxPeriod/time.Millisecond) {
				return 0, fmt.Errorf("%s=%q: outside %d..%d ms", env, v, minPeriod.Milliseconds(), maxPeriod.Milliseconds())
			}
			d, what = time.Duration(ms)*time.Millisecond, env
		} else {
			d = def
		}
	}
	if d < minPeriod || d > maxPeriod {
		return 0, fmt.Errorf("otlp %s %s: outside %s..%s", what, d, minPeriod, maxPeriod)
	}
	return d, nil
}

// exportCounts counts every push of one signal and its failures. A
// failure is logged when the pushes start failing and when they recover,
// not at every interval, and is not handed on to the SDK, whose global
// error handler would print it again in its own format.
type exportCounts struct {
	exports, failures prometheus.Counter
	logger            *slog.Logger
	endpoint          endpoint
	// what the log lines name: "OTLP push", "OTLP span export".
	what, failuresName string

	mu      sync.Mutex
	failing bool
}

func newExportCounts(reg prometheus.Registerer, logger *slog.Logger, ep endpoint, what string, exports, failures prometheus.CounterOpts) *exportCounts {
	c := &exportCounts{
		exports:  prometheus.NewCounter(exports),
		failures: prometheus.NewCounter(failures),
		logger:   logger, endpoint: ep, what: what, failuresName: failures.Name,
	}
	if reg != nil {
		reg.MustRegister(c.exports, c.failures)
	}
	return c
}

// observe counts one push that ended with err.
func (c *exportCounts) observe(err error) {
	c.exports.Inc()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.failures.Inc()
		if !c.failing {
			// The URL and protocol, resolved: a collector that speaks
			// only the other transport shows here, not only as a
			// rising counter.
			c.logger.Warn(c.what+" failed; measurement goes on, failures are counted in "+c.failuresName,
				"endpoint", c.endpoint.url, "protocol", c.endpoint.protocol, "err", err)
		}
		c.failing = true
	case c.failing:
		c.logger.Info(c.what + " recovered")
		c.failing = false
	}
}

// countingExporter is the metrics exporter with its pushes counted.
type countingExporter struct {
	sdkmetric.Exporter
	*exportCounts
}

func newCountingExporter(e sdkmetric.Exporter, reg prometheus.Registerer, logger *slog.Logger, ep endpoint) *countingExporter {
	return &countingExporter{Exporter: e, exportCounts: newExportCounts(reg, logger, ep, "OTLP push",
		prometheus.CounterOpts{Name: "infer_exporter_otlp_exports_total",
			Help: "OTLP metric pushes attempted (--otlp.endpoint)."},
		prometheus.CounterOpts{Name: "infer_exporter_otlp_export_failures_total",
			Help: "OTLP metric pushes that failed after the exporter's retries; measurement goes on, the next push carries the totals."})}
}

// Export implements sdkmetric.Exporter.
func (c *countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	c.observe(c.Exporter.Export(ctx, rm))
	return nil
}
