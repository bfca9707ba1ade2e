package bench

import (
	"bytes"
	"github.com/infer-exporter/infer_exporter/bench/stability"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// TestETA: the time left is counted in the repeats' planned durations,
// not in their number: what remains of the running one at its current
// length (its plan, or the limit its warm-up or the stability rule moved
// it to; nothing once it is overdue) and the plans after it.
func TestETA(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name    string
		plans   []time.Duration
		done    int
		length  time.Duration
		elapsed time.Duration
		want    time.Duration
	}{
		{"nothing run", []time.Duration{10 * s, 10 * s}, 0, 0, 0, 20 * s},
		{"into the first", []time.Duration{10 * s, 10 * s}, 0, 0, 4 * s, 16 * s},
		{"first overdue", []time.Duration{10 * s, 10 * s}, 0, 0, 13 * s, 10 * s},
		{"a long replay after short rates", []time.Duration{2 * s, 2 * s, 60 * s}, 2, 0, 0, 60 * s},
		{"short rates after a long replay", []time.Duration{60 * s, 2 * s, 2 * s}, 1, 0, s, 3 * s},
		{"all done", []time.Duration{10 * s}, 1, 0, 0, 0},
		{"past the end (a sweep)", []time.Duration{10 * s}, 2, 0, 5 * s, 0},
		{"no units", nil, 0, 0, 0, 0},
		{"said as planned", []time.Duration{12 * s, 12 * s}, 0, 12 * s, 5 * s, 19 * s},
		// The run: 3 repeats of 12 s planned, the first extended
		// to 30 s measured: 21 s in, 11 s of it and 24 s of plans left.
		{"extended by the stability rule", []time.Duration{12 * s, 12 * s, 12 * s}, 0, 32 * s, 21 * s, 35 * s},
		{"extended, then overdue while draining", []time.Duration{12 * s, 12 * s}, 0, 32 * s, 34 * s, 12 * s},
		{"a warm-up longer than planned", []time.Duration{12 * s, 12 * s}, 1, 14 * s, 3 * s, 11 * s},
		{"the later units count their plan, not their most", []time.Duration{12 * s, 12 * s, 12 * s}, 1, 0, 0, 24 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := etaOf(tc.plans, 0, tc.done, tc.length, tc.elapsed); got != tc.want {
				t.Errorf("etaOf(%v, 0, %d, %v, %v) = %v, want %v", tc.plans, tc.done, tc.length, tc.elapsed, got, tc.want)
			}
		})
	}
}

// TestETAShardSlack: with the shards' clock, each repeat after the first
// starts --shard.slack after the previous one's planned end, so the time
// left counts a slack between every two repeats; the running repeat's
// drain eats into its slack rather than adding to the time left, an
// overrun brings the next start no nearer than now, and the last repeat
// has no slack after it. A repeat that waits for the agreed start counts
// the wait in its length.
func TestETAShardSlack(t *testing.T) {
	s := time.Second
	three := []time.Duration{10 * s, 10 * s, 10 * s}
	for _, tc := range []struct {
		name                  string
		plans                 []time.Duration
		done                  int
		length, elapsed, want time.Duration
	}{
		{"nothing run", three, 0, 0, 0, 40 * s},
		{"into the first", three, 0, 0, 4 * s, 36 * s},
		{"the first draining into its slack", three, 0, 0, 13 * s, 27 * s},
		{"the first overran its slack", three, 0, 0, 20 * s, 25 * s},
		{"the last one: no slack after it", three, 2, 0, 4 * s, 6 * s},
		{"waiting 30 s for --shard.start-at", three, 0, 40 * s, 0, 70 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := etaOf(tc.plans, 5*s, tc.done, tc.length, tc.elapsed); got != tc.want {
				t.Errorf("etaOf(%v, 5s, %d, %v, %v) = %v, want %v", tc.plans, tc.done, tc.length, tc.elapsed, got, tc.want)
			}
		})
	}
}

// TestLengthText: the bar's elapsed/length of the running repeat never
// shows more seconds than its length without a reason: a length that is
// not the plan says why, and a repeat past its length says it drains.
func TestLengthText(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name            string
		elapsed, length time.Duration
		why             string
		inFlight        int
		want            string
	}{
		{"as planned", 5 * s, 12 * s, "", 3, "5/12 s"},
		{"at its end", 12400 * time.Millisecond, 12 * s, "", 3, "12/12 s"},
		{"draining", 14 * s, 12 * s, "", 3, "14/12 s (draining 3 in flight)"},
		{"not known", 3 * s, 0, "", 1, "3/? s"},
		{"extended", 21 * s, 32 * s, "extended to 30s measured: drift +14% suggestive", 4,
			"21/32 s (extended to 30s measured: drift +14% suggestive)"},
		{"extended, then draining", 34 * s, 32 * s, "extended to 30s measured: drift +14% suggestive", 2,
			"34/32 s (extended to 30s measured: drift +14% suggestive; draining 2 in flight)"},
		{"warm-up still on", 5 * s, 15 * s, "warm-up: until the pipeline is full", 8, "5/15 s (warm-up: until the pipeline is full)"},
		{"warm-up longer, then extended", 20 * s, 34 * s,
			"warm-up extended to 4.0 s, until the pipeline was full; extended to 30s measured: drift +12% suggestive", 1,
			"20/34 s (warm-up extended to 4.0 s, until the pipeline was full; extended to 30s measured: drift +12% suggestive)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lengthText(tc.elapsed, tc.length, tc.why, tc.inFlight); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestExtensionWhy: an extension says the measured time it extends to and
// why the span so far was not judged.
func TestExtensionWhy(t *testing.T) {
	for _, tc := range []struct {
		v    stability.Verdict
		want string
	}{
		{stability.Verdict{Growth: 0.137, GrowthLo: -0.05, GrowthHi: 0.33, N: 80}, "extended to 30s measured: not judged yet (drift +14% ± 19%)"},
		{stability.Verdict{Growth: math.NaN(), N: 12}, "extended to 30s measured: not judged yet (12 requests)"},
	} {
		if got := extensionWhy(30*time.Second, tc.v); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestProgressLimit: a limit told to the progress becomes the running
// repeat's length, with its reason; none is kept past the repeat's end.
func TestProgressLimit(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, nil, []time.Duration{12 * time.Second}, 0)
	p.begin("a", 12*time.Second)
	p.mu.Lock()
	cur := p.cur
	p.mu.Unlock()
	if l, why := cur.current(); l != 12*time.Second || why != "" {
		t.Errorf("before any limit: %v %q, want the plan", l, why)
	}
	p.limit(cur.start.Add(32*time.Second), "extended")
	if l, why := cur.current(); l != 32*time.Second || why != "extended" {
		t.Errorf("after the limit: %v %q", l, why)
	}
	p.step("")
	p.limit(time.Now().Add(time.Hour), "after the end") // no repeat runs: nothing to follow
	p.close()
	var nilProgress *progress
	nilProgress.limit(time.Now(), "x") // says nothing
	nilProgress.say("x")
}

// TestProgressSay: the plan is said on a line of its own, in plain lines
// or before the bar (whose line is cleared first).
func TestProgressSay(t *testing.T) {
	var lines, bar bytes.Buffer
	p := newProgress(nil, &lines, []time.Duration{time.Second}, 0)
	p.say("plan: 1 cell")
	p.step("cell 1/1")
	p.close()
	if lines.String() != "plan: 1 cell\ncell 1/1\n" {
		t.Errorf("lines %q", lines.String())
	}
	p = newProgress(&bar, nil, []time.Duration{time.Second}, 0)
	p.say("plan: 1 cell")
	p.close()
	if !strings.Contains(bar.String(), "\r\033[Kplan: 1 cell\n") {
		t.Errorf("bar %q: the plan not on a line of its own", bar.String())
	}
}

// TestProgressLines: without a terminal, one plain line per repeat when it
// ends, from the repeat's figures; nothing without a writer.
func TestProgressLines(t *testing.T) {
	st := report.Stats{Requests: 42, Successes: 39, Outcomes: map[string]int{"success": 39, "dropped": 2, "timeout": 1},
		RequestsPerSecond: 3.984, TTFT: report.Dist{Count: 40, P50: 0.1234}}
	for _, tc := range []struct {
		name            string
		i, n, r, rs     int
		st              report.Stats
		wall            time.Duration
		longer          string
		want            string
		cellName, shape string
	}{
		{"one repeat", 2, 4, 1, 1, st, 10 * time.Second, "",
			"cell 2/4 openai/sim-model/w rate 4: 40 sent, 39 ok, 3.98 req/s, TTFT p50 123 ms (10.0 s)", "openai", "w"},
		{"repeats", 1, 2, 2, 3, st, 12345 * time.Millisecond, "",
			"cell 1/2 repeat 2/3 openai/sim-model/w rate 4: 40 sent, 39 ok, 3.98 req/s, TTFT p50 123 ms (12.3 s)", "openai", "w"},
		{"nothing answered", 1, 1, 1, 1, report.Stats{Requests: 3, Outcomes: map[string]int{"dropped": 3}}, time.Second, "",
			"cell 1/1 a/sim-model/s rate 4: 0 sent, 0 ok, 0.00 req/s, TTFT p50 - (1.0 s)", "a", "s"},
		{"longer than planned", 1, 3, 1, 1, st, 32500 * time.Millisecond, "extended 20 s for stability",
			"cell 1/3 openai/sim-model/w rate 4: 40 sent, 39 ok, 3.98 req/s, TTFT p50 123 ms (32.5 s; extended 20 s for stability)", "openai", "w"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := render.CellName(tc.cellName, "sim-model", report.Load{Kind: report.LoadRate, Value: 4}, tc.shape)
			if got := progressLine(tc.i, tc.n, tc.r, tc.rs, name, &tc.st, tc.wall, tc.longer); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	var b bytes.Buffer
	p := newProgress(nil, &b, []time.Duration{time.Second, time.Second}, 0)
	if w := p.begin("a", time.Second); w != nil {
		t.Errorf("plain lines follow no requests, got an observer")
	}
	p.step("first")
	p.step("second")
	p.close()
	if b.String() != "first\nsecond\n" {
		t.Errorf("lines %q", b.String())
	}
	if newProgress(nil, nil, nil, 0) != nil {
		t.Error("a progress without a writer")
	}
}

// TestLongerThanPlanned: a repeat's plain line says why it ran longer
// than planned: its warm-up past the configured one, the windows the
// stability rule added; nothing when it ran as planned.
func TestLongerThanPlanned(t *testing.T) {
	warmup := 2 * time.Second
	for _, tc := range []struct {
		name     string
		warmup   float64
		extended int
		window   float64
		want     string
	}{
		{"as planned", 2, 0, 10.0 / 3, ""},
		{"the warm-up read back from seconds", 2.0000001, 0, 10.0 / 3, ""},
		{"a longer warm-up", 4.06, 0, 10.0 / 3, "warm-up 4.1 s, not 2.0 s"},
		{"extended", 2, 6, 10.0 / 3, "extended 20 s for stability"},
		{"both", 3, 3, 5, "warm-up 3.0 s, not 2.0 s, extended 15 s for stability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := report.RepeatResult{WarmupSeconds: tc.warmup, Stability: report.StabilityResult{Extended: tc.extended, WindowSeconds: tc.window}}
			if got := longerThanPlanned(&res, warmup); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCellName: a cell for people, target/model/shape and its load.
func TestCellName(t *testing.T) {
	for _, tc := range []struct {
		target, model string
		load          report.Load
		shape, want   string
	}{
		{"vllm", "meta-llama/Llama-3.1-8B", report.Load{Kind: report.LoadRate, Value: 4}, "chat", "vllm/meta-llama/Llama-3.1-8B/chat rate 4"},
		{"a", "m", report.Load{Kind: report.LoadConcurrency, Value: 8}, "s", "a/m/s concurrency 8"},
		{"a", "m", report.Load{Kind: report.LoadReplay, Value: 0.5}, "azure", "a/m/azure replay x0.5"},
		{"a", "", report.Load{Kind: report.LoadRate, Value: 0.25}, "s", "a/s rate 0.25"},
	} {
		if got := render.CellName(tc.target, tc.model, tc.load, tc.shape); got != tc.want {
			t.Errorf("render.CellName = %q, want %q", got, tc.want)
		}
	}
}

// TestExtensionTellsLimit: the repeat's first limit is told as it becomes
// known, with why it is not the plan: a floor that grows while the
// warm-up waits for a completion past its configured length, then the
// warm-up cut at its bound; nothing but the limit for a warm-up as
// configured.
func TestExtensionTellsLimit(t *testing.T) {
	type told struct {
		limit   time.Duration
		why     string
		settled bool
	}
	win := repeatWindows{window: time.Second, base: 3, most: 9, check: true}
	ext := func(rec *recorder, got *[]told) *extension {
		return &extension{rec: rec, win: win, k: win.base, res: &report.StabilityResult{},
			tell: func(l time.Duration, why string, settled bool) { *got = append(*got, told{l, why, settled}) }}
	}

	// Past its configured second, no completion within its hour's bound.
	var got []told
	rec := newRecorder(time.Now().Add(-90*time.Second), time.Second, time.Hour, time.Second, config.SLO{}, 10, 10, 1)
	if _, ok := ext(rec, &got).first(); ok || len(got) != 1 || got[0].settled || got[0].why != "warm-up: until the pipeline is full" ||
		got[0].limit < 93*time.Second {
		t.Errorf("an open warm-up: %+v, want a floor of the base windows from now, unsettled", got)
	}

	// Past its bound of 2 s, with no completion: cut there.
	got = nil
	rec = newRecorder(time.Now().Add(-time.Hour), time.Second, 2*time.Second, time.Second, config.SLO{}, 10, 10, 1)
	if l, ok := ext(rec, &got).first(); !ok || l != 5*time.Second || len(got) != 1 || !got[0].settled ||
		got[0].why != "warm-up cut at its bound, 2.0 s: the pipeline had not filled" {
		t.Errorf("a warm-up cut at its bound: %v %v %+v", l, ok, got)
	}

	// Decided as configured: the limit, without a reason.
	got = nil
	rec = newRecorderAt(time.Now(), time.Second, config.SLO{}, 10, 10, 1)
	if l, ok := ext(rec, &got).first(); !ok || l != 3*time.Second || len(got) != 1 || got[0].why != "" {
		t.Errorf("a warm-up as configured: %v %v %+v", l, ok, got)
	}
}

// TestProgressFitsTheTerminal: on a terminal of 60 columns every redraw of
// the bar, a long cell name and its figures included, fits in 59
// characters (a full line would wrap, and each redraw scroll), keeping the
// bar's head and ending where it was cut with "…"; without a bound the
// line is whole. $COLUMNS sets the width; a terminal that says nothing
// is taken as 80 columns.
func TestProgressFitsTheTerminal(t *testing.T) {
	long := "vllm-h200-tensor-parallel-8/meta-llama/Llama-3.1-405B-Instruct-FP8/chat rate 16 repeat 2 of 3"
	for _, tc := range []struct {
		columns int
		cut     bool
	}{{60, true}, {0, false}} {
		var b bytes.Buffer
		p := newProgress(&b, nil, []time.Duration{12 * time.Second, 12 * time.Second}, 0)
		p.columns = tc.columns
		p.begin(long, 12*time.Second)
		p.close()
		for _, line := range strings.Split(b.String(), "\r\033[K") {
			line = strings.TrimSuffix(line, "\n")
			if line == "" {
				continue
			}
			n := utf8.RuneCountInString(line)
			if tc.cut && (n >= tc.columns || !strings.HasSuffix(line, "…") || !strings.HasPrefix(line, "[....")) {
				t.Errorf("%d columns: a line of %d characters: %q", tc.columns, n, line)
			}
			if !tc.cut && !strings.Contains(line, long) {
				t.Errorf("no bound: the line lost the cell's name: %q", line)
			}
		}
	}
	if got := fitColumns("short", 60); got != "short" {
		t.Errorf("a short line was changed: %q", got)
	}
	if got := terminalColumns("120", nil); got != 120 {
		t.Errorf("COLUMNS=120: %d columns", got)
	}
	if got := terminalColumns("", nil); got != DefaultColumns {
		t.Errorf("no COLUMNS and no terminal: %d columns, want %d", got, DefaultColumns)
	}
	if got := terminalColumns("wide", nil); got != DefaultColumns {
		t.Errorf("COLUMNS=wide: %d columns, want %d", got, DefaultColumns)
	}
}
