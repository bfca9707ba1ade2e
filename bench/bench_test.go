package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"go.uber.org/goleak"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The end-to-end tests run the bench command against embedded simulators.
// Their timing model is exact: a request of m output tokens takes m engine
// steps of DecodeStep × TimeScale (plus its prefill step), so a simulator
// with a 10 ms step is twice as fast as one with 20 ms. At TimeScale 0.5 the
// steps are 5 and 10 ms of wall time, long against the scheduler's noise
// on a shared 2-core machine, and the runs stay short.

func readReport(t *testing.T, dir string) *report.Report {
	t.Helper()
	r, err := report.ReadJSON(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRankingTwoSpeedsAccuracy: a bench against two simulators of known different
// speeds ranks the faster first, not tied, with every figure showing the
// ratio of their step times; the HTML and CSV show the JSON's numbers.
// Its figures are the real-time simulators' (TPOT within 10% of the step),
// so it is a timing test (make test-timing).
func TestRankingTwoSpeedsAccuracy(t *testing.T) {
	testenv.Timing(t)
	fast := startSim(t, 20*time.Millisecond, 1, 0)
	slow := startSim(t, 40*time.Millisecond, 1, 0)
	dir := t.TempDir()
	cfg := targetsYAML([]string{"slow", "fast"}, []*simTarget{slow, fast}) + `
bench:
  seed: 7
  matrix:
    process: constant
    rates: [10]
    concurrencies: [2]
    shapes: [{name: short, input_tokens: 32, output_tokens: 8}]
  warmup: 300ms
  duration: 1s
  repeats: 3
  prompt_set_size: 50
  stability: {window: 500ms, windows: 2, tolerance: 0.25, min_requests: 2}
  sampling: {ignore_eos: true}
  slo: {e2e: 250ms}
  ranking: {resamples: 300}
  known_answers:
    - {prompt: "name a word", expect: '\w+', max_tokens: 4}
    - {prompt: "say ZZZ", expect: '^ZZZ$', max_tokens: 4}
`
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+writeTestFile(t, dir, "bench.yml", cfg), "--output.dir="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)

	// The leaderboard.
	if len(r.Ranking.Entries) != 2 {
		t.Fatalf("entries: %+v", r.Ranking.Entries)
	}
	first, second := r.Ranking.Entries[0], r.Ranking.Entries[1]
	if first.Target != "fast" || second.Target != "slow" {
		t.Fatalf("ranking %s, %s; want fast, slow\n%s", first.Target, second.Target, stdout)
	}
	if first.Tied || second.Tied || first.Rank != 1 || second.Rank != 2 || first.RankHi != 1 || second.RankLo != 2 {
		t.Errorf("not a clear ranking: %+v / %+v", first, second)
	}
	if !(first.ScoreCI.Lo > second.ScoreCI.Hi) {
		t.Errorf("score intervals overlap: %+v / %+v", first.ScoreCI, second.ScoreCI)
	}
	if !strings.Contains(stdout, " 1  fast") {
		t.Errorf("summary does not show fast first:\n%s", stdout)
	}

	// The figures follow the simulators' step times: TPOT is the step, and
	// the slow target's is twice the fast one's (20 ms and 40 ms; stated
	// tolerance 10%, for the client's read delays).
	cells := map[string]*report.CellResult{}
	for i := range r.Cells {
		cells[r.Cells[i].Key] = &r.Cells[i]
	}
	for _, load := range []string{"rate=10", "concurrency=2"} {
		f, s := cells["fast/"+load+"/short"], cells["slow/"+load+"/short"]
		if f == nil || s == nil {
			t.Fatalf("cells missing: %v", slices.Collect(func(yield func(string) bool) {
				for k := range cells {
					if !yield(k) {
						return
					}
				}
			}))
		}
		for _, c := range []struct {
			cell *report.CellResult
			step float64
		}{{f, 0.020}, {s, 0.040}} {
			if got := c.cell.Summary.TPOT.P50; math.Abs(got-c.step)/c.step > 0.1 {
				t.Errorf("%s: TPOT p50 %.5f s, want %.3f s ± 10%%", c.cell.Key, got, c.step)
			}
			if c.cell.Summary.Successes == 0 || c.cell.Summary.Outcomes["success"] != c.cell.Summary.Successes {
				t.Errorf("%s: outcomes %v", c.cell.Key, c.cell.Summary.Outcomes)
			}
			if len(c.cell.Repeats) != 3 {
				t.Errorf("%s: %d repeats", c.cell.Key, len(c.cell.Repeats))
			}
		}
		if ratio := s.Summary.E2E.P50 / f.Summary.E2E.P50; ratio < 1.8 || ratio > 2.2 {
			t.Errorf("%s: E2E p50 slow/fast = %.2f, want about 2", load, ratio)
		}
	}
	// Open loop at 10 req/s: both targets keep up, so both deliver the
	// offered 10 × 8 tokens/s; closed loop: the faster delivers about twice.
	for _, k := range []string{"fast/rate=10/short", "slow/rate=10/short"} {
		if got := cells[k].Summary.OutputTokensPerSecond; math.Abs(got-80)/80 > 0.1 {
			t.Errorf("%s: output %.1f tokens/s, want 80 ± 10%%", k, got)
		}
	}
	// The SLO (250 ms) is met by every fast request and no slow one (about
	// 160 ms and 320 ms).
	if g := cells["fast/rate=10/short"].Summary.GoodputRatio; g != 1 {
		t.Errorf("fast goodput ratio %v, want 1", g)
	}
	if g := cells["slow/rate=10/short"].Summary.GoodputRatio; g != 0 {
		t.Errorf("slow goodput ratio %v, want 0", g)
	}
	if ratio := cells["fast/concurrency=2/short"].Summary.OutputTokensPerSecond / cells["slow/concurrency=2/short"].Summary.OutputTokensPerSecond; ratio < 1.8 || ratio > 2.2 {
		t.Errorf("closed-loop throughput fast/slow = %.2f, want about 2", ratio)
	}
	// Constant arrivals at 10 req/s over a measured second: 10 requests per
	// repeat (the stability check may extend it by whole windows).
	if c := cells["fast/rate=10/short"]; c.Repeats[0].Stats.Requests != int(10*c.Repeats[0].Stats.WindowSeconds+0.5) {
		t.Errorf("requests %d over %v s at 10 req/s", c.Repeats[0].Stats.Requests, c.Repeats[0].Stats.WindowSeconds)
	}
	// Both servers keep up: no cell unstable (a second of 10 requests is
	// too few to call stable: "not judged", with the span it needs).
	for _, c := range r.Cells {
		if c.Stability == report.StateUnstable {
			t.Errorf("%s: unstable: %+v", c.Key, c.Repeats[0].Stability)
		}
		if _, ok := c.CI["e2e_p50"]; !ok {
			t.Errorf("%s: no interval for e2e_p50", c.Key)
		}
		// A p99 of some 10 requests a repeat is past what they bound
		// (resolvable: it needs about 380): no interval.
		if ci, ok := c.CI["e2e_p99"]; ok {
			t.Errorf("%s: an interval %+v for the p99 of %d requests", c.Key, ci, c.Summary.Requests)
		}
	}

	// Known answers: one check passes, one cannot.
	if len(r.Accuracy) != 2 || r.Accuracy[0].Passed != 1 || r.Accuracy[0].Total != 2 {
		t.Errorf("accuracy %+v", r.Accuracy)
	}
	if !slices.Contains(r.Ranking.Components, "accuracy") || slices.Contains(r.Ranking.Components, "memory") {
		t.Errorf("components %v", r.Ranking.Components)
	}
	// The environment.
	env := r.Environment
	if env.ConfigSHA256 == "" || len(env.PromptSets) != 2 || env.PromptSets[0].SHA256 != env.PromptSets[1].SHA256 {
		t.Errorf("environment prompt sets %+v", env.PromptSets)
	}
	if env.Targets[0].Engine != "vllm" || env.Targets[0].EngineVersion != simulator.Version || env.Targets[0].ServedModel != "sim-model" {
		t.Errorf("engine info %+v", env.Targets[0])
	}
	if r.GPU.Available || r.GPU.Note == "" {
		t.Errorf("gpu %+v", r.GPU)
	}

	checkHTMLMatchesJSON(t, filepath.Join(out, HTMLFile), r)
	checkCSVMatchesJSON(t, filepath.Join(out, CSVFile), r)
}

var (
	cellTableRE = regexp.MustCompile(`(?s)<table class="cell" data-cell="([^"]+)">(.*?)</table>`)
	distRowRE   = regexp.MustCompile(`(?s)<tr data-dist="(\w+)">(.*?)</tr>`)
	tdRE        = regexp.MustCompile(`<td data-q="(\w+)" data-value="([^"]*)"(?: class="thin" title="([^"]*)")?>([^<]*)(?:<sup>†</sup>)?</td>`)
	boardRowRE  = regexp.MustCompile(`<tr class="leaderboard-row[^"]*" data-target="([^"]+)" data-rank="(\d+)" data-score="([^"]+)" data-tied="(\w+)" data-below-min-success="(\w+)">`)
)

// checkHTMLMatchesJSON reads every figure of the HTML report back and
// compares it with the JSON's: the exact value, and the text shown.
func checkHTMLMatchesJSON(t *testing.T, path string, r *report.Report) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	cells := map[string]*report.CellResult{}
	for i := range r.Cells {
		cells[r.Cells[i].Key] = &r.Cells[i]
	}
	tables := cellTableRE.FindAllStringSubmatch(html, -1)
	if len(tables) != len(r.Cells) {
		t.Fatalf("HTML has %d cell tables, JSON %d cells", len(tables), len(r.Cells))
	}
	checked := 0
	for _, tm := range tables {
		c := cells[tm[1]]
		if c == nil {
			t.Fatalf("HTML cell %q not in the JSON", tm[1])
		}
		dists := map[string]report.Dist{"ttft": c.Summary.TTFT, "tpot": c.Summary.TPOT, "itl": c.Summary.ITL, "e2e": c.Summary.E2E, "lag": c.Summary.ScheduleLag}
		for _, row := range distRowRE.FindAllStringSubmatch(tm[2], -1) {
			for _, td := range tdRE.FindAllStringSubmatch(row[2], -1) {
				var want float64
				var text string
				if row[1] == "throughput" {
					want = c.Summary.OutputTokensPerSecond
					text = report.FormatNumber(want)
				} else {
					d := dists[row[1]]
					want = map[string]float64{"count": float64(d.Count), "mean": d.Mean, "p50": d.P50, "p90": d.P90,
						"p95": d.P95, "p99": d.P99, "p99_9": d.P999, "max": d.Max}[td[1]]
					text = report.FormatSeconds(want)
					if td[1] == "count" {
						text = strconv.Itoa(d.Count)
					}
				}
				if td[2] != report.FormatFloat(want) || td[4] != render.Escape(text) {
					t.Errorf("%s %s %s: HTML %s (%q), JSON %s (%q)", c.Key, row[1], td[1], td[2], td[4], report.FormatFloat(want), text)
				}
				// A quantile from fewer samples than it needs says so.
				if row[1] != "throughput" {
					if note := report.ThinQuantile(td[1], dists[row[1]].Count); td[3] != render.Escape(note) {
						t.Errorf("%s %s %s: caveat %q, want %q", c.Key, row[1], td[1], td[3], note)
					}
				}
				checked++
			}
		}
	}
	if checked < len(r.Cells)*20 {
		t.Errorf("only %d figures checked", checked)
	}
	rows := boardRowRE.FindAllStringSubmatch(html, -1)
	if len(rows) != len(r.Ranking.Entries) {
		t.Fatalf("leaderboard rows %d, entries %d", len(rows), len(r.Ranking.Entries))
	}
	for i, row := range rows {
		e := r.Ranking.Entries[i]
		if row[1] != e.Target || row[2] != strconv.Itoa(e.Rank) || row[3] != report.FormatFloat(e.Score) || row[4] != strconv.FormatBool(e.Tied) ||
			row[5] != strconv.FormatBool(e.BelowMinSuccess) {
			t.Errorf("leaderboard row %d: %v, JSON %+v", i, row[1:], e)
		}
	}
	for _, re := range []string{`src=`, `href=`, `url(`, `@import`, `<script`, `<link`} {
		if strings.Contains(html, re) {
			t.Errorf("the report references %q: it must be self-contained", re)
		}
	}
}

func checkCSVMatchesJSON(t *testing.T, path string, r *report.Report) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(r.Cells)+1 || lines[0] != strings.Join(report.CSVHeader, ",") {
		t.Fatalf("CSV: %d lines, header %q", len(lines), lines[0])
	}
	col := map[string]int{}
	for i, h := range report.CSVHeader {
		col[h] = i
	}
	for i, c := range r.Cells {
		f := strings.Split(lines[i+1], ",")
		for name, want := range map[string]string{
			"cell": c.Key, "e2e_p99_seconds": report.FormatFloat(c.Summary.E2E.P99), "ttft_p50_seconds": report.FormatFloat(c.Summary.TTFT.P50),
			"output_tokens_per_second": report.FormatFloat(c.Summary.OutputTokensPerSecond), "requests": strconv.Itoa(c.Summary.Requests),
		} {
			if f[col[name]] != want {
				t.Errorf("CSV %s %s = %s, JSON %s", c.Key, name, f[col[name]], want)
			}
		}
	}
}

// promptsOf returns the prompts of recorded completions bodies, in the
// order they were received.
func promptsOf(t *testing.T, bodies []string) []string {
	t.Helper()
	var out []string
	for _, b := range bodies {
		var req struct {
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
		}
		if err := json.Unmarshal([]byte(b), &req); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
		out = append(out, fmt.Sprintf("%d|%s", req.MaxTokens, req.Prompt))
	}
	return out
}

// TestSameSeedSamePrompts: two runs with the same seed send byte-identical
// prompts (the server receives the same prompt for the same arrival) and
// report the same prompt-set SHA-256; another seed changes both. Arrivals
// are matched by their X-Request-Id (cell, repeat, arrival number): a busy
// machine may drop an overdue arrival at the wire ceiling, or extend the
// warm-up by an arrival, and the seed fixes what each arrival sends, not how
// many arrivals a run reaches.
func TestSameSeedSamePrompts(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	run := func(seed int) (*report.Report, map[string]string) {
		sim := startSim(t, 2*time.Millisecond, 0.5, 0)
		dir := t.TempDir()
		cfg := targetsYAML([]string{"sim"}, []*simTarget{sim}) + fmt.Sprintf(`
bench:
  seed: %d
  matrix:
    process: constant
    rates: [20]
    shapes: [{input_tokens: {dist: uniform, min: 20, max: 60}, output_tokens: {dist: uniform, min: 2, max: 6}}]
  warmup: 100ms
  duration: 500ms
  repeats: 1
  prompt_set_size: 64
  stability: {enabled: false}
  ranking: {resamples: 100}
`, seed)
		out := filepath.Join(dir, "out")
		code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+writeTestFile(t, dir, "b.yml", cfg), "--output.dir="+out)
		if code != ExitOK {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		byID := map[string]string{}
		for i, p := range promptsOf(t, sim.bodies()) {
			byID[sim.requestIDs()[i]] = p
		}
		return readReport(t, out), byID
	}
	r1, p1 := run(11)
	r2, p2 := run(11)
	r3, p3 := run(12)
	// Constant arrivals every 50 ms over 600 ms: 11 requests (the 12th is
	// due at the end and not sent), fewer where one was dropped.
	same, differ, common := 0, 0, 0
	for id, p := range p1 {
		if q, ok := p2[id]; ok {
			common++
			if p != q {
				t.Errorf("same seed, arrival %s: prompt %q, then %q", id, p, q)
			}
		}
		if q, ok := p3[id]; ok {
			if p == q {
				same++
			} else {
				differ++
			}
		}
	}
	if len(p1) < 11/2 || common < 11/2 {
		t.Errorf("the runs sent %d and %d requests, %d of the same arrivals: want most of 11", len(p1), len(p2), common)
	}
	if differ == 0 {
		t.Errorf("another seed sent the same prompts (%d arrivals alike)", same)
	}
	if r1.Environment.PromptSetSHA256 != r2.Environment.PromptSetSHA256 || r1.Environment.PromptSets[0].SHA256 != r2.Environment.PromptSets[0].SHA256 {
		t.Errorf("same seed, different SHA-256: %s %s", r1.Environment.PromptSetSHA256, r2.Environment.PromptSetSHA256)
	}
	if r1.Environment.PromptSetSHA256 == r3.Environment.PromptSetSHA256 {
		t.Errorf("another seed, same SHA-256")
	}
	if r1.Environment.PromptSets[0].SHA256First64 == "" || r1.Environment.PromptSets[0].Tokenizer != "server" {
		t.Errorf("prompt set info %+v", r1.Environment.PromptSets[0])
	}
}

// TestStabilityNeverAgrees: an overloaded server (one batch slot, arrivals
// twice its capacity) queues without bound: the rule calls the repeat
// unstable on the queue's evidence (the requests in flight grew), at the
// end of its base windows or, when they hold too little evidence yet (a
// busy machine), of an extension within max_duration, and a cell is never
// both stable and overloaded. Windows of a second, some 20 completions each: a
// window of 300 ms held none on a starved CPU (the race detector beside
// tool builds), and its median was NaN.
func TestStabilityNeverAgrees(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	cfg := simulator.DefaultConfig()
	cfg.TimeScale, cfg.DecodeStep, cfg.DecodePerSeq, cfg.MaxNumSeqs = 0.5, 10*time.Millisecond, 0, 1
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := wrapSim(t, sim)
	dir := t.TempDir()
	yml := targetsYAML([]string{"overloaded"}, []*simTarget{st}) + `
bench:
  matrix:
    process: constant
    rates: [40]
    shapes: [{input_tokens: 8, output_tokens: 10}]
  warmup: 0s
  duration: 2s
  repeats: 1
  prompt_set_size: 16
  stability: {window: 1s, windows: 2, tolerance: 0.1, max_duration: 4s, min_requests: 2}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	out, stdout := runBenchOK(t, dir, yml)
	c := readReport(t, out).Cells[0]
	s := c.Repeats[0].Stability
	if c.Stable == nil || *c.Stable || s.Stable == nil || *s.Stable || c.Stability != report.StateUnstable || s.State != report.StateUnstable || s.Windows < 2 || s.Windows > 4 ||
		!strings.Contains(s.Note, "overloaded") || !c.Repeats[0].Stats.Overloaded {
		t.Errorf("stability %+v, overloaded %v", s, c.Repeats[0].Stats.Overloaded)
	}
	for i := 1; i < len(s.Medians); i++ {
		if !(s.Medians[i] > s.Medians[i-1]) {
			t.Errorf("window medians do not grow: %v", s.Medians)
		}
	}
	if !regexp.MustCompile(`(?m)^Stable: +false$`).MatchString(stdout) {
		t.Errorf("summary does not flag the cell:\n%s", stdout)
	}
}

// TestSweepFindsCapacityAccuracy: against a server of known capacity (two batch
// slots, 50 ms requests: 40 requests/s), the sweep passes the rates well
// below it and finds the highest rate meeting the SLO between half the
// capacity and 1.25 times it (beyond, the queue grows by 10 requests/s and
// most requests miss the 150 ms SLO). Its verdict is the real-time
// simulator's latency against the SLO, so it is a timing test (make
// test-timing).
func TestSweepFindsCapacityAccuracy(t *testing.T) {
	testenv.Timing(t)
	cfg := simulator.DefaultConfig()
	cfg.TimeScale, cfg.DecodeStep, cfg.DecodePerSeq, cfg.MaxNumSeqs, cfg.PrefillTokensPerSecond = 0.5, 10*time.Millisecond, 0, 2, 1e6
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := wrapSim(t, sim)
	dir := t.TempDir()
	yml := targetsYAML([]string{"sim"}, []*simTarget{st}) + `
bench:
  matrix:
    process: constant
    rates: [5]
    shapes: [{input_tokens: 8, output_tokens: 10}]
  warmup: 100ms
  duration: 300ms
  repeats: 1
  prompt_set_size: 32
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  slo: {e2e: 150ms}
  sweep: {start: 5, factor: 2, max_rate: 160, refine: 2, duration: 1s, warmup: 200ms}
  ranking: {resamples: 100}
`
	out, _ := runBenchOK(t, dir, yml)
	sw := readReport(t, out).Sweeps
	if len(sw) != 1 {
		t.Fatalf("sweeps %+v", sw)
	}
	s := sw[0]
	if s.MaxRate < 20 || s.MaxRate >= 50 || s.Note != "" {
		t.Errorf("max rate %v (note %q), want in [20, 50)\npoints %+v", s.MaxRate, s.Note, s.Points)
	}
	pass := map[float64]bool{}
	for _, p := range s.Points {
		pass[p.Rate] = p.Pass
		if p.Rate == s.MaxRate && (!p.Pass || math.Abs(p.GoodputPerSecond-p.Rate)/p.Rate > 0.2) {
			t.Errorf("the max rate's point %+v", p)
		}
	}
	for _, r := range []float64{5, 10, 20} {
		if !pass[r] {
			t.Errorf("rate %v did not pass: %+v", r, s.Points)
		}
	}
	// Doubling from 5 until a rate fails, then two bisections.
	if len(s.Points) < 6 || s.Points[0].Rate != 5 || s.Points[1].Rate != 10 || s.Points[2].Rate != 20 {
		t.Errorf("rates tried %+v", s.Points)
	}
}

// TestReplayCell: a replayed Azure-format trace is a cell of its own; every
// record is sent once, with its output length forced, and measured.
//
// Its ceiling, 10,000 req/s, moves none of the rows 25 ms apart, and its
// token bucket (101 sends) holds whatever a busy machine makes overdue (the
// default's, 3, dropped a row): the test is about what is sent.
func TestReplayCell(t *testing.T) {
	st := startSim(t, 10*time.Millisecond, 0.5, 0)
	dir := t.TempDir()
	trace := azureTrace(20, 50*time.Millisecond)
	writeTestFile(t, dir, "trace.csv", trace)
	yml := targetsYAML([]string{"sim"}, []*simTarget{st}) + `
bench:
  matrix:
    replays: [{name: azure, source: azure, path: trace.csv, speed: 2, max_rate: 10000}]
  warmup: 0s
  duration: 2s
  repeats: 1
  stability: {enabled: false}
  ranking: {resamples: 100}
`
	out, _ := runBenchOK(t, dir, yml)
	r := readReport(t, out)
	if len(r.Cells) != 1 || r.Cells[0].Key != "sim/replay=2/azure" {
		t.Fatalf("cells %+v", r.Cells)
	}
	c := r.Cells[0]
	if c.Summary.Requests != 20 || c.Summary.Successes != 20 {
		t.Errorf("replayed %d requests (%d successes), want 20", c.Summary.Requests, c.Summary.Successes)
	}
	// The trace ends after 0.5 s at speed 2: the measured window ends with
	// the run, in whole windows, not at the configured 2 s.
	if c.Summary.WindowSeconds >= 1 {
		t.Errorf("window %v s: the trace's end did not end it", c.Summary.WindowSeconds)
	}
	var got, want []int
	for _, b := range st.bodies() {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.Unmarshal([]byte(b), &req); err != nil {
			t.Fatal(err)
		}
		got = append(got, req.MaxTokens)
	}
	for _, line := range strings.Split(strings.TrimSpace(trace), "\n")[1:] {
		n, _ := strconv.Atoi(line[strings.LastIndexByte(line, ',')+1:])
		want = append(want, n)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("output lengths sent %v, trace %v", got, want)
	}
	if len(r.Environment.Traces) != 1 || r.Environment.Traces[0].Records != 20 {
		t.Errorf("traces %+v", r.Environment.Traces)
	}
}

// TestCommandWiring builds the application as the exporter's main does
// (global --config.file and --collector.* flags, serve as the default
// command) and runs bench through it: without a GPU driver the NVML
// collector is unavailable and the report says why.
func TestCommandWiring(t *testing.T) {
	sim := startSim(t, 2*time.Millisecond, 1, 0)
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "b.yml", targetsYAML([]string{"sim"}, []*simTarget{sim})+`
bench:
  matrix: {concurrencies: [1], shapes: [{input_tokens: 8, output_tokens: 2}]}
  warmup: 0s
  duration: 200ms
  repeats: 1
  prompt_set_size: 4
  stability: {enabled: false}
  ranking: {resamples: 100}
`)
	newApp := func() (*kingpin.Application, *kingpin.CmdClause, func(context.Context, *slog.Logger) int, *bytes.Buffer) {
		app := kingpin.New("infer_exporter", "")
		app.Command("serve", "").Default()
		var stdout bytes.Buffer
		cmd, run := addCommand(app, true, &stdout, io.Discard)
		return app, cmd, run, &stdout
	}
	app, cmd, run, stdout := newApp()
	out := filepath.Join(dir, "out")
	if got, err := app.Parse([]string{"bench", "--config.file=" + cfg, "--output.dir=" + out}); err != nil || got != cmd.FullCommand()+" run" {
		// run is bench's default subcommand.
		t.Fatalf("parse: %q %v", got, err)
	}
	if code := run(context.Background(), slog.New(slog.DiscardHandler)); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	if r := readReport(t, out); r.GPU.Available || r.GPU.Note == "" || len(r.Cells) != 1 {
		t.Errorf("gpu %+v, %d cells", r.GPU, len(r.Cells))
	}

	app, _, run, _ = newApp()
	if _, err := app.Parse([]string{"bench", "--config.file=" + cfg}); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), slog.New(slog.DiscardHandler)); code != ExitUsage {
		t.Errorf("without --output.dir: exit %d, want %d", code, ExitUsage)
	}
	// --config.check validates the file and runs nothing.
	app, _, run, stdout = newApp()
	if _, err := app.Parse([]string{"bench", "--config.file=" + cfg, "--config.check"}); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), slog.New(slog.DiscardHandler)); code != ExitOK || !strings.Contains(stdout.String(), "OK") {
		t.Errorf("--config.check: exit %d, %q", code, stdout)
	}
	app, _, run, _ = newApp()
	if _, err := app.Parse([]string{"bench", "--output.dir=" + out}); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), slog.New(slog.DiscardHandler)); code != ExitUsage {
		t.Errorf("without --config.file: exit %d, want %d", code, ExitUsage)
	}
}

// TestSteadyStateThroughput: with generations longer than the configured
// warm-up (128 tokens at 60 ms decode steps, about 7.7 s, against a 3 s
// warm-up), the warm-up lasts until the pipeline is full, and the measured
// rates are the offered ones: 2 req/s and 256 output tokens/s, within 5%.
// Before, the windows started while the pipeline was still filling and the
// report said 1.40 req/s and 238 tokens/s.
func TestSteadyStateThroughputAccuracy(t *testing.T) {
	testenv.Timing(t)
	st := startSim(t, 60*time.Millisecond, 1, 0)
	dir := t.TempDir()
	yml := targetsYAML([]string{"sim"}, []*simTarget{st}) + `
bench:
  matrix:
    process: constant
    rates: [2]
    shapes: [{name: long, input_tokens: 64, output_tokens: 128}]
  warmup: 3s
  duration: 15s
  repeats: 1
  prompt_set_size: 40
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	out, _ := runBenchOK(t, dir, yml)
	r := readReport(t, out)
	if len(r.Cells) != 1 || len(r.Cells[0].Repeats) != 1 {
		t.Fatalf("cells %+v", r.Cells)
	}
	rep := r.Cells[0].Repeats[0]
	s := rep.Stats
	t.Logf("warm-up used %.2f s (%s); %.3f req/s, %.1f output tokens/s over %.1f s", rep.WarmupSeconds, rep.WarmupNote, s.RequestsPerSecond, s.OutputTokensPerSecond, s.WindowSeconds)
	if rep.WarmupSeconds < 7 {
		t.Errorf("warm-up %.2f s: it ended before the first 7.7 s generation did", rep.WarmupSeconds)
	}
	if math.Abs(s.RequestsPerSecond-2)/2 > 0.05 {
		t.Errorf("requests_per_second %.3f, want 2 within 5%%", s.RequestsPerSecond)
	}
	if math.Abs(s.OutputTokensPerSecond-256)/256 > 0.05 {
		t.Errorf("output_tokens_per_second %.1f, want 256 within 5%%", s.OutputTokensPerSecond)
	}
	if s.Overloaded || s.Draining || math.Abs(s.OfferedPerSecond-2) > 0.1 || s.DroppedPerSecond != 0 {
		t.Errorf("a server that keeps up: offered %.2f, dropped %.2f, overloaded %v (%s)", s.OfferedPerSecond, s.DroppedPerSecond, s.Overloaded, s.OverloadNote)
	}
	// Little's law holds: 2 req/s x 7.7 s in flight, and so many were.
	if s.InFlightExpected < 14 || s.InFlightExpected > 18 || math.Abs(float64(s.InFlightAtEnd)-s.InFlightExpected) > 3 {
		t.Errorf("in flight at the end %d, expected by Little's law %.1f; want both about 15.5", s.InFlightAtEnd, s.InFlightExpected)
	}
}

// TestOverloadSaysSo: a server that can run 2 sequences at a time, offered
// 30 req/s of 16-token generations (it completes about 6 req/s), is
// reported overloaded, with offered, sent, dropped and completed rates that
// add up, never a request rate that stands unexplained beside the tokens.
func TestOverloadSaysSo(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	cfg := simulator.DefaultConfig()
	cfg.DecodeStep, cfg.DecodePerSeq, cfg.PrefillTokensPerSecond = 20*time.Millisecond, 0, 1e6
	cfg.MaxNumSeqs = 2
	sim, err := simulator.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := wrapSim(t, sim)
	dir := t.TempDir()
	yml := targetsYAML([]string{"sim"}, []*simTarget{st}) + `
bench:
  matrix:
    process: constant
    rates: [30]
    shapes: [{name: s, input_tokens: 16, output_tokens: 16}]
  warmup: 1s
  duration: 2s
  repeats: 1
  prompt_set_size: 20
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	out, _ := runBenchOK(t, dir, yml)
	s := readReport(t, out).Cells[0].Summary
	t.Logf("offered %.2f, sent %.2f, dropped %.2f, completed %.2f req/s, %.1f tokens/s: %s",
		s.OfferedPerSecond, s.SentPerSecond, s.DroppedPerSecond, s.RequestsPerSecond, s.OutputTokensPerSecond, s.OverloadNote)
	if !s.Overloaded || s.OverloadNote == "" {
		t.Errorf("not reported overloaded")
	}
	if math.Abs(s.OfferedPerSecond-30) > 1.5 || math.Abs(s.SentPerSecond+s.DroppedPerSecond-s.OfferedPerSecond) > 1e-9 {
		t.Errorf("offered %.2f, sent %.2f, dropped %.2f do not add up", s.OfferedPerSecond, s.SentPerSecond, s.DroppedPerSecond)
	}
	if s.RequestsPerSecond <= 0 || s.RequestsPerSecond > 0.5*s.SentPerSecond {
		t.Errorf("completed %.2f req/s of %.2f sent", s.RequestsPerSecond, s.SentPerSecond)
	}
	// Tokens and requests by one rule: about 16 tokens per completion.
	if r := s.OutputTokensPerSecond / s.RequestsPerSecond; r < 10 || r > 24 {
		t.Errorf("%.1f tokens per completed request, want about 16", r)
	}
	// The queue: sent minus completed piled up in flight, and the report
	// says how many (about 3 s x 24/s in excess).
	if s.InFlightAtEnd < 30 || !strings.Contains(s.OverloadNote, "in flight at the end") {
		t.Errorf("in flight at the end %d (Little's law %.1f): want the queue, and the note to say it (%s)", s.InFlightAtEnd, s.InFlightExpected, s.OverloadNote)
	}
}
