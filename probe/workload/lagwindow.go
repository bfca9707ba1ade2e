package workload

import (
	"math"
	"sync"
	"time"
)

// lagWindow estimates a quantile of schedule lag over a sliding window with
// fixed memory: the window is split into slots, each a histogram with
// logarithmic buckets (about 12% wide), and slots older than the window are
// cleared as time moves on.
type lagWindow struct {
	mu      sync.Mutex
	slotDur time.Duration
	slots   []lagSlot
}

const (
	lagBucketsPerDecade = 20
	lagMin              = 1e-6 // seconds; smaller lags fall in bucket 0
	lagDecades          = 8    // 1 µs to 100 s
	lagNumBuckets       = lagBucketsPerDecade*lagDecades + 1
)

type lagSlot struct {
	epoch  int64 // slot index since the Unix epoch; identifies stale slots
	total  uint64
	counts [lagNumBuckets]uint32
}

func newLagWindow(window time.Duration, slots int) *lagWindow {
	return &lagWindow{slotDur: window / time.Duration(slots), slots: make([]lagSlot, slots)}
}

func lagBucket(seconds float64) int {
	if seconds <= lagMin {
		return 0
	}
	b := int(math.Ceil(math.Log10(seconds/lagMin) * lagBucketsPerDecade))
	return min(b, lagNumBuckets-1)
}

// upper bound of bucket b, in seconds.
func lagBucketUpper(b int) float64 {
	return lagMin * math.Pow(10, float64(b)/lagBucketsPerDecade)
}

func (w *lagWindow) observe(now time.Time, lag time.Duration) {
	epoch := now.UnixNano() / int64(w.slotDur)
	w.mu.Lock()
	s := &w.slots[epoch%int64(len(w.slots))]
	if s.epoch != epoch {
		*s = lagSlot{epoch: epoch}
	}
	s.total++
	s.counts[lagBucket(lag.Seconds())]++
	w.mu.Unlock()
}

// quantile returns the q-quantile of the lags seen in the window ending at
// now (the upper bound of its bucket), and how many lags it saw.
func (w *lagWindow) quantile(now time.Time, q float64) (float64, uint64) {
	epoch := now.UnixNano() / int64(w.slotDur)
	oldest := epoch - int64(len(w.slots)) + 1
	var merged [lagNumBuckets]uint64
	var total uint64
	w.mu.Lock()
	for i := range w.slots {
		s := &w.slots[i]
		if s.epoch < oldest || s.epoch > epoch {
			continue
		}
		total += s.total
		for b, c := range s.counts {
			merged[b] += uint64(c)
		}
	}
	w.mu.Unlock()
	if total == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for b, c := range merged {
		seen += c
		if seen >= rank {
			return lagBucketUpper(b), total
		}
	}
	return lagBucketUpper(lagNumBuckets - 1), total
}
