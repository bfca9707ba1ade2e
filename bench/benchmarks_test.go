package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// BenchmarkBootstrapResample is the cost of one bootstrap resample of a
// cell of 3 repeats of 10,000 requests (every figure): the ranking's default
// 1000 resamples cost 1000 times this per cell.
func BenchmarkBootstrapResample(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var samples []*sample
	for r := 0; r < 3; r++ {
		xs := make([]float64, 10000)
		for i := range xs {
			xs[i] = rng.ExpFloat64()
		}
		samples = append(samples, sampleOf(xs, 100, 60))
	}
	b.ResetTimer()
	for b.Loop() {
		bootstrapCell(samples, 1, 1, 2)
	}
}

// BenchmarkRunCorrelation is the cost of measuring a repeat's correlation
// once, when its sample is built: the block length and the nine quantile
// taus of 10,000 and 100,000 requests (max_samples_per_repeat's default)
// whose log latencies follow an AR(1) process at 0.9.
func BenchmarkRunCorrelation(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			cols := [numLatencies][]float64{ar1(rng, n, 0.9), ar1(rng, n, 0.9), ar1(rng, n, 0.9)}
			for b.Loop() {
				blockLength(cols[:]...)
				quantileTaus(cols)
			}
		})
	}
}

// BenchmarkRecorderObserve is the cost of recording one finished request of
// 128 tokens, on the runner's request goroutine.
func BenchmarkRecorderObserve(b *testing.B) {
	w0 := time.Now()
	rc := newRecorderAt(w0, time.Second, config.SLO{E2E: time.Second}, DefaultMaxSamplesPerRepeat, DefaultMaxITLSamples, 1)
	obs := &observation.Request{Scheduled: w0, Sent: w0, Outcome: observation.Success, OutputTokens: 128, ContentEvents: 128}
	for i := 0; i < 128; i++ {
		obs.TokenTimes = append(obs.TokenTimes, w0.Add(time.Duration(i+1)*10*time.Millisecond))
	}
	obs.FirstToken, obs.End = obs.TokenTimes[0], obs.TokenTimes[127]
	b.ReportAllocs()
	for b.Loop() {
		rc.observe(obs)
	}
}

// syntheticReport is a report of targets × loads cells with made-up figures.
func syntheticReport(targets, loads int) *report.Report {
	r := &report.Report{Schema: report.Schema}
	rng := rand.New(rand.NewPCG(3, 4))
	for t := 0; t < targets; t++ {
		name := fmt.Sprintf("t%d", t)
		r.Environment.Targets = append(r.Environment.Targets, report.TargetInfo{Name: name})
		r.Ranking.Entries = append(r.Ranking.Entries, report.RankEntry{Target: name, Rank: t + 1, Score: 1 / float64(t+1),
			Latency: 1, Throughput: 1, Memory: report.NaN(), Accuracy: report.NaN(), PeakMemoryBytes: report.NaN()})
		for l := 0; l < loads; l++ {
			d := summarize([]float64{rng.Float64(), rng.Float64(), rng.Float64()})
			load := report.Load{Kind: report.LoadRate, Value: float64(l + 1)}
			r.Cells = append(r.Cells, report.CellResult{Key: report.CellKey(name, load, "s"), Target: name, Load: load, Shape: "s",
				Summary: report.Stats{Requests: 100, TTFT: d, TPOT: d, ITL: d, E2E: d, ScheduleLag: d, OutputTokensPerSecond: 100 * rng.Float64()},
				CI:      map[string]report.Interval{"e2e_p99": {Lo: 1, Hi: 2}}, Repeats: []report.RepeatResult{{}}})
		}
	}
	return r
}

// BenchmarkWriteHTML renders the report of 4 targets × 8 loads.
func BenchmarkWriteHTML(b *testing.B) {
	r := syntheticReport(4, 8)
	for b.Loop() {
		if err := render.WriteHTML(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
