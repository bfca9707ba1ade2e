package bench

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/replay"
)

// planRun is a run of a matrix of rates on one shape, its stability
// settings defaulted from duration, after set has changed the spec.
func planRun(rates int, warmup, duration time.Duration, set func(*Spec)) *run {
	spec := &Spec{Warmup: warmup, Duration: duration, Repeats: 1}
	spec.Matrix.Shapes = []Shape{{Name: "s"}}
	for i := range rates {
		spec.Matrix.Rates = append(spec.Matrix.Rates, float64(i+1))
	}
	if set != nil {
		set(spec)
	}
	spec.Stability.applyDefaults(spec.Duration)
	return &run{spec: spec, traces: map[string]*replay.Trace{}, starter: startNow{}}
}

// TestRunPlan: the plan's arithmetic. A repeat is planned at its warm-up
// and its measured windows, and may take at most the warm-up's bound (the
// warm-up plus the duration, when no request completes) and every window
// the stability rule may extend it to (max_duration); a repeat that cannot
// be extended (the check off, a shard, a replay) is planned at its most.
func TestRunPlan(t *testing.T) {
	s := time.Second
	third := 10 * s / 3 // the default window of 10 s
	off := false
	for _, tc := range []struct {
		name          string
		r             *run
		targets       int
		units         int
		planned, most time.Duration // the matrix's
		measured      time.Duration // a repeat's
		fixed         string
	}{
		// The run: duration 10s, 3 cells, about 36 s planned; the
		// default windows (10 s / 3) measure 10 s, not 4 windows.
		{"the issue's run", planRun(3, 2*s, 10*s, nil), 1, 3, 3 * (2*s + 3*third), 3 * (12*s + 90*third), 3 * third, ""},
		{"repeats and targets", planRun(2, 0, 60*s, func(sp *Spec) { sp.Repeats = 3 }), 2, 12, 12 * 60 * s, 12 * (60*s + 300*s), 60 * s, ""},
		{"a window that does not divide the duration", planRun(1, s, 30*s, func(sp *Spec) { sp.Stability.Window = 20 * s }), 1, 1,
			41 * s, 31*s + 300*s, 40 * s, ""},
		{"max_warmup set", planRun(1, s, 30*s, func(sp *Spec) { sp.Stability.MaxDuration = time.Minute; sp.MaxWarmup = 5 * s }), 1, 1,
			31 * s, 5*s + 60*s, 30 * s, ""},
		{"max_duration set", planRun(1, s, 30*s, func(sp *Spec) { sp.Stability.MaxDuration = time.Minute }), 1, 1,
			31 * s, 31*s + 60*s, 30 * s, ""},
		{"the stability check off", planRun(1, s, 10*s, func(sp *Spec) { sp.Stability.Enabled = &off }), 1, 1,
			11 * s, 21 * s, 10 * s, "the stability check is off"},
		{"max_duration is the duration", planRun(1, s, 30*s, func(sp *Spec) { sp.Stability.MaxDuration = 30 * s }), 1, 1,
			31 * s, 31*s + 30*s, 30 * s, "stability.max_duration leaves no room"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := tc.r.runPlan(matrixGroups(tc.r.spec), tc.targets)
			planned, most := rp.totals()
			if len(rp.units) != tc.units || planned != tc.planned || most != tc.most || rp.measured != tc.measured || rp.fixed != tc.fixed {
				t.Errorf("%d units, %v planned, at most %v, %v measured, fixed %q; want %d, %v, %v, %v, %q",
					len(rp.units), planned, most, rp.measured, rp.fixed, tc.units, tc.planned, tc.most, tc.measured, tc.fixed)
			}
			if got := rp.planned(); len(got) != len(rp.units) || got[0] != rp.units[0].planned {
				t.Errorf("the progress's units %v", got)
			}
		})
	}

	t.Run("a shard is never extended", func(t *testing.T) {
		r := planRun(1, s, 30*s, nil)
		r.opts.Shard = Shard{Index: 0, Count: 2}
		rp := r.runPlan(matrixGroups(r.spec), 1)
		if planned, most := rp.totals(); planned != 31*s || most != 61*s || !strings.HasPrefix(rp.fixed, "a shard") {
			t.Errorf("%v planned, at most %v, fixed %q", planned, most, rp.fixed)
		}
	})

	// With the shards' clock every repeat after the first starts
	// --shard.slack after the previous one's planned end: the slack
	// between every two repeats is in the planned time and in the most,
	// none after the last.
	t.Run("the shards' slack", func(t *testing.T) {
		r := planRun(2, s, 30*s, func(sp *Spec) { sp.Repeats = 2 })
		r.opts.Shard = Shard{Index: 0, Count: 2}
		r.opts.StartAt = time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
		r.starter = newShardClock(r.opts.StartAt, 10*s)
		rp := r.runPlan(matrixGroups(r.spec), 1)
		if planned, most := rp.totals(); len(rp.units) != 4 || planned != 4*31*s+3*10*s || most != 4*61*s+3*10*s {
			t.Errorf("%d units, %v planned, at most %v; want 4, %v and %v", len(rp.units), planned, most, 4*31*s+3*10*s, 4*61*s+3*10*s)
		}
		// The progress counts the slack apart (newProgress's gap), not in
		// each unit's plan.
		if got := rp.planned(); got[0] != 31*s {
			t.Errorf("the progress's units %v", got)
		}
		var logs bytes.Buffer
		rp.log(slog.New(slog.NewTextHandler(&logs, nil)))
		for _, want := range []string{"planned=2m34s", "at_most=4m34s", "start_at=2026-12-03T21:00:00Z", "shard_slack=10s"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the plan's log %q, want it to say %q", logs.String(), want)
			}
		}
	})

	t.Run("replays", func(t *testing.T) {
		r := planRun(1, 2*s, 10*s, func(sp *Spec) {
			sp.Matrix.Replays = []ReplaySpec{
				{Name: "tr", Replay: config.Replay{Speed: 2}},
				{Name: "loop", Replay: config.Replay{Speed: 1, Loop: true}},
			}
		})
		r.traces["tr"] = &replay.Trace{Records: []replay.Record{{Offset: 0}, {Offset: 40 * s}}}
		r.traces["loop"] = &replay.Trace{Records: []replay.Record{{Offset: 0}, {Offset: 5 * s}}}
		groups := matrixGroups(r.spec)
		rp := r.runPlan(groups, 1)
		third := 10 * s / 3
		want := []repeatSpan{{2*s + 3*third, 12*s + 90*third}, {22 * s, 22 * s}, {2*s + 3*third, 2*s + 3*third}}
		if len(rp.units) != len(want) {
			t.Fatalf("units %v, want %v", rp.units, want)
		}
		for i, u := range rp.units {
			if u != want[i] {
				t.Errorf("unit %d (%s): %v, want %v", i, groups[i].name, u, want[i])
			}
		}
		if !rp.loads || !rp.replays {
			t.Errorf("loads %v, replays %v", rp.loads, rp.replays)
		}
	})
}

// TestPlanLine: the line said before the first repeat states the plan:
// cells and repeats, a repeat's warm-up with its bound, its measured time
// with its extension, and the planned time beside the most.
func TestPlanLine(t *testing.T) {
	s := time.Second
	off := false
	for _, tc := range []struct {
		name    string
		r       *run
		targets int
		want    string
	}{
		{"the issue's run", planRun(3, 2*s, 10*s, nil), 1,
			"plan: 3 cells × 1 repeat; each repeat: warm-up 2s (longer until the pipeline is full, at most 12s), " +
				"then 10s measured, run on until the stability rule judges it, up to 5m0s; " +
				"36s planned, at most 15m36s (the requests in flight at each repeat's end aside)"},
		{"no warm-up, repeats", planRun(1, 0, 60*s, func(sp *Spec) { sp.Repeats = 3 }), 2,
			"plan: 2 cells × 3 repeats; each repeat: warm-up until the pipeline is full (at most 1m0s), " +
				"then 1m0s measured, run on until the stability rule judges it, up to 5m0s; " +
				"6m0s planned, at most 36m0s (the requests in flight at each repeat's end aside)"},
		{"the check off, then a sweep", planRun(1, s, 10*s, func(sp *Spec) { sp.Stability.Enabled = &off; sp.Sweep = &SweepSpec{} }), 1,
			"plan: 1 cell × 1 repeat; each repeat: warm-up 1s (longer until the pipeline is full, at most 11s), " +
				"then 10s measured, never extended (the stability check is off); 11s planned, at most 21s (the requests in flight at each repeat's end aside); " +
				"then the rate sweep, whose length depends on the rates that pass"},
		{"a sweep alone", planRun(0, s, 10*s, func(sp *Spec) { sp.Sweep = &SweepSpec{} }), 1,
			"plan: the rate sweep alone, whose length depends on the rates that pass"},
		{"a window that does not divide the duration", planRun(1, s, 30*s, func(sp *Spec) { sp.Stability.Window = 20 * s }), 1,
			"plan: 1 cell × 1 repeat; each repeat: warm-up 1s (longer until the pipeline is full, at most 31s), " +
				"then 40s measured (the duration, 30s, in whole windows of 20s), run on until the stability rule judges it, up to 5m0s; " +
				"41s planned, at most 5m31s (the requests in flight at each repeat's end aside)"},
		{"nothing", planRun(0, s, 10*s, nil), 1, ""},
		{"the shards' clock", func() *run {
			r := planRun(1, s, 10*s, func(sp *Spec) { sp.Repeats = 3 })
			r.opts.Shard = Shard{Index: 1, Count: 2}
			r.opts.StartAt = time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
			r.starter = newShardClock(r.opts.StartAt, 30*s)
			return r
		}(), 1,
			"plan: 1 cell × 3 repeats; each repeat: warm-up 1s (longer until the pipeline is full, at most 11s), " +
				"then 10s measured, never extended (a shard: bench merge judges the pooled windows); " +
				"the shards' clock: the first repeat at 2026-12-03T21:00:00Z (--shard.start-at), each next one 30s (--shard.slack) after the previous one's planned end; " +
				"1m33s planned, at most 2m3s (the requests in flight at each repeat's end aside)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.runPlan(matrixGroups(tc.r.spec), tc.targets).line(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	r := planRun(0, s, 10*s, func(sp *Spec) { sp.Matrix.Replays = []ReplaySpec{{Name: "tr", Replay: config.Replay{Speed: 1}}} })
	r.traces["tr"] = &replay.Trace{Records: []replay.Record{{Offset: 0}, {Offset: 20 * s}}}
	want := "plan: 1 cell × 1 repeat; a replay: its trace's window after the warm-up, never extended; 21s planned (the requests in flight at each repeat's end aside)"
	if got := r.runPlan(matrixGroups(r.spec), 1).line(); got != want {
		t.Errorf("replays alone:\ngot  %q\nwant %q", got, want)
	}
}
