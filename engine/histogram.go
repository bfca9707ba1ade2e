package engine

import (
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
)

// Histogram is one normalised engine histogram: the engine's own buckets,
// summed over the series that count (data-parallel ranks, several models).
// OK is false when the engine does not report it; then its series is
// absent.
type Histogram struct {
	OK bool
	// Count and Sum are the observations' number and sum, in the source's
	// unit (seconds or tokens).
	Count uint64
	Sum   float64
	// Buckets are cumulative, by ascending upper bound; the +Inf bucket is
	// Count and not listed.
	Buckets []Bucket
}

// Bucket is one cumulative histogram bucket.
type Bucket struct {
	UpperBound float64
	Count      uint64
}

func (h Histogram) clone() Histogram {
	h.Buckets = slices.Clone(h.Buckets)
	return h
}

// sampleCount and bucketCount read a count whichever form the parser gave
// it (an integer, or a float where the text was not one).
func sampleCount(h *dto.Histogram) float64 {
	if h.SampleCountFloat != nil {
		return h.GetSampleCountFloat()
	}
	return float64(h.GetSampleCount())
}

func bucketCount(b *dto.Bucket) float64 {
	if b.CumulativeCountFloat != nil {
		return b.GetCumulativeCountFloat()
	}
	return float64(b.GetCumulativeCount())
}

// maxCount is the largest count kept: counts are whole numbers of
// observations, and a float64 holds every whole number up to 2^53.
const maxCount = 1 << 53

// aggregateHistogram sums the histogram series picked. Series of the same
// buckets add bucket by bucket. Where their buckets disagree (two engine
// versions behind one target, a rank started with other bucket flags),
// only the upper bounds that every series has are kept: a cumulative count
// at a bound all series share is still their exact sum, so the merged
// histogram loses resolution and never invents a count (+Inf, the count,
// is always shared). A series that is not a valid histogram (a count
// that is not a whole number, cumulative counts falling, a bucket above
// its count, a NaN bound or a non-finite sum) makes the whole histogram
// absent: it is not what the engine measured.
func aggregateHistogram(mf *dto.MetricFamily, picked []*dto.Metric) Histogram {
	if mf.GetType() != dto.MetricType_HISTOGRAM {
		return Histogram{}
	}
	var (
		out    Histogram
		shared []float64 // bounds every series so far has
		n      int
		count  float64
	)
	for _, m := range picked {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		if !validHistogram(h) {
			return Histogram{}
		}
		bounds := finiteBounds(h)
		if n == 0 {
			shared = bounds
		} else {
			shared = slices.DeleteFunc(shared, func(b float64) bool {
				_, found := slices.BinarySearch(bounds, b)
				return !found
			})
		}
		count += sampleCount(h)
		out.Sum += h.GetSampleSum()
		n++
	}
	if n == 0 || count > maxCount {
		return Histogram{}
	}
	counts := make([]float64, len(shared))
	for _, m := range picked {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		for _, b := range h.GetBucket() {
			if i, found := slices.BinarySearch(shared, b.GetUpperBound()); found {
				counts[i] += bucketCount(b)
			}
		}
	}
	out.Count = uint64(count)
	out.Buckets = make([]Bucket, len(shared))
	for i, b := range shared {
		out.Buckets[i] = Bucket{UpperBound: b, Count: uint64(counts[i])}
	}
	out.OK = true
	return out
}

// finiteBounds lists a histogram's upper bounds but +Inf, ascending.
func finiteBounds(h *dto.Histogram) []float64 {
	out := make([]float64, 0, len(h.GetBucket()))
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			out = append(out, b.GetUpperBound())
		}
	}
	slices.Sort(out)
	return out
}

// validHistogram: counts that never fall with the bound and never pass the
// total, finite bounds (but +Inf) and a finite sum. The text format's
// parser leaves such checks to the reader.
func validHistogram(h *dto.Histogram) bool {
	if math.IsNaN(h.GetSampleSum()) || math.IsInf(h.GetSampleSum(), 0) || !wholeCount(sampleCount(h)) {
		return false
	}
	bs := slices.Clone(h.GetBucket())
	slices.SortFunc(bs, func(a, b *dto.Bucket) int {
		return cmpFloat(a.GetUpperBound(), b.GetUpperBound())
	})
	var last float64
	for _, b := range bs {
		ub := b.GetUpperBound()
		if math.IsNaN(ub) || math.IsInf(ub, -1) {
			return false
		}
		c := bucketCount(b)
		if !wholeCount(c) || c < last || c > sampleCount(h) {
			return false
		}
		last = c
	}
	return true
}

func wholeCount(c float64) bool {
	return c >= 0 && c <= maxCount && c == math.Trunc(c)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
