package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// historyCell is a cell of a synthetic report: its TPOT p50 and that
// figure's interval, its throughput without one.
func historyCell(target, shape string, tpot, lo, hi float64) report.CellResult {
	c := report.CellResult{Key: target + "/rate=4/" + shape, Target: target, Load: report.Load{Kind: report.LoadRate, Value: 4}, Shape: shape,
		CI: map[string]report.Interval{}}
	c.Summary.TPOT = report.Dist{Count: 100, P50: tpot, P90: tpot * 1.2, P99: tpot * 1.5}
	c.Summary.OutputTokensPerSecond = 100
	if lo > 0 {
		c.CI["tpot_p50"] = report.Interval{Lo: lo, Hi: hi}
	}
	return c
}

func historyReport(started time.Time, promptSet string, cells ...report.CellResult) *report.Report {
	r := &report.Report{Schema: report.Schema, Cells: cells}
	r.Environment.Started, r.Environment.Finished = started, started.Add(time.Minute)
	r.Environment.PromptSetSHA256, r.Environment.ConfigSHA256 = promptSet, "c0ffee"
	r.Ranking.Confidence = 0.95
	return r
}

// TestCompareReports holds compareReports to the gate's rule on known
// figures, run by run against the first, with cells matched by target,
// load and shape and the others listed.
func TestCompareReports(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC)
	reps := []*report.Report{
		historyReport(t0, "aaa", historyCell("sim", "chat", 0.020, 0.0198, 0.0202), historyCell("sim", "gone", 0.02, 0.0198, 0.0202)),
		historyReport(t0.Add(24*time.Hour), "aaa", historyCell("sim", "chat", 0.0201, 0.0199, 0.0203)),
		historyReport(t0.Add(48*time.Hour), "bbb", historyCell("sim", "chat", 0.030, 0.0297, 0.0303), historyCell("sim", "new", 0.02, 0.0198, 0.0202)),
		historyReport(t0.Add(72*time.Hour), "aaa", historyCell("sim", "chat", 0.015, 0.0148, 0.0152)),
		historyReport(t0.Add(96*time.Hour), "aaa", historyCell("sim", "chat", 0.021, 0.017, 0.025)),
		historyReport(t0.Add(120*time.Hour), "aaa", historyCell("sim", "chat", 0.021, 0, 0)),
	}
	files := []string{"r1.json", "r2.json", "r3.json", "r4.json", "r5.json", "r6.json"}
	h := compareReports(reps, files, 0.05, 0)
	if h.Confidence != 0.95 {
		t.Errorf("confidence %v, want the first report's 0.95", h.Confidence)
	}
	fig := historyFigureOf(t, h, "sim", "chat", "tpot_p50")
	want := []string{"", report.HistorySame, report.HistoryWorse, report.HistoryBetter, report.HistoryInconclusive, report.HistoryInconclusive}
	for k, w := range want {
		if fig.Verdicts[k] != w {
			t.Errorf("run %d: verdict %q, want %q (change %v, interval %v)", k+1, fig.Verdicts[k], w, fig.Changes[k], fig.ChangeIntervals[k])
		}
	}
	if fig.ChangeIntervals[5] != nil || fig.Intervals[5] != nil {
		t.Errorf("a run without an interval has one: %v, %v", fig.Intervals[5], fig.ChangeIntervals[5])
	}
	if c := float64(fig.Changes[2]); c < 0.499 || c > 0.501 {
		t.Errorf("run 3's change %v, want +0.5", c)
	}
	// The throughput has no interval: never better, worse or same.
	if v := historyFigureOf(t, h, "sim", "chat", "output_tokens_per_second").Verdicts[1]; v != report.HistoryInconclusive {
		t.Errorf("a figure without an interval: %q, want inconclusive", v)
	}
	// A run without the cell: null values and no verdict.
	gone := historyFigureOf(t, h, "sim", "gone", "tpot_p50")
	if gone.Values[1].Valid() || gone.Verdicts[1] != "" {
		t.Errorf("a cell missing from run 2: value %v, verdict %q", gone.Values[1], gone.Verdicts[1])
	}
	for _, u := range []string{"sim/rate=4/gone: not in r2.json", "sim/rate=4/new: only in r3.json"} {
		if !containsPrefix(h.Unmatched, u) {
			t.Errorf("unmatched %q lacks %q", h.Unmatched, u)
		}
	}
	if !containsPrefix(h.Warnings, "r3.json: the prompt set differs") || len(h.Warnings) != 1 {
		t.Errorf("warnings %q, want the prompt set of r3.json alone", h.Warnings)
	}
}

// TestCompareOneRuleWithTheGate: for two runs, compareReports's change,
// interval and worse are the gate's (Compare) when every figure is gated.
func TestCompareOneRuleWithTheGate(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC)
	a := historyReport(t0, "aaa", historyCell("sim", "chat", 0.020, 0.0195, 0.0205))
	for _, tpot := range []float64{0.0203, 0.0212, 0.024, 0.017} {
		b := historyReport(t0.Add(time.Hour), "aaa", historyCell("sim", "chat", tpot, tpot*0.975, tpot*1.025))
		gate := Compare(a, b, "a.json", 0.05, FigureNames[:], 0.95)
		h := compareReports([]*report.Report{a, b}, []string{"a", "b"}, 0.05, 0.95)
		fig := historyFigureOf(t, h, "sim", "chat", "tpot_p50")
		for _, cc := range gate.Cells {
			if cc.Figure != "tpot_p50" {
				continue
			}
			iv := fig.ChangeIntervals[1]
			if iv == nil || iv.Lo != float64(cc.ChangeLo) || iv.Hi != float64(cc.ChangeHi) {
				t.Errorf("tpot %v: interval %v, the gate's %v..%v", tpot, iv, cc.ChangeLo, cc.ChangeHi)
			}
			if (cc.Verdict == report.VerdictRegressed) != (fig.Verdicts[1] == report.HistoryWorse) {
				t.Errorf("tpot %v: the gate says %s, the comparison %s", tpot, cc.Verdict, fig.Verdicts[1])
			}
		}
	}
}

func historyFigureOf(t *testing.T, h *report.History, target, shape, name string) *report.HistoryFigure {
	t.Helper()
	for i := range h.Cells {
		c := &h.Cells[i]
		if c.Target != target || c.Shape != shape {
			continue
		}
		for j := range c.Figures {
			if c.Figures[j].Name == name {
				return &c.Figures[j]
			}
		}
	}
	t.Fatalf("no %s of %s/%s in the comparison", name, target, shape)
	return nil
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func writeReportFile(t *testing.T, dir, name string, r *report.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := render.WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	return writeTestFile(t, dir, name, b.String())
}

// TestCompareCommand: the command's outputs and exit statuses.
func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC)
	a := writeReportFile(t, dir, "a.json", historyReport(t0, "aaa", historyCell("sim", "chat", 0.020, 0.0198, 0.0202)))
	b := writeReportFile(t, dir, "b.json", historyReport(t0.Add(time.Hour), "aaa", historyCell("sim", "chat", 0.030, 0.0297, 0.0303)))
	out := filepath.Join(dir, "cmp.json")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "compare", a, b, "--output="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "tpot_p50") || !strings.Contains(stdout, "+50.0% (") || !strings.Contains(stdout, ") worse") {
		t.Errorf("the table lacks tpot_p50's change and verdict:\n%s", stdout)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Cells []struct {
			Figures []struct {
				Name      string             `json:"name"`
				Values    []*float64         `json:"values"`
				Intervals []*report.Interval `json:"intervals"`
				Verdicts  []string           `json:"verdicts"`
			} `json:"figures"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("--output: %v\n%s", err, raw)
	}
	found := false
	for _, f := range j.Cells[0].Figures {
		if f.Name == "tpot_p50" {
			found = true
			if len(f.Values) != 2 || *f.Values[1] != 0.030 || f.Intervals[0] == nil || f.Verdicts[0] != "" || f.Verdicts[1] != report.HistoryWorse {
				t.Errorf("--output's tpot_p50: %s", raw)
			}
		}
	}
	if !found {
		t.Errorf("--output lacks tpot_p50:\n%s", raw)
	}
	for _, format := range []string{"markdown", "html"} {
		code, stdout, stderr := runCLI(t, context.Background(), "bench", "compare", "--format="+format, a, b)
		if code != ExitOK || !strings.Contains(stdout, "tpot_p50") || !strings.Contains(stdout, "worse") {
			t.Errorf("--format=%s: exit %d\n%s\n%s", format, code, stdout, stderr)
		}
		if format == "html" && strings.Count(stdout, "<svg") < 2 {
			t.Errorf("--format=html draws %d charts, want one a figure", strings.Count(stdout, "<svg"))
		}
	}
	if code, _, stderr := runCLI(t, context.Background(), "bench", "compare", a); code != ExitUsage {
		t.Errorf("one report: exit %d, want %d\n%s", code, ExitUsage, stderr)
	}
	if code, _, stderr := runCLI(t, context.Background(), "bench", "compare", a, filepath.Join(dir, "missing.json")); code != ExitError {
		t.Errorf("a missing report: exit %d, want %d\n%s", code, ExitError, stderr)
	}
}

// TestCompareSimulatorAccuracy: three short benches of the simulator at
// time scale 1, its decode steps 20 ms, 20 ms, then 30 ms (slowdown 1.5):
// `bench compare` exits 0, and the second run's TPOT p50 is not worse
// than the first's while the third's is. The runs' TPOT rests on the
// simulator's steps timed in this process, which a busy machine
// lengthens: a timing test.
func TestCompareSimulatorAccuracy(t *testing.T) {
	testenv.Timing(t)
	sim := startSim(t, 20*time.Millisecond, 1, 0)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "b.yml", gateConfig(sim, "rates: [40]\n    shapes: [{name: s12, input_tokens: 32, output_tokens: 12}]", 4*time.Second))
	var reports []string
	for i, slowdown := range []float64{1, 1, 1.5} {
		setSlowdown(t, sim, slowdown)
		out := filepath.Join(dir, "run"+string(rune('1'+i)))
		if code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+cfg, "--output.dir="+out); code != ExitOK {
			t.Fatalf("run %d: exit %d\n%s\n%s", i+1, code, stdout, stderr)
		}
		reports = append(reports, filepath.Join(out, JSONFile))
	}
	out := filepath.Join(dir, "cmp.json")
	code, stdout, stderr := runCLI(t, context.Background(), append([]string{"bench", "compare", "--output=" + out}, reports...)...)
	if code != ExitOK {
		t.Fatalf("bench compare: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("bench compare:\n%s", stdout)
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var h report.History
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	fig := historyFigureOf(t, &h, "sim", "s12", "tpot_p50")
	if fig.Verdicts[1] == report.HistoryWorse {
		t.Errorf("the rerun's tpot_p50 is worse: %v (interval %v)", fig.Changes[1], fig.ChangeIntervals[1])
	}
	if fig.Verdicts[2] != report.HistoryWorse {
		t.Errorf("30 ms steps: tpot_p50 %s, want worse: %v (interval %v)", fig.Verdicts[2], fig.Changes[2], fig.ChangeIntervals[2])
	}
}
