package bench

import (
	"math"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// precisionFigures are the percentiles whose precision a repeat reports:
// the headline latencies at p50 and p99.
var precisionFigures = []struct {
	name string
	lat  int
	p    float64
}{
	{"ttft_p50", latTTFT, 0.5}, {"ttft_p99", latTTFT, 0.99},
	{"tpot_p50", latTPOT, 0.5}, {"tpot_p99", latTPOT, 0.99},
	{"e2e_p50", latE2E, 0.5}, {"e2e_p99", latE2E, 0.99},
}

// precisionOf is the margin of error of the repeat's headline percentiles
// (report.Precision says how): successes successful requests whose serial
// correlation inflated the variance by inflation (the stability rule's
// factor), the sample's sorted latencies in smp.
func precisionOf(smp *sample, successes int, inflation float64) *report.Precision {
	if smp == nil || successes <= 0 || !(inflation >= 1) {
		return nil
	}
	neff := float64(successes) / inflation
	pr := &report.Precision{EffectiveRequests: report.Num(neff), Inflation: report.Num(inflation), Figures: map[string]report.FigurePrecision{}}
	for _, f := range precisionFigures {
		vals := smp.lat[f.lat].vals
		if len(vals) == 0 {
			continue
		}
		v := quantileSorted(vals, f.p)
		h := 1.96 * math.Sqrt(f.p*(1-f.p)/neff)
		lo, hi := quantileSorted(vals, max(f.p-h, 0)), quantileSorted(vals, min(f.p+h, 1))
		fp := report.FigurePrecision{Low: report.Num(lo), High: report.Num(hi), Margin: report.NaN(),
			TooFew: neff*(1-f.p) < report.MinBeyond}
		if v > 0 {
			fp.Margin = report.Num(max(hi-v, v-lo) / v)
		}
		pr.Figures[f.name] = fp
	}
	return pr
}
