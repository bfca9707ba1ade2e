package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// parseBlocks reads the result blocks back from a command's stdout: per
// cell key, every "label: value" line of its block, by label.
func parseBlocks(t *testing.T, stdout string) map[string]map[string][]string {
	t.Helper()
	blocks := map[string]map[string][]string{}
	var cur map[string][]string
	for _, line := range strings.Split(stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "==") && strings.HasSuffix(line, "=="):
			if len(line) != len(render.BlockRule) {
				t.Errorf("rule %q: not %d wide", line, len(render.BlockRule))
			}
			cur = nil // a heading or the closing rule
			if strings.Trim(line, "=") != "" {
				cur = map[string][]string{"heading": {strings.Trim(line, "= ")}}
			}
			continue
		case cur == nil || strings.HasPrefix(line, "--"):
			continue
		}
		label, value, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("block line without a label: %q", line)
		}
		if len(label)+1 > render.BlockLabelWidth || line[render.BlockLabelWidth] != ' ' {
			t.Errorf("line %q: its value does not start at column %d", line, render.BlockLabelWidth+1)
		}
		cur[label] = append(cur[label], strings.TrimSpace(value))
		if label == "Cell key (report.json, --baseline)" {
			blocks[strings.TrimSpace(value)] = cur
		}
	}
	return blocks
}

// TestResultBlockIsTheReport: a bench against the simulator prints one
// result block per cell whose every figure, read back, is report.json's
// (the file's, as written) at the block's printed precision; the block is
// plain text (no terminal escapes).
func TestResultBlockIsTheReport(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	sim := startSim(t, 10*time.Millisecond, 1, 0)
	dir := t.TempDir()
	yml := targetsYAML([]string{"sim"}, []*simTarget{sim}) + `
bench:
  matrix:
    process: constant
    rates: [20]
    concurrencies: [2]
    shapes: [{name: s, input_tokens: 24, output_tokens: 8}]
  warmup: 200ms
  duration: 1s
  repeats: 1
  max_in_flight: 1         # the open loop drops arrivals: failures by outcome
  min_success: 0           # which the floor would fail the run on (TestSuccessFloor)
  prompt_set_size: 20
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	out, stdout := runBenchOK(t, dir, yml)
	if strings.Contains(stdout, "\x1b") {
		t.Errorf("stdout holds terminal escapes:\n%q", stdout)
	}
	r := readReport(t, out)
	blocks := parseBlocks(t, stdout)
	if len(r.Cells) != 2 || len(blocks) != 2 {
		t.Fatalf("%d cells, %d blocks:\n%s", len(r.Cells), len(blocks), stdout)
	}
	ms := func(d report.Dist, v float64) string {
		if d.Count == 0 {
			return "-"
		}
		return strconv.FormatFloat(v*1000, 'f', 2, 64)
	}
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, c := range r.Cells {
		b := blocks[c.Key]
		if b == nil {
			t.Fatalf("no block for %s:\n%s", c.Key, stdout)
		}
		s := c.Summary
		if s.Successes == 0 || s.InputTokens == 0 || s.OutputTokens == 0 {
			t.Errorf("%s: a cell without successes or tokens (%+v) tests nothing", c.Key, s)
		}
		failed, by := 0, []string{}
		for _, o := range slices.Sorted(maps.Keys(s.Outcomes)) {
			if o != "success" && s.Outcomes[o] > 0 {
				failed += s.Outcomes[o]
				by = append(by, fmt.Sprintf("%s %d", o, s.Outcomes[o]))
			}
		}
		want := map[string]string{
			"heading":                         "sim/sim-model/s " + c.Load.Kind + " " + strconv.FormatFloat(c.Load.Value, 'g', -1, 64),
			"Successful requests":             strconv.Itoa(s.Successes),
			"Failed requests":                 strconv.Itoa(failed),
			"Measured duration (s)":           f2(s.WindowSeconds),
			"Total input tokens":              strconv.Itoa(s.InputTokens),
			"Total generated tokens":          strconv.FormatFloat(s.OutputTokens, 'f', 0, 64),
			"Request throughput (req/s)":      f2(s.RequestsPerSecond),
			"Output token throughput (tok/s)": f2(s.OutputTokensPerSecond),
			"Total token throughput (tok/s)":  f2(s.TotalTokensPerSecond),
			"Stable":                          "not checked", // stability: {enabled: false}
			"Client degraded":                 report.ColumnNamed("degraded").CSV(&c),
			"Usage not believed (requests)":   strconv.Itoa(s.UsageNotBelieved),
			"Overloaded":                      strconv.FormatBool(s.Overloaded),
			"Draining":                        strconv.FormatBool(s.Draining),
			"Sampled":                         strconv.FormatBool(s.Sampled),
			"Below min_success":               strconv.FormatBool(c.BelowMinSuccess),
		}
		if c.Load.Kind == report.LoadRate && failed == 0 {
			t.Errorf("%s: no drops at 20 req/s of 80 ms requests one at a time: the outcomes line is not tested", c.Key)
		}
		if len(by) > 0 {
			want["Failed by outcome"] = strings.Join(by, ", ")
		}
		for _, d := range []struct {
			name string
			d    report.Dist
		}{{"TTFT", s.TTFT}, {"TPOT", s.TPOT}, {"ITL", s.ITL}, {"E2E", s.E2E}} {
			want["Mean "+d.name+" (ms)"] = ms(d.d, d.d.Mean)
			want["Median "+d.name+" (ms)"] = ms(d.d, d.d.P50)
			want["P99 "+d.name+" (ms)"] = ms(d.d, d.d.P99)
		}
		for label, w := range want {
			if got := b[label]; len(got) != 1 || got[0] != w {
				t.Errorf("%s: %q says %q, report.json %q", c.Key, label, got, w)
			}
		}
		// Every note the report carries, and nothing else.
		if notes := render.CellNotes(&c); !slices.Equal(b["Note"], notes) {
			t.Errorf("%s: notes %q, want %q", c.Key, b["Note"], notes)
		}
		for label := range b {
			if _, ok := want[label]; !ok && label != "Cell key (report.json, --baseline)" && label != "Note" {
				t.Errorf("%s: a line %q the test does not check", c.Key, label)
			}
		}
	}
}

// TestStableNotChecked: a cell none of whose repeats judged its stability
// (stability: {enabled: false}) has no stable flag in report.json, the
// cell's nor its repeats', overloaded or not, and says "not checked" in
// every other output (the stable column's word); one that was judged says
// true or false everywhere. The cells are built as a run builds them
// (assembleCells) and read back as bench merge and --baseline read them.
func TestStableNotChecked(t *testing.T) {
	cfg, err := Parse([]byte(testShardConfig), "b.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		states     []string // each repeat's; "" not checked
		overloaded bool
		json       string // the cell's "stable" in report.json ("" absent)
		csv        string
		flag       string // the stable column's in the Markdown flags and the HTML ("" none)
		htmlSpan   string
	}{
		{"stability off", []string{"", ""}, false, "", "not checked", "stable: not checked", `<span class="note">stable: not checked</span>`},
		{"stability off, overloaded", []string{"", ""}, true, "", "not checked", "stable: not checked", `<span class="note">stable: not checked</span>`},
		{"one repeat judged stable", []string{"", report.StateStable}, false, "true", "true", "", ""},
		{"judged unstable", []string{report.StateUnstable}, true, "false", "false", "unstable", `<span class="bad">unstable</span>`},
		{"not judged", []string{report.StateNotJudged}, false, "false", "not judged", "stable: not judged", `<span class="note">stable: not judged</span>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load := report.Load{Kind: report.LoadRate, Value: 10}
			var acc cellAcc
			for i, state := range tc.states {
				st := report.StabilityResult{Checked: state != "", State: state, Stable: report.StableOf(state), Growth: report.NaN(),
					GrowthLow: report.NaN(), GrowthHigh: report.NaN(), NeedSeconds: report.NaN()}
				switch state {
				case report.StateUnstable:
					st.Note = "overloaded: the in-flight cap dropped 40 of 100 arrivals"
				case report.StateNotJudged:
					st.Note = "not judged: too few requests"
				}
				stats := report.Stats{Requests: 100, Successes: 100, Outcomes: map[string]int{"success": 100}, Overloaded: tc.overloaded}
				if tc.overloaded {
					stats.OverloadNote = "overloaded: the in-flight cap dropped 40 of 100 arrivals"
				}
				acc.repeats = append(acc.repeats, report.RepeatResult{Index: i, Stats: stats, Stability: st})
				acc.samples = append(acc.samples, &sample{scale: 1})
			}
			cells, _ := assembleCells(context.Background(), &cfg.Bench, []string{"a"}, []group{{name: "s", load: load}}, [][]cellAcc{{acc}})
			var js bytes.Buffer
			if err := render.WriteJSON(&js, &report.Report{Schema: report.Schema, Cells: cells}); err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Cells []struct {
					Stable  *json.RawMessage `json:"stable"`
					Repeats []struct {
						Stability struct {
							Checked bool             `json:"checked"`
							Stable  *json.RawMessage `json:"stable"`
						} `json:"stability"`
					} `json:"repeats"`
				} `json:"cells"`
			}
			if err := json.Unmarshal(js.Bytes(), &raw); err != nil {
				t.Fatal(err)
			}
			if got := raw.Cells[0].Stable; tc.json == "" && got != nil || tc.json != "" && (got == nil || string(*got) != tc.json) {
				t.Errorf("report.json: the cell's stable %s, want %q (\"\": absent)", rawString(got), tc.json)
			}
			for i, r := range raw.Cells[0].Repeats {
				if (r.Stability.Stable != nil) != r.Stability.Checked {
					t.Errorf("report.json: repeat %d checked %v, stable %s: want present only when checked", i+1, r.Stability.Checked, rawString(r.Stability.Stable))
				}
			}
			r, err := report.Decode(js.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			c := &r.Cells[0]
			if got := report.ColumnNamed("stable").CSV(c); got != tc.csv {
				t.Errorf("CSV %q, want %q", got, tc.csv)
			}
			flags := report.MDFlags(c)
			if tc.flag != "" && !slices.Contains(flags, tc.flag) || slices.Contains(flags, "unstable") != (tc.flag == "unstable") {
				t.Errorf("Markdown flags %q, want %q", flags, tc.flag)
			}
			var html, console, md, csv strings.Builder
			if err := render.WriteHTML(&html, r); err != nil {
				t.Fatal(err)
			}
			if tc.htmlSpan != "" && !strings.Contains(html.String(), tc.htmlSpan) {
				t.Errorf("HTML heading without %s", tc.htmlSpan)
			}
			if tc.htmlSpan == "" && strings.Contains(html.String(), "stable: not checked") {
				t.Errorf("HTML says not checked of a checked cell")
			}
			render.WriteResultBlocks(&console, r)
			if b := parseBlocks(t, console.String())[c.Key]; len(b["Stable"]) != 1 || b["Stable"][0] != tc.csv {
				t.Errorf("console says stable %q, want %q", b["Stable"], tc.csv)
			}
			if err := render.WriteMarkdown(&md, r); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(md.String(), "stable: not checked") != (tc.csv == report.NotChecked) {
				t.Errorf("Markdown: want \"stable: not checked\" only in a cell not checked:\n%s", md.String())
			}
			if err := render.WriteCSV(&csv, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(csv.String(), ","+tc.csv+",") {
				t.Errorf("report.csv without the stable column's %q:\n%s", tc.csv, csv.String())
			}
		})
	}
}

func rawString(m *json.RawMessage) string {
	if m == nil {
		return "absent"
	}
	return string(*m)
}

// TestPlanSaidFirst: before its first repeat a bench states its plan on
// the console (the plain lines of a log, here) and in the log: the cells
// and repeats, a repeat's warm-up with its bound, its measured time with
// the stability extension, the planned time and the most it may take.
func TestPlanSaidFirst(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	testenv.Slow(t, "runs a bench of two 1-second repeats in real time")
	sim := startSim(t, 5*time.Millisecond, 1, 0)
	dir := t.TempDir()
	yml := targetsYAML([]string{"sim"}, []*simTarget{sim}) + `
bench:
  matrix:
    process: constant
    rates: [10, 20]
    shapes: [{name: s, input_tokens: 16, output_tokens: 4}]
  warmup: 200ms
  duration: 1s
  repeats: 1
  prompt_set_size: 10
  stability: {max_duration: 2s}
  ranking: {resamples: 100}
`
	var stderr, logged bytes.Buffer
	var stdout bytes.Buffer
	app := kingpin.New("infer_exporter", "")
	_, run := addCommand(app, false, &stdout, &stderr)
	if _, err := app.Parse([]string{"bench", "--config.file=" + writeTestFile(t, dir, "b.yml", yml), "--output.dir=" + filepath.Join(dir, "out")}); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), slog.New(slog.NewTextHandler(&logged, nil))); code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	want := "plan: 2 cells × 1 repeat; each repeat: warm-up 200ms (longer until the pipeline is full, at most 1.2s), " +
		"then 1s measured, run on until the stability rule judges it, up to 2s; " +
		"2.4s planned, at most 6.4s (the requests in flight at each repeat's end aside)"
	if len(lines) < 3 || lines[0] != want || !strings.HasPrefix(lines[1], "cell 1/2 ") {
		t.Errorf("stderr does not open with the plan, then the first cell:\n%s\nwant first\n%s", stderr.String(), want)
	}
	if !strings.Contains(logged.String(), `msg="bench plan" cells=2 repeats=1 warmup=200ms max_warmup=1.2s measured=1s max_measured=2s planned=2.4s at_most=6.4s`) {
		t.Errorf("the log does not state the plan:\n%s", logged.String())
	}
}

// barLength is the running repeat's elapsed/length on the bar, with its
// reason when it gives one.
var barLength = regexp.MustCompile(`(\d+)/(\d+) s(?: \(([^)]*)\))?, \d+ sent`)

// TestBarSaysWhyLonger: a repeat whose warm-up lasts past the configured
// one (requests of half a second, a warm-up of 100 ms) lengthens on the
// bar with the reason, and the bar never shows more seconds than the
// repeat's length without one (the "21/12 s").
func TestBarSaysWhyLonger(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	testenv.Slow(t, "runs a bench of one repeat of requests of half a second in real time")
	sim := startSim(t, 50*time.Millisecond, 1, 0)
	dir := t.TempDir()
	yml := targetsYAML([]string{"sim"}, []*simTarget{sim}) + `
bench:
  matrix:
    process: constant
    rates: [4]
    shapes: [{name: s, input_tokens: 16, output_tokens: 10}]
  warmup: 100ms
  duration: 1s
  repeats: 1
  prompt_set_size: 10
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`
	var stdout bytes.Buffer
	var stderr testenv.Buffer // the bar's goroutine and the run's both write it
	app := kingpin.New("infer_exporter", "")
	_, run := addCommand(app, false, &stdout, &stderr)
	if _, err := app.Parse([]string{"bench", "--config.file=" + writeTestFile(t, dir, "b.yml", yml), "--output.dir=" + filepath.Join(dir, "out"), "--progress=always"}); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), slog.New(slog.DiscardHandler)); code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	said := false
	for _, m := range barLength.FindAllStringSubmatch(stderr.String(), -1) {
		elapsed, _ := strconv.Atoi(m[1])
		length, _ := strconv.Atoi(m[2])
		if elapsed > length && m[3] == "" {
			t.Errorf("%q: past the repeat's length without a reason", m[0])
		}
		said = said || strings.HasPrefix(m[3], "warm-up")
	}
	if !said {
		t.Errorf("the bar never says the warm-up lasted longer:\n%q", stderr.String())
	}
}
