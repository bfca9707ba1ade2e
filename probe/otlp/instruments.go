package otlp

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Metric names: the GenAI semantic conventions' client metrics, and ours
// for what they have no name for.
const (
	NameOperationDuration  = "gen_ai.client.operation.duration"
	NameTimeToFirstChunk   = "gen_ai.client.operation.time_to_first_chunk"
	NameTimePerOutputChunk = "gen_ai.client.operation.time_per_output_chunk"
	NameTokenUsage         = "gen_ai.client.token.usage"
	NameTimePerOutputToken = "infer_probe.time_per_output_token"
	NameScheduleLag        = "infer_probe.schedule_lag"
	NameGoodput            = "infer_probe.goodput"
	NameStalls             = "infer_probe.stalls"
	NameDropped            = "infer_probe.dropped"
)

// Explicit bucket boundaries, for Explicit. The conventions advise the
// first two lists (gen-ai-metrics.md); TPOT and schedule lag take the
// exporter's Prometheus buckets (probe/live/metrics.go), whose range
// fits them: milliseconds per token, microseconds of lag.
var (
	conventionSeconds = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	conventionTokens  = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	tokenGapSeconds   = []float64{.001, .002, .003, .005, .0075, .01, .0125, .015, .02, .025, .03, .04, .05, .075, .1, .15, .2, .3, .5, 1, 2.5, 5, 10, 30, 120}
	lagSeconds        = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// histogramDef is one histogram: its name, unit, description and explicit
// boundaries.
type histogramDef struct {
	name, unit, desc string
	bounds           []float64
}

// The descriptions of the gen_ai.* instruments are the conventions', with
// what ours measure where it differs (docs/otlp.md has the whole table).
var (
	defDuration = histogramDef{NameOperationDuration, "s", "GenAI operation duration: from the request's scheduled send instant to its last byte or failure (error.type set on failure).", conventionSeconds}
	defTTFC     = histogramDef{NameTimeToFirstChunk, "s", "Time to receive the first chunk, measured from the request's scheduled send instant (not when it was sent).", conventionSeconds}
	defTPOC     = histogramDef{NameTimePerOutputChunk, "s", "Time per output chunk, recorded for each chunk received after the first one: the gap from the previous content event.", conventionSeconds}
	defTokens   = histogramDef{NameTokenUsage, "{token}", "Number of input and output tokens used, by successful requests, as the server's usage reports them.", conventionTokens}
	defTPOT     = histogramDef{NameTimePerOutputToken, "s", "Per successful request, (last byte - first token) / (output tokens - 1); none with fewer than 2 output tokens or one event.", tokenGapSeconds}
	defLag      = histogramDef{NameScheduleLag, "s", "Time from a request's scheduled send instant to the moment the client began sending it.", lagSeconds}

	histogramDefs = []histogramDef{defDuration, defTTFC, defTPOC, defTokens, defTPOT, defLag}
)

func (d histogramDef) options() []metric.HistogramOption {
	return []metric.HistogramOption{metric.WithUnit(d.unit), metric.WithDescription(d.desc), metric.WithExplicitBucketBoundaries(d.bounds...)}
}

// instruments are the instruments every workload records into.
type instruments struct {
	duration, ttfc, tpot, lag metric.Float64Histogram
	tokens                    metric.Int64Histogram
	goodput, stalls, dropped  metric.Int64Counter
}

func newInstruments(m metric.Meter) (instruments, error) {
	var in instruments
	errs := make([]error, 0, 8)
	f64 := func(d histogramDef) metric.Float64Histogram {
		h, err := m.Float64Histogram(d.name, float64Options(d.options())...)
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	// The time per output chunk is not an SDK instrument (chunks.go).
	in.duration, in.ttfc = f64(defDuration), f64(defTTFC)
	in.tpot, in.lag = f64(defTPOT), f64(defLag)
	tokens, err := m.Int64Histogram(defTokens.name, int64Options(defTokens.options())...)
	in.tokens, errs = tokens, append(errs, err)
	in.goodput = counter(NameGoodput, "{request}", "Successful requests that met every SLO threshold configured for the workload.")
	in.stalls = counter(NameStalls, "{stall}", "Requests in flight that received nothing for longer than the workload's stall_threshold (each stall counted once).")
	in.dropped = counter(NameDropped, "{request}", "Arrivals never sent, by infer_probe.drop_reason: in_flight_cap, rate_ceiling, bad_request.")
	if err := errors.Join(errs...); err != nil {
		return in, fmt.Errorf("otlp instruments: %w", err)
	}
	return in, nil
}

func float64Options(hs []metric.HistogramOption) []metric.Float64HistogramOption {
	out := make([]metric.Float64HistogramOption, len(hs))
	for i, h := range hs {
		out[i] = h
	}
	return out
}

func int64Options(hs []metric.HistogramOption) []metric.Int64HistogramOption {
	out := make([]metric.Int64HistogramOption, len(hs))
	for i, h := range hs {
		out[i] = h
	}
	return out
}

// views set every histogram's aggregation, so that the choice is the
// option's whatever the exporter's default would be.
func views(h Histograms) []sdkmetric.View {
	var out []sdkmetric.View
	for _, d := range histogramDefs {
		if d.name == NameTimePerOutputChunk {
			continue // not an SDK instrument (chunks.go)
		}
		// At most the per-chunk histogram's scale (chunks.go), so that
		// every histogram has the resolution of the Prometheus side's
		// native ones; the SDK lowers it to fit 160 buckets.
		var agg sdkmetric.Aggregation = sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: chunkScale}
		if h == Explicit {
			agg = sdkmetric.AggregationExplicitBucketHistogram{Boundaries: d.bounds}
		}
		out = append(out, sdkmetric.NewView(sdkmetric.Instrument{Name: d.name}, sdkmetric.Stream{Aggregation: agg}))
	}
	return out
}
