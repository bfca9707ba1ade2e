package otlp

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestChunkIndex(t *testing.T) {
	// The base is 2^(1/8): bucket i holds (2^(i/8), 2^((i+1)/8)].
	base := math.Exp2(1.0 / (1 << chunkScale))
	for _, tc := range []struct {
		v    float64
		want int
	}{
		{1, -1},                    // 2^0 is the upper bound of bucket -1
		{math.Nextafter(1, 2), 0},  // just above it: bucket 0
		{2, 7},                     // 2^1 = base^8: the upper bound of bucket 7
		{0.5, -9},                  // 2^-1 = base^-8: the upper bound of bucket -9
		{base * base * 1.0001, 2},  // inside (base^2, base^3]
		{0.001, -80},               // log2(0.001)·8 = -79.7
		{math.Exp2(-40), chunkLow}, // bucket -321, clamped (record counts it as zero first)
		{1e30, chunkHigh},          // clamped above
	} {
		if got := chunkIndex(tc.v); got != tc.want {
			t.Errorf("chunkIndex(%v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// sdkHistogram records values through the SDK's own aggregation with the
// view agg, for comparison.
func sdkHistogram(t *testing.T, agg sdkmetric.Aggregation, values []float64) metricdata.Aggregation {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader),
		sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "h"}, sdkmetric.Stream{Aggregation: agg})))
	defer mp.Shutdown(context.Background())
	h, err := mp.Meter("t").Float64Histogram("h")
	if err != nil {
		t.Fatal(err)
	}
	set := metric.WithAttributeSet(attribute.NewSet(attribute.String("k", "v")))
	for _, v := range values {
		h.Record(context.Background(), v, set)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm.ScopeMetrics[0].Metrics[0].Data
}

// gapValues are gaps as streams have them (log-uniform from 100 µs to
// 10 s), boundary values, and zeros.
func gapValues() []float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	var vs []float64
	for range 5000 {
		vs = append(vs, math.Pow(10, -4+5*rng.Float64()))
	}
	return append(vs, 0, 0, 1, 2, 0.5, 0.25, 0.01, 0.02, 81.92, 100)
}

// TestChunksMatchSDK: the per-chunk histogram holds exactly what the SDK's
// aggregation holds for the same values, exponential and explicit.
func TestChunksMatchSDK(t *testing.T) {
	values := gapValues()
	attrs := attribute.NewSet(attribute.String("k", "v"))
	for _, h := range []Histograms{Exponential, Explicit} {
		t.Run(string(h), func(t *testing.T) {
			p := newChunkProducer(instrumentationScopeForTest(), h, metricdata.CumulativeTemporality)
			g := p.forAttrs(attrs)
			if p.forAttrs(attrs) != g {
				t.Fatal("the same attributes gave a second histogram")
			}
			for _, v := range values {
				g.record(v)
			}
			sms, err := p.Produce(context.Background())
			if err != nil || len(sms) != 1 || len(sms[0].Metrics) != 1 {
				t.Fatalf("Produce: %v, %d scopes", err, len(sms))
			}
			got := sms[0].Metrics[0]
			if got.Name != NameTimePerOutputChunk || got.Unit != "s" {
				t.Errorf("metric %q unit %q", got.Name, got.Unit)
			}
			if h == Exponential {
				// MaxSize large enough that the SDK keeps scale 3.
				want := sdkHistogram(t, sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: chunkSlots, MaxScale: chunkScale}, values).(metricdata.ExponentialHistogram[float64]).DataPoints[0]
				pt := got.Data.(metricdata.ExponentialHistogram[float64]).DataPoints[0]
				if pt.Scale != want.Scale || pt.ZeroCount != want.ZeroCount || pt.Count != want.Count ||
					pt.PositiveBucket.Offset != want.PositiveBucket.Offset || !slices.Equal(pt.PositiveBucket.Counts, want.PositiveBucket.Counts) {
					t.Errorf("scale %d zero %d count %d offset %d (%d buckets), SDK: scale %d zero %d count %d offset %d (%d buckets)",
						pt.Scale, pt.ZeroCount, pt.Count, pt.PositiveBucket.Offset, len(pt.PositiveBucket.Counts),
						want.Scale, want.ZeroCount, want.Count, want.PositiveBucket.Offset, len(want.PositiveBucket.Counts))
				}
				checkStats(t, pt.Sum, want.Sum, pt.Min, want.Min, pt.Max, want.Max)
			} else {
				want := sdkHistogram(t, sdkmetric.AggregationExplicitBucketHistogram{Boundaries: conventionSeconds}, values).(metricdata.Histogram[float64]).DataPoints[0]
				pt := got.Data.(metricdata.Histogram[float64]).DataPoints[0]
				if pt.Count != want.Count || !slices.Equal(pt.Bounds, want.Bounds) || !slices.Equal(pt.BucketCounts, want.BucketCounts) {
					t.Errorf("count %d buckets %v, SDK count %d buckets %v", pt.Count, pt.BucketCounts, want.Count, want.BucketCounts)
				}
				checkStats(t, pt.Sum, want.Sum, pt.Min, want.Min, pt.Max, want.Max)
			}
		})
	}
}

func checkStats(t *testing.T, sum, wantSum float64, lo, wantLo, hi, wantHi metricdata.Extrema[float64]) {
	t.Helper()
	if math.Abs(sum-wantSum) > 1e-9*wantSum {
		t.Errorf("sum %v, SDK %v", sum, wantSum)
	}
	l, _ := lo.Value()
	wl, _ := wantLo.Value()
	h, _ := hi.Value()
	wh, _ := wantHi.Value()
	if l != wl || h != wh {
		t.Errorf("min %v max %v, SDK %v %v", l, h, wl, wh)
	}
}

// TestChunksDelta: with delta temporality each collect holds what came
// since the previous one, and a quiet interval gives no point.
func TestChunksDelta(t *testing.T) {
	p := newChunkProducer(instrumentationScopeForTest(), Exponential, metricdata.DeltaTemporality)
	g := p.forAttrs(attribute.NewSet(attribute.String("k", "v")))
	count := func() (uint64, time.Time) {
		sms, err := p.Produce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(sms) == 0 {
			return 0, time.Time{}
		}
		pts := sms[0].Metrics[0].Data.(metricdata.ExponentialHistogram[float64])
		if pts.Temporality != metricdata.DeltaTemporality {
			t.Errorf("temporality %v", pts.Temporality)
		}
		return pts.DataPoints[0].Count, pts.DataPoints[0].StartTime
	}
	for _, v := range []float64{0.01, 0.02, 0.03} {
		g.record(v)
	}
	n1, start1 := count()
	g.record(0.04)
	n2, start2 := count()
	n3, _ := count()
	if n1 != 3 || n2 != 1 || n3 != 0 || !start2.After(start1) {
		t.Errorf("delta counts %d, %d, %d (want 3, 1, 0), starts %v then %v", n1, n2, n3, start1, start2)
	}
}

func instrumentationScopeForTest() instrumentation.Scope {
	return instrumentation.Scope{Name: scopeName}
}
