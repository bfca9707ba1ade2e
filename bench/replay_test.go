package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// mooncakeTrace writes n Mooncake rows, gap apart, each of in prompt tokens
// (hash ids shared by pairs of rows, so a prefix cache has something to
// hit) and out output tokens.
func mooncakeTrace(n int, gap time.Duration, in, out int) string {
	var b strings.Builder
	for i := range n {
		blocks := (in + 511) / 512
		ids := make([]string, blocks)
		for k := range ids {
			ids[k] = fmt.Sprint((i/2)*100 + k)
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s]}`+"\n",
			(time.Duration(i) * gap).Milliseconds(), in, out, strings.Join(ids, ", "))
	}
	return b.String()
}

// replayBench runs a bench of the given bench section against fresh
// simulators, one per target name, and returns the report and the bodies
// each simulator received.
func replayBench(t *testing.T, trace, benchYAML string, names ...string) (*report.Report, [][]string, string) {
	t.Helper()
	var sims []*simTarget
	for range names {
		sims = append(sims, startSim(t, 5*time.Millisecond, 1, 0))
	}
	dir := t.TempDir()
	writeTestFile(t, dir, "trace.jsonl", trace)
	yml := targetsYAML(names, sims) + benchYAML
	out, _ := runBenchOK(t, dir, yml)
	var bodies [][]string
	for _, s := range sims {
		bodies = append(bodies, s.bodies())
	}
	return readReport(t, out), bodies, out
}

// TestReplayWholeWindow: a bench replay sends its whole window, whatever
// the configured duration, and the same rows to every target; the cell
// says so (no cut). The old bench cut it at warm-up + duration, so two
// targets could get different parts of the trace and the report did not
// say it.
func TestReplayWholeWindow(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	const rows = 30
	r, bodies, _ := replayBench(t, mooncakeTrace(rows, 100*time.Millisecond, 600, 4), `
bench:
  matrix:
    replays: [{name: mc, source: mooncake, path: trace.jsonl}]
  warmup: 500ms
  duration: 1s
  repeats: 1
  stability: {enabled: false}
  ranking: {resamples: 100}
`, "a", "b")
	if len(r.Cells) != 2 {
		t.Fatalf("%d cells", len(r.Cells))
	}
	sameRows := true
	for i, c := range r.Cells {
		rr := c.Repeats[0].Replay
		if rr == nil {
			t.Fatalf("cell %s: no replay result", c.Key)
		}
		// Under the race detector on a loaded 2-core machine the
		// dispatcher can fall a row's gap behind, and the wire ceiling
		// then drops the rows that would exceed the trace's rate
		// (counted as dropped, never sent late): the window is the rows
		// sent and the rows dropped.
		if rr.Dropped > 0 {
			t.Logf("cell %s: %d rows dropped by the ceiling (a loaded machine)", c.Key, rr.Dropped)
			sameRows = false
		}
		if rr.Rows != rows || rr.Cut != "" || len(bodies[i])+rr.Dropped != rows {
			t.Errorf("cell %s: %d rows, %d replayed, %d received, %d dropped, cut %q: want the whole window of %d", c.Key, rr.Rows, rr.Replayed, len(bodies[i]), rr.Dropped, rr.Cut, rows)
		}
		// The rows after the configured warm-up are measured: 25 of 30.
		if c.Summary.Requests != rows-5 {
			t.Errorf("cell %s: %d measured, want %d (rows after the 500 ms warm-up)", c.Key, c.Summary.Requests, rows-5)
		}
		if want := 2.9; rr.WindowSeconds < want-0.01 || rr.WindowSeconds > want+0.01 {
			t.Errorf("cell %s: window %v s, want %v", c.Key, rr.WindowSeconds, want)
		}
		if rr.Clamped != 0 || rr.Drift.Count != rows-rr.Dropped || rr.Words != WordsPerRepeat {
			t.Errorf("cell %s: clamped %d, %d drifts, words %q", c.Key, rr.Clamped, rr.Drift.Count, rr.Words)
		}
	}
	a, b := slices.Clone(bodies[0]), slices.Clone(bodies[1])
	slices.Sort(a)
	slices.Sort(b)
	if sameRows && !slices.Equal(a, b) {
		t.Error("the two targets were not sent the same rows")
	}
}

// TestReplayDriftFromTrace: rows 10 ms apart under a 20 req/s ceiling are
// held back, 40 ms more per row; the cell counts them as clamped and
// measures their drift from the trace's instants (the last of 20 rows
// leaves 0.76 s late), and flags the replay degraded. The old cell measured
// lag from the instants the ceiling had already moved, and reported none.
func TestReplayDriftFromTrace(t *testing.T) {
	r, _, _ := replayBench(t, mooncakeTrace(20, 10*time.Millisecond, 100, 2), `
bench:
  matrix:
    replays: [{name: mc, source: mooncake, path: trace.jsonl, max_rate: 20}]
  warmup: 0s
  duration: 1s
  repeats: 1
  stability: {enabled: false}
  ranking: {resamples: 100}
`, "a")
	c := r.Cells[0]
	rr := c.Repeats[0].Replay
	if rr.Clamped != 19 {
		t.Errorf("clamped %d, want 19", rr.Clamped)
	}
	// The drift of a row is its clamped instant's, 40 ms more a row: 0.76 s
	// for the last. It is observed for the rows sent: a busy machine late by
	// more than the ceiling's bucket drops a row (and says so), and when the
	// last k rows are dropped the largest drift seen is 0.76 - 0.04k.
	lo := 0.75 - 0.04*float64(rr.Dropped)
	if rr.Drift.Max < lo || rr.Drift.Max > 0.85 || !rr.Degraded || !c.Degraded {
		t.Errorf("drift max %v s (want 0.76, or from %.2f with %d rows dropped), degraded %v, cell degraded %v", rr.Drift.Max, lo, rr.Dropped, rr.Degraded, c.Degraded)
	}
	// The schedule lag, from the moved instants, is small: it is not the
	// figure that shows the drift.
	if c.Summary.ScheduleLag.P99 > 0.05 {
		t.Logf("schedule lag p99 %v s", c.Summary.ScheduleLag.P99)
	}
}

// TestReplayStabilityNotJudged: a trace that ends before it fills enough
// complete windows reads "not judged" with the reason, never "unstable",
// with no NaN in the report; the old cell said "unstable, last spread
// NaN%".
func TestReplayStabilityNotJudged(t *testing.T) {
	r, _, out := replayBench(t, mooncakeTrace(10, 100*time.Millisecond, 100, 2), `
bench:
  matrix:
    replays: [{name: mc, source: mooncake, path: trace.jsonl}]
  warmup: 0s
  duration: 3s
  repeats: 1
  stability: {window: 1s, windows: 3, min_requests: 2}
  ranking: {resamples: 100}
`, "a")
	c := r.Cells[0]
	st := c.Repeats[0].Stability
	if !strings.HasPrefix(st.Note, "not judged: ") || st.State == report.StateUnstable || c.Stability == report.StateUnstable || c.Stable != nil && *c.Stable && st.Checked {
		t.Errorf("stability %+v, cell %q stable %v", st, c.Stability, c.Stable)
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(html), "NaN") || !strings.Contains(string(html), "not judged: ") {
		t.Error("the HTML report shows NaN or not the note")
	}
}

// TestReplayWordsPerRepeat: by default each repeat of a replay gets words
// of its own, with the same lengths and prefix structure, so that a prefix
// cache meets every repeat cold; with words: reuse the repeats send the
// same prompts.
//
// Its ceiling, 10,000 req/s, moves none of the rows 20 ms apart, and its
// token bucket (101 sends) holds whatever a busy machine makes overdue, where
// the default's (2) dropped rows: this test is about what is sent.
func TestReplayWordsPerRepeat(t *testing.T) {
	const rows = 6
	for _, tc := range []struct {
		words string
		same  bool
	}{{"", false}, {"per_repeat", false}, {"reuse", true}} {
		t.Run("words="+tc.words, func(t *testing.T) {
			words := ""
			if tc.words != "" {
				words = ", words: " + tc.words
			}
			r, bodies, _ := replayBench(t, mooncakeTrace(rows, 20*time.Millisecond, 600, 2), `
bench:
  matrix:
    replays: [{name: mc, source: mooncake, path: trace.jsonl, max_rate: 10000`+words+`}]
  warmup: 0s
  duration: 1s
  repeats: 2
  stability: {enabled: false}
  ranking: {resamples: 100}
`, "a")
			got := bodies[0]
			if len(got) != 2*rows {
				for _, rep := range r.Cells[0].Repeats {
					t.Logf("repeat %d: outcomes %v, replay %+v", rep.Index, rep.Stats.Outcomes, rep.Replay)
				}
				t.Fatalf("%d bodies, want %d", len(got), 2*rows)
			}
			prompts := func(bs []string) []string {
				var ps []string
				for _, b := range bs {
					var req struct {
						Prompt string `json:"prompt"`
					}
					if err := json.Unmarshal([]byte(b), &req); err != nil {
						t.Fatal(err)
					}
					ps = append(ps, req.Prompt)
				}
				slices.Sort(ps)
				return ps
			}
			first, second := prompts(got[:rows]), prompts(got[rows:])
			if slices.Equal(first, second) != tc.same {
				t.Errorf("repeats sent the same prompts: %v, want %v", !tc.same, tc.same)
			}
			for i := range first {
				if len(strings.Fields(first[i])) != len(strings.Fields(second[i])) {
					t.Errorf("prompt %d: %d words in repeat 1, %d in repeat 2", i, len(strings.Fields(first[i])), len(strings.Fields(second[i])))
				}
			}
			// Within a repeat, rows 2k and 2k+1 share their hash ids: the
			// same prompt, whatever the salt.
			for _, half := range [][]string{got[:rows], got[rows:]} {
				ps := prompts(half)
				for k := 0; k < rows; k += 2 {
					if ps[k] != ps[k+1] {
						t.Errorf("rows sharing hash ids got different prompts")
					}
				}
			}
			want := WordsPerRepeat
			if tc.same {
				want = WordsReuse
			}
			for _, rep := range r.Cells[0].Repeats {
				if rep.Replay.Words != want {
					t.Errorf("repeat %d: words %q, want %q", rep.Index, rep.Replay.Words, want)
				}
			}
		})
	}
}

// TestReplayOnlyReport: a matrix of replays alone has no prompt set: the
// report shows no hash of empty input, no default shape and no empty
// section.
func TestReplayOnlyReport(t *testing.T) {
	r, _, out := replayBench(t, mooncakeTrace(4, 50*time.Millisecond, 100, 2), `
bench:
  matrix:
    replays: [{name: mc, source: mooncake, path: trace.jsonl}]
  warmup: 0s
  duration: 1s
  repeats: 1
  stability: {enabled: false}
  ranking: {resamples: 100}
`, "a")
	if r.Environment.PromptSetSHA256 != "" || len(r.Environment.PromptSets) != 0 {
		t.Errorf("prompt set %q %+v in a replay-only report", r.Environment.PromptSetSHA256, r.Environment.PromptSets)
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"prompt_set_sha256", "e3b0c44298fc1c149afbf4c8996fb924", "in128-out128", `"shapes"`} {
		if strings.Contains(string(raw), s) {
			t.Errorf("report.json holds %q", s)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`id="curves"`, `class="prompt-sets"`, `id="prompt-sha"`} {
		if strings.Contains(string(html), s) {
			t.Errorf("report.html holds %q", s)
		}
	}
}

// unevenTrace is a Mooncake trace of rows at the given offsets (ms), each
// of in prompt tokens and out output tokens.
func unevenTrace(offsets []int, in, out int) string {
	var b strings.Builder
	for i, ms := range offsets {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%d]}`+"\n", ms, in, out, i)
	}
	return b.String()
}

// TestReplayWholeReplayFigures: a replay cell's figures cover every window
// its trace filled, not the first. After a 500 ms warm-up (5 rows), the
// trace's first second holds 5 rows and the next three 30 (8 output tokens
// each): 35 rows over 4 s. The cell's req/s and output tokens/s equal the
// trace's 8.75 rows/s and 70 tokens/s within 2% (the first window alone
// says 5 and 40),
// stability is judged over the 4 windows of 1 s the trace filled, and the
// warm-up is reported as it was. A looping replay is cut at warm-up +
// duration (15 rows of 100 ms in 500 ms + 1 s), not at the duration.
// (The old cell measured the first window only, judged none, reported a
// warm-up of 0 and cut a loop at its duration.)
func TestReplayWholeReplayFigures(t *testing.T) {
	// Not t.Parallel: beside the parallel tests under the race detector the
	// warm-up's end moved by 60 ms and took a warm-up row into the figures.
	var offsets []int
	for ms := 0; ms < 500; ms += 100 {
		offsets = append(offsets, ms) // the warm-up
	}
	for ms := 500; ms < 1500; ms += 200 {
		offsets = append(offsets, ms)
	}
	for ms := 1500; ms < 4500; ms += 100 {
		offsets = append(offsets, ms)
	}
	r, bodies, _ := replayBench(t, unevenTrace(offsets, 100, 8), `
bench:
  matrix:
    replays: [{name: mc, source: mooncake, path: trace.jsonl}]
  warmup: 500ms
  duration: 1s
  repeats: 1
  stability: {window: 1s, windows: 3, min_requests: 2, tolerance: 0.5}
  ranking: {resamples: 100}
`, "a")
	c := r.Cells[0]
	rep := c.Repeats[0]
	const rowsPerSecond, tokensPerRow = 35.0 / 4, 8
	t.Logf("req/s %.3f, tokens/s %.2f over %.2f s; stability %+v; %d rows received", c.Summary.RequestsPerSecond,
		c.Summary.OutputTokensPerSecond, c.Summary.WindowSeconds, rep.Stability, len(bodies[0]))
	if got := c.Summary.RequestsPerSecond; got < rowsPerSecond*0.98 || got > rowsPerSecond*1.02 {
		t.Errorf("req/s %.3f, want %.1f within 2%%", got, rowsPerSecond)
	}
	if got := c.Summary.OutputTokensPerSecond; got < rowsPerSecond*tokensPerRow*0.98 || got > rowsPerSecond*tokensPerRow*1.02 {
		t.Errorf("output tokens/s %.2f, want %.1f within 2%%", got, rowsPerSecond*tokensPerRow)
	}
	// Judged over the complete windows only: the last, partial one holds
	// the trace's stragglers.
	if want := int(c.Summary.WindowSeconds); rep.Stability.Windows != want || !rep.Stability.Checked {
		t.Errorf("stability over %d windows, checked %v (%s): want judged over the %d complete ones the trace filled", rep.Stability.Windows, rep.Stability.Checked, rep.Stability.Note, want)
	}
	if rep.WarmupSeconds != 0.5 {
		t.Errorf("warm-up %v s reported, want 0.5", rep.WarmupSeconds)
	}

	r, bodies, _ = replayBench(t, mooncakeTrace(10, 100*time.Millisecond, 100, 2), `
bench:
  matrix:
    replays: [{name: mc, source: mooncake, path: trace.jsonl, loop: true}]
  warmup: 500ms
  duration: 1s
  repeats: 1
  stability: {enabled: false}
  ranking: {resamples: 100}
`, "a")
	if n := len(bodies[0]); n < 14 || n > 16 {
		t.Errorf("a looping replay sent %d rows, want 15 (warm-up + duration)", n)
	}
	if rr := r.Cells[0].Repeats[0].Replay; rr == nil || rr.Replayed < 14 {
		t.Errorf("replay result %+v", rr)
	}
}

// TestReplayOfAnotherAPIRefusedFirst: a trace recorded for the Responses
// API, replayed at a chat target, is refused by --config.check and by the
// run before its first request, with the record's line and both APIs. The
// check once said OK, and the run refused it only when its cell came, after
// every cell before it had run.
func TestReplayOfAnotherAPIRefusedFirst(t *testing.T) {
	sim := startSim(t, 5*time.Millisecond, 1, 0)
	dir := t.TempDir()
	trace := writeTestFile(t, dir, "trace.jsonl", `{"offset": 0, "path": "/v1/responses", "body": {"input": "hi", "max_output_tokens": 8}}`+"\n")
	yml := targetsYAML([]string{"a"}, []*simTarget{sim}) + `bench:
  seed: 1
  duration: 1s
  warmup: 0s
  matrix:
    rates: [2]
    shapes: [{input_tokens: 32, output_tokens: 4}]
    replays: [{name: rec, source: jsonl, path: trace.jsonl}]
`
	file := writeTestFile(t, dir, "b.yml", yml)
	want := "replay \"rec\" against target \"a\": " + trace + ":1: recorded for /v1/responses, the openai-responses API"
	for _, args := range [][]string{
		{"bench", "--config.check", "--config.file=" + file},
		{"bench", "--config.file=" + file, "--output.dir=" + filepath.Join(dir, "out")},
	} {
		code, _, stderr := runCLI(t, context.Background(), args...)
		if code != ExitError || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", args[1:], code, stderr, ExitError, want)
		}
	}
	if got := sim.bodies(); len(got) != 0 {
		t.Errorf("the server got %d requests before the refusal, want none (the rate cell ran first)", len(got))
	}
}
