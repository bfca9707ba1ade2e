package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// gateConfig is a one-cell bench of the simulator sim: the matrix's load
// and shape lines as given, one repeat of d measured, the default gate
// (bench.regression unset).
func gateConfig(sim *simTarget, matrix string, d time.Duration) string {
	return targetsYAML([]string{"sim"}, []*simTarget{sim}) + fmt.Sprintf(`
bench:
  seed: 3
  matrix:
    %s
  warmup: 300ms
  duration: %s
  repeats: 1
  prompt_set_size: 64
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 500}
`, matrix, d)
}

// setSlowdown sets the simulator's fault knob: every engine step that
// starts after it lasts factor times as long.
func setSlowdown(t *testing.T, sim *simTarget, factor float64) {
	t.Helper()
	f := sim.Sim.Faults()
	f.Slowdown = factor
	if err := sim.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
}

// checkGate holds a run's comparison, its console and its exit status to
// the gate's rule: a gated figure whose interval reaches past the
// threshold (its worsening's upper end at or beyond it), or that has no
// interval, is never ok, in report.json or on the console; every gated
// figure's console line starts with its verdict; the exit status is the
// worst verdict's (regressed 3, inconclusive 6, ok 0). It returns each
// gated figure's verdict by name.
func checkGate(t *testing.T, stdout string, c *report.Comparison, code int) map[string]report.Verdict {
	t.Helper()
	if c == nil {
		t.Fatalf("no comparison in report.json; stdout:\n%s", stdout)
	}
	lines := strings.Split(stdout, "\n")
	got := map[string]report.Verdict{}
	var worst report.Verdict
	for _, cc := range c.Cells {
		if !cc.Gated {
			continue
		}
		worse := float64(cc.ChangeHi)
		if cc.HigherIsBetter {
			worse = -float64(cc.ChangeLo)
		}
		unsure := !cc.ChangeLo.Valid() || worse >= c.Threshold
		name := " " + cc.Cell + " " + cc.Figure + ":"
		printed := ""
		for _, l := range lines {
			if strings.Contains(l, name) {
				printed = l
			}
		}
		if unsure && (cc.Verdict == report.VerdictOK || strings.HasPrefix(printed, "ok ")) {
			t.Errorf("%s %s: its interval %v..%v reaches past %v, yet ok: %q", cc.Cell, cc.Figure, cc.ChangeLo, cc.ChangeHi, c.Threshold, printed)
		}
		if !strings.HasPrefix(printed, string(cc.Verdict)+" ") {
			t.Errorf("%s %s: verdict %s in report.json, console %q", cc.Cell, cc.Figure, cc.Verdict, printed)
		}
		got[cc.Figure] = cc.Verdict
		worst = worst.Worse(cc.Verdict)
	}
	if worst != c.Verdict {
		t.Errorf("the run's verdict %s, its figures' worst %s", c.Verdict, worst)
	}
	if want := map[report.Verdict]int{report.VerdictOK: ExitOK, report.VerdictInconclusive: ExitInconclusive, report.VerdictRegressed: ExitRegression}[worst]; code != want {
		t.Errorf("exit %d, want %d for a %s run", code, want, worst)
	}
	return got
}

// TestBaselineRegressionAccuracy: the gate on the simulator. A 50% slower
// decode (20 ms engine steps, then 30 ms: the fault knob's slowdown 1.5)
// over cells of 20 s of the simulator's time, Poisson arrivals at 25 req/s
// of its time, is regressed, exit 3, in the figures the steps make (TPOT,
// E2E; the throughput, the offered load's in an open loop, is not), with
// the success ratio ok; the baseline's server run again is not regressed.
// The simulator runs at time scale 0.5, so a cell of 20 s of its time is
// 10 s of the test's (steps of 10 and 15 ms, 50 req/s). Its verdicts are
// latencies compared across real-time runs, so it is a timing test (make
// test-timing); the rule on known figures is TestGateVerdict's and
// TestCompare's. The simulator runs in this process, so CPU contention
// delays its steps too, and a tail moved by it between two runs is a
// change the bootstrap's intervals, from each run's own requests, do not
// cover: beside other work on 2 cores (load average 2.5 to 3.7) the
// rerun's E2E, TTFT or TPOT p99 regressed in 2 of 7 runs at scale 0.25
// (5 ms steps), in none of 6 at 0.5. Under a closed loop (concurrency 8)
// the requests lock into the steps' phase and a rerun's p99 moved by a
// whole step: 2 of 7 runs regressed at scale 0.5, load 1 to 2.
func TestBaselineRegressionAccuracy(t *testing.T) {
	testenv.Timing(t)
	sim := startSim(t, 20*time.Millisecond, 0.5, 0)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "b.yml", gateConfig(sim, "rates: [50]\n    shapes: [{name: s12, input_tokens: 32, output_tokens: 12}]", 10*time.Second))
	base := filepath.Join(dir, "base")
	if code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+base); code != ExitOK {
		t.Fatalf("baseline run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	baseJSON := filepath.Join(base, JSONFile)

	setSlowdown(t, sim, 1.5)
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+filepath.Join(dir, "slow"), "--baseline="+baseJSON)
	if code != ExitRegression {
		t.Errorf("50%% slower: exit %d, want %d\n%s\n%s", code, ExitRegression, stdout, stderr)
	}
	slow := readReport(t, filepath.Join(dir, "slow")).Baseline
	v := checkGate(t, stdout, slow, code)
	if v["tpot_p50"] != report.VerdictRegressed || v["ttft_p50"] != report.VerdictRegressed {
		t.Errorf("50%% slower: tpot_p50 %s, ttft_p50 %s, want regressed", v["tpot_p50"], v["ttft_p50"])
	}
	// A p99 rests on the 5 slowest of 500 requests, which come in bursts
	// (the steps that many requests shared): when the run's correlation
	// leaves them worth fewer than 380 independent requests it cannot
	// bound the p99 (no interval, inconclusive: resolvable); otherwise the
	// p99 is regressed. Never ok.
	for _, cc := range slow.Cells {
		if cc.Figure == "tpot_p99" || cc.Figure == "e2e_p99" {
			if cc.Verdict != report.VerdictRegressed && (cc.Verdict != report.VerdictInconclusive || cc.ChangeLo.Valid()) {
				t.Errorf("50%% slower: %s %s (interval %v..%v), want regressed, or inconclusive for want of an interval", cc.Figure, cc.Verdict, cc.ChangeLo, cc.ChangeHi)
			}
		}
	}
	if v["success_ratio"] != report.VerdictOK {
		t.Errorf("every request succeeded in both runs: success_ratio %s, want ok", v["success_ratio"])
	}
	if !strings.Contains(stdout, "\nREGRESSION sim/rate=50/s12: tpot_p50\n") {
		t.Errorf("the regressed figure is not named:\n%s", stdout)
	}
	// The Markdown a CI job posts carries the verdict and the regressed
	// figures.
	if md, err := os.ReadFile(filepath.Join(dir, "slow", render.MarkdownFile)); err != nil || !strings.Contains(string(md), "**REGRESSED**: ") ||
		!strings.Contains(string(md), "| regressed | sim/rate=50/s12 | tpot_p50 |") {
		t.Errorf("report.md (%v) lacks the verdict:\n%s", err, md)
	}
	for _, cc := range slow.Cells {
		if cc.Figure == "tpot_p50" && (cc.Change < 0.4 || cc.Change > 0.6) {
			t.Errorf("tpot p50 change %.3f, want about +0.5", cc.Change)
		}
	}

	setSlowdown(t, sim, 1)
	code, stdout, stderr = runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+filepath.Join(dir, "again"), "--baseline="+baseJSON)
	again := readReport(t, filepath.Join(dir, "again")).Baseline
	checkGate(t, stdout, again, code)
	if code == ExitRegression || again.Verdict == report.VerdictRegressed {
		t.Errorf("unchanged: exit %d, verdict %s, want not regressed\n%s\n%s", code, again.Verdict, stdout, stderr)
	}
}

// TestGateNeverOKWhileUnsure: a 10% slower decode over short cells (4 s of
// the simulator's time, 2 s of the test's at time scale 0.5; Poisson
// arrivals at 8 req/s of 4 to 64 output tokens, some 16 requests a cell)
// leaves wide intervals: whatever the runs measure, no gated figure whose
// interval reaches past 5% is called ok, and the exit status is the worst
// verdict's. Before the gate had three outcomes, this run printed "ok
// sim/rate=8/mixed e2e_p99: 626.22 ms -> 691.58 ms (+10.4%, interval
// -3.9%..+26.9%)" and exited 0 (3 of 3 runs; the seeded lengths repeat),
// as the issue saw +11.7% with -11%..+41%; and E2E p99 alone was gated.
func TestGateNeverOKWhileUnsure(t *testing.T) {
	t.Parallel() // mostly waits on real time
	sim := startSim(t, 20*time.Millisecond, 0.5, 0)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "b.yml", gateConfig(sim, "rates: [8]\n    shapes: [{name: mixed, input_tokens: 32, output_tokens: {dist: uniform, min: 4, max: 64}}]", 2*time.Second))
	base := filepath.Join(dir, "base")
	if code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+base); code != ExitOK {
		t.Fatalf("baseline run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	setSlowdown(t, sim, 1.1)
	code, stdout, _ := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+filepath.Join(dir, "slow"), "--baseline="+filepath.Join(base, JSONFile))
	c := readReport(t, filepath.Join(dir, "slow")).Baseline
	v := checkGate(t, stdout, c, code)
	for _, f := range DefaultGatedMetrics {
		if _, ok := v[f]; !ok {
			t.Errorf("%s: not judged by the default gate (judged: %v)", f, v)
		}
	}
	if code == ExitOK {
		t.Errorf("a 10%% slower decode passed the gate:\n%s", stdout)
	}
}
