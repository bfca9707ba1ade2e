package bench

import (
	"math"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// cdfSteps is the number of quantile steps a Distribution keeps: the
// quantiles at 0%, 1%, ..., 100% (cdfSteps+1 values per latency).
const cdfSteps = 100

// quantileSteps is the quantiles at 0, 1/cdfSteps, ..., 1 of sorted xs;
// nil when xs is empty.
func quantileSteps(xs []float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	out := make([]float64, cdfSteps+1)
	for i := range out {
		out[i] = quantileSorted(xs, float64(i)/cdfSteps)
	}
	return out
}

// distribution is the sample's latency quantiles: its sorted values are
// those Stats' TTFT, TPOT and E2E summarise.
func (s *sample) distribution() *report.Distribution {
	d := &report.Distribution{
		TTFT: quantileSteps(s.lat[latTTFT].vals),
		TPOT: quantileSteps(s.lat[latTPOT].vals),
		E2E:  quantileSteps(s.lat[latE2E].vals),
	}
	if d.TTFT == nil && d.TPOT == nil && d.E2E == nil {
		return nil
	}
	return d
}

// windows is the repeat's windows [0, k) as finish(k, ...) saw them.
func (rc *recorder) windows(k int) *report.RepeatWindows {
	rc.settle()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if k <= 0 {
		return nil
	}
	at := func(a []int, w int) int {
		if w >= 0 && w < len(a) {
			return a[w]
		}
		return 0
	}
	rw := &report.RepeatWindows{WindowSeconds: rc.window.Seconds(),
		Sent: make([]int, k), Ended: make([]int, k), Completed: make([]int, k), Dropped: make([]int, k),
		InFlight: make([]int, k), TTFTP50: make([]report.Num, k)}
	// winSent and winEnded are shifted by one: index 0 is the warm-up's.
	flight := at(rc.winSent, 0) - at(rc.winEnded, 0)
	for w := 0; w < k; w++ {
		rw.Sent[w], rw.Ended[w] = at(rc.winSent, w+1), at(rc.winEnded, w+1)
		rw.Completed[w], rw.Dropped[w] = at(rc.winCompletions, w), at(rc.winDropped, w)
		flight += rw.Sent[w] - rw.Ended[w]
		rw.InFlight[w] = flight
	}
	byWin := make([][]float64, k)
	win := rc.window.Seconds()
	for _, r := range rc.recs {
		if !r.Measured || !r.TTFT.Valid() || win <= 0 {
			continue
		}
		if w := int(math.Floor(r.Sched / win)); w >= 0 && w < k {
			byWin[w] = append(byWin[w], float64(r.TTFT))
		}
	}
	for w := range byWin {
		rw.TTFTP50[w] = report.Num(median(byWin[w]))
	}
	return rw
}
