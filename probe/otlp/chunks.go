package otlp

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The time per output chunk is the one figure recorded at every streamed
// chunk, so it is the one whose cost counts. Recording it through the
// SDK's synchronous histogram costs 0.4 to 0.9 µs a chunk with seven
// attributes (the SDK normalises the attribute set at every call), which
// the load harness measured as 10% more client CPU per chunk. It is kept
// here instead, per workload, in a histogram of the same shape the SDK
// would build (base-2 exponential at scale 3, or the conventions' explicit
// buckets), and handed to the SDK's reader as a Producer at each collect:
// the push, its exporter and its temporality stay the SDK's.

// chunkScale is the exponential histograms' scale: buckets 2^(1/8), 9%,
// wide, as the Prometheus side's native histograms (factor 1.1, schema 3).
const chunkScale = 3

// The range of the fixed bucket array: gaps in (2^-40 s, 2^20 s], about a
// picosecond to twelve days. A smaller gap counts as zero (the clock did
// not tell the two chunks apart); a larger one, which no request timeout
// allows, counts in the last bucket.
const (
	chunkMinExp = -40
	chunkMaxExp = 20
	chunkLow    = chunkMinExp << chunkScale      // index of the first bucket
	chunkHigh   = chunkMaxExp<<chunkScale - 1    // index of the last bucket
	chunkSlots  = chunkHigh - chunkLow + 1       // 480 counters, 3.8 kB a workload
	chunkTiny   = 0x1p-40                        // values at or below count as zero
	scaleFactor = math.Log2E * (1 << chunkScale) // 2^scale / ln 2
)

// octave holds the bucket boundaries inside one octave, 2^(k/8) for k = 1
// to 7: a value's place among them is its bucket within its power of two,
// found by comparison, exactly and without a logarithm per chunk.
var octave = func() (b [1<<chunkScale - 1]float64) {
	for k := range b {
		b[k] = math.Exp2(float64(k+1) / (1 << chunkScale))
	}
	return b
}()

// chunkIndex is the exponential bucket of v > 0 at chunkScale: bucket i
// holds (base^i, base^(i+1)], upper bounds inclusive, as OTLP defines it.
func chunkIndex(v float64) int {
	frac, exp := math.Frexp(v) // v = frac · 2^exp, frac in [0.5, 1)
	m := 2 * frac              // v = m · 2^(exp-1), m in [1, 2)
	var i int
	if m == 1 {
		// An exact power of two is the upper bound of the bucket below.
		i = (exp-1)<<chunkScale - 1
	} else {
		j := 0
		for j < len(octave) && octave[j] < m {
			j++
		}
		i = (exp-1)<<chunkScale + j
	}
	return min(max(i, chunkLow), chunkHigh)
}

// chunkGaps is one workload's time per output chunk, in seconds.
type chunkGaps struct {
	attrs  attribute.Set
	bounds []float64 // explicit boundaries; nil: exponential

	mu       sync.Mutex
	start    time.Time // of the values held: creation, or the last delta collect
	count    uint64
	sum      float64
	min, max float64
	zero     uint64   // exponential: values too small to tell from 0
	counts   []uint64 // exponential: by index - chunkLow; explicit: by bucket
}

// record adds one gap. It holds the workload's lock for a few
// nanoseconds: one array increment.
func (g *chunkGaps) record(v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.count == 0 || v < g.min {
		g.min = v
	}
	if g.count == 0 || v > g.max {
		g.max = v
	}
	g.count++
	g.sum += v
	switch {
	case g.bounds != nil:
		// The first boundary at or above v: buckets are upper-inclusive.
		g.counts[sort.SearchFloat64s(g.bounds, v)]++
	case v <= chunkTiny:
		// Gaps are never negative on the monotonic clock; one below a
		// picosecond is two chunks read at the same instant.
		g.zero++
	default:
		g.counts[chunkIndex(v)-chunkLow]++
	}
}

// chunkProducer holds every workload's chunkGaps and turns them into the
// gen_ai.client.operation.time_per_output_chunk metric at each collect.
type chunkProducer struct {
	scope       instrumentation.Scope
	explicit    bool
	temporality metricdata.Temporality

	mu   sync.Mutex
	gaps map[attribute.Distinct]*chunkGaps
	list []*chunkGaps // in creation order, for a stable output
}

var _ sdkmetric.Producer = (*chunkProducer)(nil)

func newChunkProducer(scope instrumentation.Scope, h Histograms, t metricdata.Temporality) *chunkProducer {
	return &chunkProducer{scope: scope, explicit: h == Explicit, temporality: t, gaps: map[attribute.Distinct]*chunkGaps{}}
}

// forAttrs is the histogram of one attribute set: the same one again for
// the same set (a workload that a reload kept), as the SDK's instruments
// would do.
func (p *chunkProducer) forAttrs(set attribute.Set) *chunkGaps {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.gaps[set.Equivalent()]; ok {
		return g
	}
	g := &chunkGaps{attrs: set, start: time.Now()}
	if p.explicit {
		g.bounds = defTPOC.bounds
		g.counts = make([]uint64, len(g.bounds)+1)
	} else {
		g.counts = make([]uint64, chunkSlots)
	}
	p.gaps[set.Equivalent()] = g
	p.list = append(p.list, g)
	return g
}

// Produce implements sdkmetric.Producer.
func (p *chunkProducer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	p.mu.Lock()
	list := append([]*chunkGaps(nil), p.list...)
	p.mu.Unlock()
	now := time.Now()
	var expo []metricdata.ExponentialHistogramDataPoint[float64]
	var expl []metricdata.HistogramDataPoint[float64]
	for _, g := range list {
		g.mu.Lock()
		if g.count == 0 {
			// Never recorded, or nothing since the last delta.
			g.mu.Unlock()
			continue
		}
		if p.explicit {
			expl = append(expl, metricdata.HistogramDataPoint[float64]{
				Attributes: g.attrs, StartTime: g.start, Time: now, Count: g.count, Sum: g.sum,
				Bounds: g.bounds, BucketCounts: append([]uint64(nil), g.counts...),
				Min: metricdata.NewExtrema(g.min), Max: metricdata.NewExtrema(g.max),
			})
		} else {
			expo = append(expo, g.exponentialPoint(now))
		}
		if p.temporality == metricdata.DeltaTemporality {
			g.count, g.sum, g.zero, g.start = 0, 0, 0, now
			clear(g.counts)
		}
		g.mu.Unlock()
	}
	m := metricdata.Metrics{Name: defTPOC.name, Description: defTPOC.desc, Unit: defTPOC.unit}
	switch {
	case p.explicit && len(expl) > 0:
		m.Data = metricdata.Histogram[float64]{Temporality: p.temporality, DataPoints: expl}
	case !p.explicit && len(expo) > 0:
		m.Data = metricdata.ExponentialHistogram[float64]{Temporality: p.temporality, DataPoints: expo}
	default:
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{Scope: p.scope, Metrics: []metricdata.Metrics{m}}}, nil
}

// exponentialPoint is g as a data point, its buckets trimmed to those
// between the first and the last that hold a value. g.mu is held.
func (g *chunkGaps) exponentialPoint(now time.Time) metricdata.ExponentialHistogramDataPoint[float64] {
	first, last := -1, -1
	for i, c := range g.counts {
		if c != 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	pt := metricdata.ExponentialHistogramDataPoint[float64]{
		Attributes: g.attrs, StartTime: g.start, Time: now, Count: g.count, Sum: g.sum,
		Min: metricdata.NewExtrema(g.min), Max: metricdata.NewExtrema(g.max),
		Scale: chunkScale, ZeroCount: g.zero,
	}
	if first >= 0 {
		pt.PositiveBucket = metricdata.ExponentialBucket{
			Offset: int32(first + chunkLow),
			Counts: append([]uint64(nil), g.counts[first:last+1]...),
		}
	}
	return pt
}
