// Package otlp pushes the continuous probe's observations as OpenTelemetry
// metrics over OTLP/HTTP, named as the GenAI semantic conventions name a
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
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// temporality) on its own.
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
	// Endpoint is the collector's OTLP/HTTP URL. A URL without a path (or
	// with "/") is a base, as OTEL_EXPORTER_OTLP_ENDPOINT is: /v1/metrics is
	// appended; a URL with a path is used as it is. Empty: the standard
	// variables say where (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT).
	Endpoint string
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

// Enabled reports whether the exporter should push: an endpoint was given,
// or the standard variables name one, and neither OTEL_SDK_DISABLED=true
// nor OTEL_METRICS_EXPORTER=none turns metrics off. Without it only the
// Prometheus endpoint serves the observations, as before.
func Enabled(endpoint string, getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv(envMetricsExporter)), "none") {
		return false
	}
	return endpoint != "" || getenv(envMetricsEndpoint) != "" || getenv(envEndpoint) != ""
}

// Pusher holds the SDK's meter provider, its periodic OTLP reader and the
// instruments that every workload's Observer records into.
type Pusher struct {
	provider *sdkmetric.MeterProvider
	inst     instruments
	chunks   *chunkProducer
}

// New starts pushing. The first push happens one interval after it returns;
// Shutdown pushes a last time.
func New(ctx context.Context, opts Options) (*Pusher, error) {
	hist, err := histograms(&opts)
	if err != nil {
		return nil, err
	}
	interval, err := period(&opts, opts.Interval, envInterval, defaultInterval)
	if err != nil {
		return nil, err
	}
	timeout, err := period(&opts, opts.Timeout, envTimeout, defaultTimeout)
	if err != nil {
		return nil, err
	}
	var httpOpts []otlpmetrichttp.Option
	if opts.Endpoint != "" {
		u, err := endpointURL(opts.Endpoint)
		if err != nil {
			return nil, err
		}
		// Given explicitly, it overrides the variables.
		httpOpts = append(httpOpts, otlpmetrichttp.WithEndpointURL(u))
	}
	exp, err := otlpmetrichttp.New(ctx, httpOpts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	counted := newCountingExporter(exp, opts.Registerer, logger)
	newReader := func(producer sdkmetric.ReaderOption) sdkmetric.Reader {
		return sdkmetric.NewPeriodicReader(counted, sdkmetric.WithInterval(interval), sdkmetric.WithTimeout(timeout), producer)
	}
	p, err := newPusher(ctx, newReader, exp.Temporality(sdkmetric.InstrumentKindHistogram), hist, &opts)
	if err != nil {
		return nil, err
	}
	logger.Info("pushing OTLP metrics", "endpoint", describeEndpoint(&opts), "interval", interval, "histograms", hist)
	return p, nil
}

// newPusher builds the provider around the reader that newReader makes
// (the periodic OTLP reader, or a manual reader in tests), handing it the
// producer of the per-chunk histogram (chunks.go), whose temporality is the
// exporter's.
func newPusher(ctx context.Context, newReader func(sdkmetric.ReaderOption) sdkmetric.Reader, temporality metricdata.Temporality, hist Histograms, opts *Options) (*Pusher, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("infer_exporter"), semconv.ServiceVersion(opts.Version)),
		// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES come last, so they
		// override the defaults above.
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("otlp resource: %w", err)
	}
	scope := instrumentation.Scope{Name: scopeName, Version: opts.Version, SchemaURL: semconv.SchemaURL}
	chunks := newChunkProducer(scope, hist, temporality)
	reader := newReader(sdkmetric.WithProducer(chunks))
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(reader),
		sdkmetric.WithView(views(hist)...),
		// There are no traces here to tie an exemplar to, and offering
		// every measurement to a reservoir would cost CPU per request.
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter),
	)
	meter := provider.Meter(scope.Name, metric.WithInstrumentationVersion(scope.Version), metric.WithSchemaURL(scope.SchemaURL))
	inst, err := newInstruments(meter)
	if err != nil {
		_ = provider.Shutdown(ctx)
		return nil, err
	}
	return &Pusher{provider: provider, inst: inst, chunks: chunks}, nil
}

// scopeName is the instrumentation scope of every metric pushed.
const scopeName = "github.com/infer-exporter/infer_exporter/probe/otlp"

// ForceFlush pushes now what was recorded so far (the load harness, tests);
// ctx bounds the push.
func (p *Pusher) ForceFlush(ctx context.Context) error {
	return p.provider.ForceFlush(ctx)
}

// Shutdown pushes what was recorded since the last push and stops. ctx
// bounds the last push.
func (p *Pusher) Shutdown(ctx context.Context) error {
	return p.provider.Shutdown(ctx)
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

// endpointURL checks a configured endpoint and completes a base URL with
// the metrics path.
func endpointURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("otlp endpoint: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("otlp endpoint %q: want http:// or https:// and a host", s)
	}
	if u.User != nil {
		// Credentials belong in OTEL_EXPORTER_OTLP_HEADERS, which the log
		// never prints.
		return "", fmt.Errorf("otlp endpoint %q: credentials in the URL are not sent; use OTEL_EXPORTER_OTLP_HEADERS", u.Redacted())
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/metrics"
	}
	return u.String(), nil
}

// describeEndpoint is where the log says the push goes.
func describeEndpoint(opts *Options) string {
	if opts.Endpoint != "" {
		if u, err := endpointURL(opts.Endpoint); err == nil {
			return u
		}
	}
	if v := opts.getenv(envMetricsEndpoint); v != "" {
		return envMetricsEndpoint
	}
	return envEndpoint
}

// countingExporter counts every push and its failures. A failure is logged
// when the push starts failing and when it recovers, not at every
// interval, and is not handed on to the SDK, whose global error handler
// would print it again in its own format.
type countingExporter struct {
	sdkmetric.Exporter
	exports, failures prometheus.Counter
	logger            *slog.Logger

	mu      sync.Mutex
	failing bool
}

func newCountingExporter(e sdkmetric.Exporter, reg prometheus.Registerer, logger *slog.Logger) *countingExporter {
	c := &countingExporter{
		Exporter: e,
		exports: prometheus.NewCounter(prometheus.CounterOpts{Name: "infer_exporter_otlp_exports_total",
			Help: "OTLP metric pushes attempted (--otlp.endpoint)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "infer_exporter_otlp_export_failures_total",
			Help: "OTLP metric pushes that failed after the exporter's retries; measurement goes on, the next push carries the totals."}),
		logger: logger,
	}
	if reg != nil {
		reg.MustRegister(c.exports, c.failures)
	}
	return c
}

// Export implements sdkmetric.Exporter.
func (c *countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	c.exports.Inc()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.failures.Inc()
		if !c.failing {
			c.logger.Warn("OTLP push failed; measurement goes on, failures are counted in infer_exporter_otlp_export_failures_total", "err", err)
		}
		c.failing = true
	case c.failing:
		c.logger.Info("OTLP push recovered")
		c.failing = false
	}
	return nil
}
