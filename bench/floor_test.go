package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestSuccessFloor: the two servers. steady serves every request;
// flaky-fast takes a quarter of steady's time per step and refuses 30% of
// its requests with a 503 (the simulator's error_rate fault). Scored on
// its successes alone, flaky-fast scores higher; held to bench.min_success
// (0.999 by default) it ranks below steady, marked so, the run exits
// ExitBelowSuccessFloor and names the cell with its outcomes and first
// error, and every output (console, report.md, report.html, report.json,
// report.csv) shows both targets' success ratios, each the report's own
// counts.
func TestSuccessFloor(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	steady := startSim(t, 20*time.Millisecond, 1, 0)
	flaky := startSim(t, 5*time.Millisecond, 1, 0)
	f := flaky.Sim.Faults()
	f.ErrorRate = 0.3
	if err := flaky.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// 10 req/s for 2.5 s: some 20 measured requests of flaky-fast, all
	// served with a chance of 0.7^20 (1 in 1,250) at the most.
	yml := targetsYAML([]string{"steady", "flaky-fast"}, []*simTarget{steady, flaky}) + `
bench:
  matrix:
    process: constant
    rates: [10]
    shapes: [{name: s, input_tokens: 16, output_tokens: 8}]
  warmup: 500ms
  duration: 2s
  repeats: 1
  prompt_set_size: 16
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+writeTestFile(t, dir, "b.yml", yml), "--output.dir="+out)
	if code != ExitBelowSuccessFloor {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitBelowSuccessFloor, stdout, stderr)
	}
	r := readReport(t, out)

	// The truth: each cell's counts, summed over its repeats.
	cells := map[string]*report.CellResult{}
	ratio := map[string]float64{}
	for i := range r.Cells {
		c := &r.Cells[i]
		cells[c.Target] = c
		// Of the requests sent: a loaded machine's client may drop an
		// arrival (its rate ceiling), which no server met.
		var ok, sent int
		for _, rr := range c.Repeats {
			ok, sent = ok+rr.Stats.Successes, sent+rr.Stats.Requests-rr.Stats.Outcomes["dropped"]
		}
		ratio[c.Target] = float64(ok) / float64(sent)
	}
	fc, sc := cells["flaky-fast"], cells["steady"]
	if fc == nil || sc == nil {
		t.Fatalf("cells %+v", r.Cells)
	}
	if ratio["steady"] != 1 || !(ratio["flaky-fast"] < 1) || fc.Summary.HTTPErrors["503"] == 0 {
		t.Fatalf("success ratios %v, flaky-fast's HTTP errors %v: the servers are not the issue's", ratio, fc.Summary.HTTPErrors)
	}
	if !fc.BelowMinSuccess || sc.BelowMinSuccess {
		t.Errorf("below min_success: flaky-fast %v, steady %v", fc.BelowMinSuccess, sc.BelowMinSuccess)
	}
	// steady's server never fails (its success ratio of the requests sent
	// is 1, above); its first error is none, or, when the loaded client
	// dropped an arrival at its rate ceiling (warm-up included, which the
	// counts above leave out), that drop: on a busy machine (4 busy loops
	// beside the race step) it was "dropped: rate_ceiling".
	if steadyErr := sc.Repeats[0].FirstError; !strings.HasPrefix(fc.Repeats[0].FirstError, "HTTP 503 Service Unavailable") ||
		!(steadyErr == "" || strings.HasPrefix(steadyErr, "dropped: ")) {
		t.Errorf("first errors: flaky-fast %q, steady %q", fc.Repeats[0].FirstError, steadyErr)
	}

	// report.json: steady first, flaky-fast second though it scores higher.
	rk := r.Ranking
	if len(rk.Entries) != 2 || rk.Entries[0].Target != "steady" || rk.Entries[1].Target != "flaky-fast" || rk.MinSuccess != DefaultMinSuccess {
		t.Fatalf("ranking %+v", rk)
	}
	st, fl := rk.Entries[0], rk.Entries[1]
	t.Logf("scores: steady %.4f (success %.4f), flaky-fast %.4f (success %.4f)", st.Score, st.SuccessRatio, fl.Score, fl.SuccessRatio)
	if !(fl.Score > st.Score) {
		t.Errorf("flaky-fast scores %v, steady %v: the floor, not the score, should rank it second", fl.Score, st.Score)
	}
	if st.Rank != 1 || fl.Rank != 2 || st.Tied || fl.Tied || st.BelowMinSuccess || !fl.BelowMinSuccess || fl.RankLo != 2 || st.RankHi != 1 {
		t.Errorf("entries %+v %+v", st, fl)
	}
	for _, e := range rk.Entries {
		// No SLO: every success is good, of the measured requests.
		c := cells[e.Target]
		goodput := float64(c.Repeats[0].Stats.Goodput) / float64(c.Repeats[0].Stats.Requests)
		if float64(e.SuccessRatio) != ratio[e.Target] || float64(e.GoodputRatio) != goodput {
			t.Errorf("%s: success %v goodput %v, want %v and %v", e.Target, e.SuccessRatio, e.GoodputRatio, ratio[e.Target], goodput)
		}
	}

	// The console: the leaderboard's ratios, the mark, and the warning at
	// the end naming the cell with its outcomes and first error.
	for _, e := range rk.Entries {
		mark := ""
		if e.BelowMinSuccess {
			mark = "  BELOW min_success 0.999"
		}
		want := regexp.MustCompile(fmt.Sprintf(`(?m)^   %d  %s +score .* success %s  goodput %s%s$`, e.Rank, regexp.QuoteMeta(e.Target),
			render.ConsoleRatio(e.SuccessRatio), render.ConsoleRatio(e.GoodputRatio), mark))
		if !want.MatchString(stdout) {
			t.Errorf("the console's leaderboard lacks %s:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"bench: warning: 1 cell below bench.min_success 0.999",
		fmt.Sprintf("  %s: %d of %d measured requests sent succeeded (%s); outcomes: ", fc.Key, fc.Summary.Successes,
			fc.Summary.Requests-fc.Summary.Outcomes["dropped"], render.ConsoleRatio(report.Num(ratio["flaky-fast"]))),
		fmt.Sprintf("http_5xx %d, success %d; HTTP statuses: 503 %d; first error: HTTP 503 Service Unavailable",
			fc.Summary.HTTPErrors["503"], fc.Summary.Successes, fc.Summary.HTTPErrors["503"])} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	// report.md: both ratios beside the scores, the mark, the cell named.
	md := readFile(t, filepath.Join(out, render.MarkdownFile))
	for _, e := range rk.Entries {
		flag := ""
		if e.BelowMinSuccess {
			flag = "below min_success"
		}
		row := fmt.Sprintf("| %d | %s | %s | %s – %s | %s | %s | %s |", e.Rank, e.Target, report.MarkdownRatio(e.Score), report.MarkdownRatio(e.ScoreCI.Lo),
			report.MarkdownRatio(e.ScoreCI.Hi), render.ConsoleRatio(e.SuccessRatio), render.ConsoleRatio(e.GoodputRatio), flag)
		if !strings.Contains(md, row) {
			t.Errorf("report.md lacks %q:\n%s", row, md)
		}
	}
	if !strings.Contains(md, "## Below min_success") || !strings.Contains(md, "| "+fc.Key+" | "+render.ConsoleRatio(report.Num(ratio["flaky-fast"]))+" |") ||
		!strings.Contains(md, "| HTTP 503 Service Unavailable") {
		t.Errorf("report.md does not name the cell below the floor:\n%s", md)
	}

	// report.html: each leaderboard row's ratios (exact, in data-value).
	html := readFile(t, filepath.Join(out, HTMLFile))
	for _, e := range rk.Entries {
		row := regexp.MustCompile(fmt.Sprintf(`(?s)<tr class="leaderboard-row[^"]*" data-target="%s" data-rank="%d"[^>]* data-below-min-success="%t">.*?</tr>`,
			regexp.QuoteMeta(e.Target), e.Rank, e.BelowMinSuccess)).FindString(html)
		for _, want := range []string{
			fmt.Sprintf(`data-q="success_ratio" data-value="%s">%s<`, report.FormatFloat(float64(e.SuccessRatio)), render.ConsoleRatio(e.SuccessRatio)),
			fmt.Sprintf(`data-q="goodput_ratio" data-value="%s">%s<`, report.FormatFloat(float64(e.GoodputRatio)), render.ConsoleRatio(e.GoodputRatio)),
		} {
			if !strings.Contains(row, want) {
				t.Errorf("report.html's row of %s lacks %q:\n%s", e.Target, want, row)
			}
		}
	}
	if !strings.Contains(html, `<section id="below-min-success">`) || !strings.Contains(html, `<tr data-cell="`+fc.Key+`">`) {
		t.Errorf("report.html does not name the cell below the floor")
	}

	// report.csv: each cell's success ratio and its mark.
	rows, err := csv.NewReader(strings.NewReader(readFile(t, filepath.Join(out, CSVFile)))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int { return slices.Index(rows[0], name) }
	for _, row := range rows[1:] {
		target := row[col("target")]
		if got, want := row[col("success_ratio")], report.FormatFloat(ratio[target]); got != want {
			t.Errorf("report.csv: %s's success_ratio %s, want %s", target, got, want)
		}
		if got, want := row[col("below_min_success")], fmt.Sprint(target == "flaky-fast"); got != want {
			t.Errorf("report.csv: %s's below_min_success %s, want %s", target, got, want)
		}
		if row[col("goodput_ratio")] == "" {
			t.Errorf("report.csv: %s has no goodput_ratio", target)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEarlyStopOnRefusal: a quick start asking for a model the server does
// not serve: its first 8 requests are all refused with a 404, and the
// repeat stops there rather than run out its 5 s warm-up and 20 s; the
// console, report.json, report.md and report.html say so, with the
// server's own sentence.
func TestEarlyStopOnRefusal(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	sim := startSim(t, 10*time.Millisecond, 1, 0)
	out := filepath.Join(t.TempDir(), "out")
	// A warm-up of 5 s (a quarter of the duration): the stop comes in it,
	// and every request sent is counted.
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--target.url="+sim.URL, "--model=absent-model",
		"--rate=4", "--input-tokens=16", "--output-tokens=8", "--duration=20s", "--output.dir="+out)
	if code != ExitNoSuccess {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitNoSuccess, stdout, stderr)
	}
	// The schedule holds some 100 arrivals (4/s over 25 s); a stop after
	// the 8th answer leaves those in flight then, a few at most.
	if sent := len(sim.requestIDs()); sent < earlyStopAfter || sent > 2*earlyStopAfter {
		t.Errorf("the server got %d requests, want %d and those in flight at the stop", sent, earlyStopAfter)
	}
	r := readReport(t, out)
	rr := r.Cells[0].Repeats[0]
	const want = "stopped early: the first 8 requests all failed with HTTP 404: "
	if !strings.HasPrefix(rr.StoppedEarly, want) || !strings.Contains(rr.StoppedEarly, "The model `absent-model` does not exist.") {
		t.Errorf("stopped_early %q", rr.StoppedEarly)
	}
	// Every request it sent is measured: their outcomes are the cell's.
	if s := rr.Stats; s.Requests != len(sim.requestIDs()) || s.Outcomes["http_4xx"] != s.Requests || s.HTTPErrors["404"] != s.Requests {
		t.Errorf("stats: %d requests, outcomes %v, HTTP errors %v; the server got %d", s.Requests, s.Outcomes, s.HTTPErrors, len(sim.requestIDs()))
	}
	if !strings.HasPrefix(rr.FirstError, "HTTP 404 Not Found: ") {
		t.Errorf("first_error %q", rr.FirstError)
	}
	for name, text := range map[string]string{"the console": stdout, render.MarkdownFile: readFile(t, filepath.Join(out, render.MarkdownFile)),
		HTMLFile: readFile(t, filepath.Join(out, HTMLFile))} {
		if !strings.Contains(text, "the first 8 requests all failed with HTTP 404") || !strings.Contains(text, "absent-model") {
			t.Errorf("%s does not say it stopped early:\n%s", name, text)
		}
	}
}

// TestFailWatch: the early stop's rule on known sequences of answers, and
// the first error's text.
func TestFailWatch(t *testing.T) {
	refused := func(status int, body string) *observation.Request {
		o := &observation.Request{Outcome: observation.HTTP4xx, HTTPStatus: status, Err: &client.HTTPError{StatusCode: status, Body: body}}
		if status >= 500 {
			o.Outcome = observation.HTTP5xx
		}
		return o
	}
	ok := &observation.Request{Outcome: observation.Success}
	n := func(k int, o *observation.Request) []*observation.Request {
		out := make([]*observation.Request, k)
		for i := range out {
			out[i] = o
		}
		return out
	}
	long := strings.Repeat("x ", 300)
	for _, tc := range []struct {
		name        string
		seq         []*observation.Request
		stop, first string
	}{
		{"eight 404s", n(8, refused(404, `{"error": "no such model"}`)),
			`stopped early: the first 8 requests all failed with HTTP 404: {"error": "no such model"}`, `HTTP 404 Not Found: {"error": "no such model"}`},
		{"seven 404s", n(7, refused(404, "nope")), "", "HTTP 404 Not Found: nope"},
		{"a success among them", append(n(7, refused(401, "")), ok), "", "HTTP 401 Unauthorized"},
		{"a success first", append([]*observation.Request{ok}, n(8, refused(404, ""))...), "", "HTTP 404 Not Found"},
		{"two statuses", append(n(4, refused(404, "a")), n(4, refused(400, "b"))...), "", "HTTP 404 Not Found: a"},
		{"rate limited: the load's answer", n(8, refused(429, "slow down")), "", "HTTP 429 Too Many Requests: slow down"},
		{"server errors", n(8, refused(503, "")), "", "HTTP 503 Service Unavailable"},
		{"disconnected", []*observation.Request{{Outcome: observation.Disconnected, Err: errors.New("read: connection reset by peer")}}, "",
			"disconnected: read: connection reset by peer"},
		// 200 bytes at most, the ellipsis included: the body's first 197
		// once its lines are joined.
		{"a body on lines, cut", n(8, refused(404, "line one\n\n  line two "+long)),
			"stopped early: the first 8 requests all failed with HTTP 404: " + ("line one line two " + long)[:197] + "…",
			("HTTP 404 Not Found: line one line two " + long)[:197] + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFailWatch()
			drained := 0
			w.drain = func() { drained++ }
			for _, o := range tc.seq {
				w.Done(o)
			}
			first, stop := w.result()
			if stop != tc.stop || first != tc.first {
				t.Errorf("stop %q\nwant %q\nfirst %q\nwant  %q", stop, tc.stop, first, tc.first)
			}
			halted := false
			select {
			case <-w.halt:
				halted = true
			default:
			}
			if want := tc.stop != ""; halted != want || drained != map[bool]int{true: 1}[want] {
				t.Errorf("halted %v, drained %d times; want a stop: %v", halted, drained, want)
			}
			if len(first) > report.MaxFirstErrorBytes {
				t.Errorf("first error of %d bytes", len(first))
			}
		})
	}
	w := newFailWatch()
	w.Dropped(&observation.Request{Outcome: observation.Dropped, DropReason: "in_flight_cap"})
	if first, _ := w.result(); first != "dropped: in_flight_cap" {
		t.Errorf("a dropped arrival's first error %q", first)
	}
}

// TestRanksOfFloor: the ranks put every target below the success floor
// after every target above it, whatever the scores; ties only on one
// side.
func TestRanksOfFloor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scores []float64
		below  []bool
		want   []int
	}{
		{"no floor", []float64{0.5, 0.9, 0.7}, nil, []int{3, 1, 2}},
		{"the best below", []float64{0.5, 0.9, 0.7}, []bool{false, true, false}, []int{2, 3, 1}},
		{"all below", []float64{0.5, 0.9, 0.7}, []bool{true, true, true}, []int{3, 1, 2}},
		{"equal scores across the floor", []float64{0.8, 0.8}, []bool{true, false}, []int{2, 1}},
		{"equal scores on one side", []float64{0.8, 0.8, 0.9}, []bool{true, true, false}, []int{2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ranksOf(tc.scores, tc.below); !slices.Equal(got, tc.want) {
				t.Errorf("ranks %v, want %v", got, tc.want)
			}
		})
	}
}

// TestExitStatusOrder: the run's exit status when several verdicts apply,
// on the golden report (two of its cells met HTTP errors, below the
// default floor, and its baseline found regressions): a cell without a
// success (4) before the floor (5) before the regression (3).
func TestExitStatusOrder(t *testing.T) {
	cfg, err := Parse([]byte(goldenConfig), "golden.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(r *report.Report)
		want   int
		stderr []string
	}{
		{"floor and regression", func(*report.Report) {}, ExitBelowSuccessFloor, []string{"bench: warning: 2 cells below bench.min_success 0.999"}},
		{"regression alone", func(r *report.Report) {
			for i := range r.Cells {
				r.Cells[i].BelowMinSuccess = false
			}
		}, ExitRegression, nil},
		{"no success, floor and regression", func(r *report.Report) {
			for i := range r.Cells[0].Repeats {
				r.Cells[0].Repeats[i].Stats.Successes = 0
			}
		}, ExitNoSuccess, []string{"bench: 1 cell measured no successful request", "bench: warning: 2 cells below"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := goldenReport(t)
			tc.change(rep)
			if len(rep.Baseline.Regressions) == 0 {
				t.Fatal("the golden report's baseline found no regression")
			}
			var stdout, stderr bytes.Buffer
			f := &commandFlags{outputDir: t.TempDir()}
			if got := runResult(context.Background(), rep, nil, cfg, f, &stdout, &stderr); got != tc.want {
				t.Errorf("exit %d, want %d\n%s", got, tc.want, stderr.String())
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if tc.stderr == nil && stderr.Len() > 0 {
				t.Errorf("stderr %q", stderr.String())
			}
		})
	}
}
