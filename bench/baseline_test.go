package bench

import (
	"bytes"
	"context"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

func reportWith(sha string, cells ...report.CellResult) *report.Report {
	return &report.Report{Schema: report.Schema, Environment: report.Environment{PromptSetSHA256: sha, ConfigSHA256: "c"}, Cells: cells}
}

func cellP99(key string, p99, lo, hi float64) report.CellResult {
	c := report.CellResult{Key: key, Summary: report.Stats{E2E: report.Dist{Count: 100, P50: p99 / 2, P99: p99}, OutputTokensPerSecond: 100}, CI: map[string]report.Interval{}}
	if lo > 0 {
		c.CI["e2e_p99"] = report.Interval{Lo: lo, Hi: hi}
	}
	return c
}

// withCI sets the figure's value in the summary and its interval.
func withCI(c report.CellResult, figure string, v, lo, hi float64) report.CellResult {
	switch figure {
	case "output_tokens_per_second":
		c.Summary.OutputTokensPerSecond = v
	case "success_ratio":
		c.Summary.SuccessRatio = v
	}
	c.CI = maps.Clone(c.CI)
	c.CI[figure] = report.Interval{Lo: lo, Hi: hi}
	return c
}

// TestCompare: the comparison's change, its interval and each gated
// figure's verdict on known figures (report.GateVerdict's rule), the run's
// verdict and the console's lines, each starting with its verdict.
func TestCompare(t *testing.T) {
	base := reportWith("s",
		cellP99("t/rate=1/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=2/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=4/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=8/a", 1.00, 0.98, 1.02),
		cellP99("t/rate=16/a", 1.00, 0, 0),
		cellP99("t/gone/a", 1, 0.9, 1.1),
	)
	cur := reportWith("s",
		cellP99("t/rate=1/a", 1.10, 1.08, 1.12), // +10%, tight: regressed
		cellP99("t/rate=2/a", 1.01, 0.99, 1.03), // +1%, the interval below +5%: ok
		cellP99("t/rate=4/a", 1.08, 0.80, 1.40), // +8% but within noise: inconclusive
		cellP99("t/rate=8/a", 0.90, 0.88, 0.92), // faster: ok
		cellP99("t/rate=16/a", 1.07, 0, 0),      // no interval: inconclusive
		cellP99("t/new/a", 1, 0.9, 1.1),
	)
	c := Compare(base, cur, "old.json", 0.05, []string{"e2e_p99"}, 0.95)
	if want := []string{"t/rate=1/a: e2e_p99"}; strings.Join(c.Regressions, "|") != strings.Join(want, "|") {
		t.Errorf("regressions %v, want %v", c.Regressions, want)
	}
	if want := []string{"t/rate=4/a: e2e_p99", "t/rate=16/a: e2e_p99"}; strings.Join(c.Inconclusive, "|") != strings.Join(want, "|") {
		t.Errorf("inconclusive %v, want %v", c.Inconclusive, want)
	}
	if c.OK != 2 || c.Verdict != report.VerdictRegressed {
		t.Errorf("ok %d verdict %s, want 2 and regressed", c.OK, c.Verdict)
	}
	if len(c.Unmatched) != 2 || len(c.Warnings) != 0 {
		t.Errorf("unmatched %v warnings %v", c.Unmatched, c.Warnings)
	}
	// Four gated figures have intervals in both runs (rate 16's has
	// none): each interval at 1 - 0.05/4, so that the four hold together
	// at 95%.
	if c.Simultaneous != 4 {
		t.Errorf("simultaneous over %d figures, want 4", c.Simultaneous)
	}
	z, z4 := 1.959963984540054, 2.497705474412119
	for _, cc := range c.Cells {
		if cc.Cell == "t/rate=1/a" && cc.Figure == "e2e_p99" {
			// se: ln(1.02/0.98)/(2·1.96) and ln(1.12/1.08)/(2·1.96).
			se := math.Hypot(math.Log(1.02/0.98)/(2*z), math.Log(1.12/1.08)/(2*z))
			if lo := 1.1*math.Exp(-z4*se) - 1; math.Abs(float64(cc.ChangeLo)-lo) > 1e-9 || math.Abs(cc.Change-0.1) > 1e-9 {
				t.Errorf("change %v [%v], want 0.1 [%v]", cc.Change, cc.ChangeLo, lo)
			}
			if d := math.Expm1(z4 * se); math.Abs(float64(cc.Detectable)-d) > 1e-9 {
				t.Errorf("detectable %v, want %v", cc.Detectable, d)
			}
		}
		if cc.Figure == "output_tokens_per_second" && cc.Gated {
			t.Error("throughput is not gated here")
		}
		if !cc.Gated && cc.Verdict != "" {
			t.Errorf("%s %s: a verdict (%s) on a figure only shown", cc.Cell, cc.Figure, cc.Verdict)
		}
	}
	var out bytes.Buffer
	writeComparisonText(&out, c)
	for _, line := range []string{
		"regressed    t/rate=1/a e2e_p99: 1.000 s -> 1.100 s (+10.0%, interval +6.3%..+13.9%, could detect ±3.5%)",
		"ok           t/rate=2/a e2e_p99: ",
		"inconclusive t/rate=4/a e2e_p99: ",
		"ok           t/rate=8/a e2e_p99: ",
		"inconclusive t/rate=16/a e2e_p99: 1.000 s -> 1.070 s (+7.0%, no interval: the requests cannot bound it (too few, or its slowest came in bursts))",
		"REGRESSION t/rate=1/a: e2e_p99",
		"gate: regressed (1 regressed, 2 inconclusive, 2 ok)",
	} {
		if !strings.Contains(out.String(), "\n"+line) {
			t.Errorf("no line %q in:\n%s", line, out.String())
		}
	}

	other := reportWith("different", cellP99("t/rate=1/a", 1, 0.98, 1.02))
	if c := Compare(base, other, "old.json", 0.05, []string{"e2e_p99"}, 0.95); len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "prompt sets differ") {
		t.Errorf("warnings %v", c.Warnings)
	}
	// No cell in common: the gate saw nothing, which is no pass.
	if c := Compare(base, reportWith("s", cellP99("t/elsewhere/a", 1, 0.98, 1.02)), "old.json", 0.05, []string{"e2e_p99"}, 0.95); c.Verdict != report.VerdictInconclusive {
		t.Errorf("no cell compared: verdict %s, want inconclusive", c.Verdict)
	}
}

// TestCompareHigherIsBetter: throughput and the success ratio regress when
// they fall; a rise of either is ok, however large.
func TestCompareHigherIsBetter(t *testing.T) {
	gated := []string{"output_tokens_per_second", "success_ratio"}
	cell := func(key string, tps, tpsLo, tpsHi, sr, srLo, srHi float64) report.CellResult {
		c := cellP99(key, 1, 0.98, 1.02)
		return withCI(withCI(c, "output_tokens_per_second", tps, tpsLo, tpsHi), "success_ratio", sr, srLo, srHi)
	}
	base := reportWith("s",
		cell("t/rate=1/a", 100, 98, 102, 1, 0.99, 1),
		cell("t/rate=2/a", 100, 98, 102, 1, 0.99, 1),
		cell("t/rate=4/a", 100, 98, 102, 1, 0.99, 1),
	)
	cur := reportWith("s",
		cell("t/rate=1/a", 80, 78, 82, 0.80, 0.78, 0.82),   // both fell 20%: regressed
		cell("t/rate=2/a", 130, 128, 132, 1, 0.99, 1),      // faster, as reliable: ok
		cell("t/rate=4/a", 97, 70, 120, 0.96, 0.90, 0.999), // wide: inconclusive
	)
	c := Compare(base, cur, "old.json", 0.05, gated, 0.95)
	want := map[string]report.Verdict{
		"t/rate=1/a output_tokens_per_second": report.VerdictRegressed, "t/rate=1/a success_ratio": report.VerdictRegressed,
		"t/rate=2/a output_tokens_per_second": report.VerdictOK, "t/rate=2/a success_ratio": report.VerdictOK,
		"t/rate=4/a output_tokens_per_second": report.VerdictInconclusive, "t/rate=4/a success_ratio": report.VerdictInconclusive,
	}
	for _, cc := range c.Cells {
		if !cc.Gated {
			continue
		}
		if !cc.HigherIsBetter || cc.Verdict != want[cc.Cell+" "+cc.Figure] {
			t.Errorf("%s %s: %+.3f [%v, %v]: verdict %s (higher is better: %v), want %s", cc.Cell, cc.Figure, cc.Change, cc.ChangeLo, cc.ChangeHi, cc.Verdict, cc.HigherIsBetter, want[cc.Cell+" "+cc.Figure])
		}
		delete(want, cc.Cell+" "+cc.Figure)
	}
	if len(want) > 0 {
		t.Errorf("not compared: %v", want)
	}
	var out bytes.Buffer
	writeComparisonText(&out, c)
	if !strings.Contains(out.String(), "\nregressed    t/rate=1/a output_tokens_per_second: 100.0 tokens/s -> 80.00 tokens/s") ||
		!strings.Contains(out.String(), "\nregressed    t/rate=1/a success_ratio: 100.0% -> 80.0%") {
		t.Errorf("text:\n%s", out.String())
	}
}

// TestGateExitStatus: each of the gate's outcomes has its own exit status,
// the run's the worst of its figures': regressed 3 (ExitRegression),
// inconclusive 6 (ExitInconclusive), ok 0; a regression beside an
// inconclusive figure is a regression.
func TestGateExitStatus(t *testing.T) {
	base := reportWith("s", cellP99("t/rate=1/a", 1.00, 0.98, 1.02), cellP99("t/rate=2/a", 1.00, 0.98, 1.02))
	regressed, inconclusive, ok := cellP99("", 1.10, 1.08, 1.12), cellP99("", 1.08, 0.80, 1.40), cellP99("", 1.00, 0.98, 1.02)
	at := func(key string, c report.CellResult) report.CellResult {
		c.Key = key
		return c
	}
	cfg := &Config{}
	cfg.Bench.Regression = RegressionSpec{Threshold: 0.05, Metrics: []string{"e2e_p99"}}
	cfg.Bench.Ranking.Confidence = 0.95
	for _, tc := range []struct {
		name   string
		cur    *report.Report
		want   int
		prefix string
	}{
		{"ok", reportWith("s", at("t/rate=1/a", ok), at("t/rate=2/a", ok)), ExitOK, "gate: ok"},
		{"inconclusive", reportWith("s", at("t/rate=1/a", ok), at("t/rate=2/a", inconclusive)), ExitInconclusive, "gate: inconclusive"},
		{"regressed", reportWith("s", at("t/rate=1/a", regressed), at("t/rate=2/a", ok)), ExitRegression, "gate: regressed"},
		{"regressed beside inconclusive", reportWith("s", at("t/rate=1/a", inconclusive), at("t/rate=2/a", regressed)), ExitRegression, "gate: regressed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			f := &commandFlags{outputDir: t.TempDir(), baseline: "old.json"}
			if got := runResult(context.Background(), tc.cur, base, cfg, f, &stdout, &stderr); got != tc.want {
				t.Errorf("exit %d, want %d\n%s\n%s", got, tc.want, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "\n"+tc.prefix+" (") {
				t.Errorf("no %q line:\n%s", tc.prefix, stdout.String())
			}
		})
	}
	if ExitInconclusive == ExitOK || ExitInconclusive == ExitError || ExitInconclusive == ExitUsage || ExitInconclusive == ExitRegression || ExitInconclusive == ExitNoSuccess {
		t.Errorf("ExitInconclusive %d is not distinct", ExitInconclusive)
	}
}

// modelCell is one cell of a modelled run: n requests whose log TTFT, TPOT
// and E2E follow AR(1) processes of coefficient rho (a batching engine's
// latencies, correlated in time) with a log standard deviation of 0.3
// around medians of 100 ms, 20 ms and 2 s times slow; every request
// succeeds and delivers 100 tokens over a 60 s window. Its summary and
// intervals come from the bench's own code (summarize, blockLength,
// bootstrapCell, percentileInterval, widenSuccessRatio).
func modelCell(rng *rand.Rand, n int, rho, slow float64) report.CellResult {
	lat := func(median float64) []float64 {
		xs := ar1(rng, n, rho)
		for i, x := range xs {
			xs[i] = median * slow * math.Pow(x, 0.3)
		}
		return xs
	}
	ttft, tpot, e2e := lat(0.1), lat(0.02), lat(2)
	s := sampleOf(e2e, 100, 60)
	s.lat[latTTFT], s.lat[latTPOT] = newSortedIndex(ttft), newSortedIndex(tpot)
	s.block = blockLength(ttft, tpot, e2e)
	s.tau = quantileTaus([numLatencies][]float64{ttft, tpot, e2e})
	st := report.Stats{Requests: n, Successes: n, SuccessRatio: 1, OutputTokensPerSecond: float64(n) * 100 / 60,
		TTFT: summarize(slices.Clone(ttft)), TPOT: summarize(slices.Clone(tpot)), E2E: summarize(slices.Clone(e2e))}
	c := report.CellResult{Key: "m/rate=5/mixed", Summary: st, CI: map[string]report.Interval{}}
	bs := bootstrapCell([]*sample{s}, 300, rng.Uint64(), 1)
	for f := range numFigures {
		if ci, ok := percentileInterval(bs[f], 0.95); ok && resolvable([]*sample{s}, f, 0.95) {
			c.CI[FigureNames[f]] = ci
		}
	}
	widenSuccessRatio(c.CI, []report.Stats{st}, 0.95)
	return c
}

// TestGateRatesOnCorrelatedRuns measures the gate's false-alarm and
// detection rates, default settings (threshold 5%, confidence 0.95, the
// default gated figures), over 100 seeded pairs of modelled runs of 600
// requests per correlation, their latencies correlated in time as a
// batching engine's are (on an H100 engine, 881 requests were worth 22
// independent ones: rho about 0.95): an unchanged rerun is regressed in at
// most 2% of pairs, a 50% slower server in at least 95%. Measured, the
// unchanged rerun regressed in (rho 0 / 0.5 / 0.9 / 0.95):
//
//	requests resampled one by one, each figure at 95%   2 / 1 / 50 / 66
//	+ blocks of consecutive requests                   2 / 1 / 17 / 31
//	+ quantile ranks drawn as n/tau requests            1 / 1 / 9 / 22
//	+ intervals held together over the gated figures    0 / 0 / 1 / 7
//	+ no interval for a quantile the requests
//	  cannot bound (p99 of 600 worth 30)                0 / 0 / 1 / 0
//
// and the 50% slower server in 100 / 100 / 100 / 97.
func TestGateRatesOnCorrelatedRuns(t *testing.T) {
	const pairs, n = 100, 600
	for _, rho := range []float64{0, 0.5, 0.9, 0.95} {
		rng := rand.New(rand.NewPCG(21, uint64(rho*100)))
		var falseAlarms, detected, okUnchanged int
		for p := 0; p < pairs; p++ {
			base := &report.Report{Cells: []report.CellResult{modelCell(rng, n, rho, 1)}}
			same := &report.Report{Cells: []report.CellResult{modelCell(rng, n, rho, 1)}}
			slow := &report.Report{Cells: []report.CellResult{modelCell(rng, n, rho, 1.5)}}
			c := Compare(base, same, "base.json", 0.05, DefaultGatedMetrics, 0.95)
			switch c.Verdict {
			case report.VerdictRegressed:
				falseAlarms++
				if falseAlarms == 1 {
					for _, cc := range c.Cells {
						if cc.Regressed {
							t.Logf("rho %.2f, a false alarm: %s %+.3f [%+.3f, %+.3f]", rho, cc.Figure, cc.Change, cc.ChangeLo, cc.ChangeHi)
						}
					}
				}
			case report.VerdictOK:
				okUnchanged++
			}
			if Compare(base, slow, "base.json", 0.05, DefaultGatedMetrics, 0.95).Verdict == report.VerdictRegressed {
				detected++
			}
		}
		t.Logf("rho %.2f: unchanged rerun regressed in %d of %d pairs (ok in %d), 50%% slower regressed in %d", rho, falseAlarms, pairs, okUnchanged, detected)
		if falseAlarms > pairs*2/100 {
			t.Errorf("rho %g: an unchanged rerun regressed in %d of %d pairs, want at most 2%%", rho, falseAlarms, pairs)
		}
		if detected < pairs*95/100 {
			t.Errorf("rho %g: a 50%% slower server regressed in %d of %d pairs, want at least 95%%", rho, detected, pairs)
		}
	}
}
