package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
)

// TestETA: the time left is counted in the repeats' planned durations,
// not in their number: what remains of the running one (nothing once it
// is overdue) and the plans after it.
func TestETA(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name    string
		plans   []time.Duration
		done    int
		elapsed time.Duration
		want    time.Duration
	}{
		{"nothing run", []time.Duration{10 * s, 10 * s}, 0, 0, 20 * s},
		{"into the first", []time.Duration{10 * s, 10 * s}, 0, 4 * s, 16 * s},
		{"first overdue", []time.Duration{10 * s, 10 * s}, 0, 13 * s, 10 * s},
		{"a long replay after short rates", []time.Duration{2 * s, 2 * s, 60 * s}, 2, 0, 60 * s},
		{"short rates after a long replay", []time.Duration{60 * s, 2 * s, 2 * s}, 1, s, 3 * s},
		{"all done", []time.Duration{10 * s}, 1, 0, 0},
		{"past the end (a sweep)", []time.Duration{10 * s}, 2, 5 * s, 0},
		{"no units", nil, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := etaOf(tc.plans, tc.done, tc.elapsed); got != tc.want {
				t.Errorf("etaOf(%v, %d, %v) = %v, want %v", tc.plans, tc.done, tc.elapsed, got, tc.want)
			}
		})
	}
}

// TestProgressLines: without a terminal, one plain line per repeat when it
// ends, from the repeat's figures; nothing without a writer.
func TestProgressLines(t *testing.T) {
	st := Stats{Requests: 42, Successes: 39, Outcomes: map[string]int{"success": 39, "dropped": 2, "timeout": 1},
		RequestsPerSecond: 3.984, TTFT: Dist{Count: 40, P50: 0.1234}}
	for _, tc := range []struct {
		name            string
		i, n, r, rs     int
		st              Stats
		wall            time.Duration
		want            string
		cellName, shape string
	}{
		{"one repeat", 2, 4, 1, 1, st, 10 * time.Second,
			"cell 2/4 openai/sim-model/w rate 4: 40 sent, 39 ok, 3.98 req/s, TTFT p50 123 ms (10.0 s)", "openai", "w"},
		{"repeats", 1, 2, 2, 3, st, 12345 * time.Millisecond,
			"cell 1/2 repeat 2/3 openai/sim-model/w rate 4: 40 sent, 39 ok, 3.98 req/s, TTFT p50 123 ms (12.3 s)", "openai", "w"},
		{"nothing answered", 1, 1, 1, 1, Stats{Requests: 3, Outcomes: map[string]int{"dropped": 3}}, time.Second,
			"cell 1/1 a/sim-model/s rate 4: 0 sent, 0 ok, 0.00 req/s, TTFT p50 - (1.0 s)", "a", "s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := render.CellName(tc.cellName, "sim-model", Load{Kind: LoadRate, Value: 4}, tc.shape)
			if got := progressLine(tc.i, tc.n, tc.r, tc.rs, name, &tc.st, tc.wall); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	var b bytes.Buffer
	p := newProgress(nil, &b, []time.Duration{time.Second, time.Second})
	if w := p.begin("a", time.Second); w != nil {
		t.Errorf("plain lines follow no requests, got an observer")
	}
	p.step("first")
	p.step("second")
	p.close()
	if b.String() != "first\nsecond\n" {
		t.Errorf("lines %q", b.String())
	}
	if newProgress(nil, nil, nil) != nil {
		t.Error("a progress without a writer")
	}
}

// TestCellName: a cell for people, target/model/shape and its load.
func TestCellName(t *testing.T) {
	for _, tc := range []struct {
		target, model string
		load          Load
		shape, want   string
	}{
		{"vllm", "meta-llama/Llama-3.1-8B", Load{Kind: LoadRate, Value: 4}, "chat", "vllm/meta-llama/Llama-3.1-8B/chat rate 4"},
		{"a", "m", Load{Kind: LoadConcurrency, Value: 8}, "s", "a/m/s concurrency 8"},
		{"a", "m", Load{Kind: LoadReplay, Value: 0.5}, "azure", "a/m/azure replay x0.5"},
		{"a", "", Load{Kind: LoadRate, Value: 0.25}, "s", "a/s rate 0.25"},
	} {
		if got := render.CellName(tc.target, tc.model, tc.load, tc.shape); got != tc.want {
			t.Errorf("render.CellName = %q, want %q", got, tc.want)
		}
	}
}
