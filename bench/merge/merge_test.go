package merge

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// fakeRun is the Run of a split run of one target at two rates, one
// repeat each: what the bench would read from the shards' configuration.
type fakeRun struct {
	figures int   // calls of Figures
	pooled  []int // the pooled measured count of each cell's repeat 0
	err     error // Figures' error
}

const fakeConfig = "bench: {seed: 7}\n"

func (f *fakeRun) Matrix() Matrix {
	return Matrix{Seed: 7, MaxSamplesPerRepeat: 100, Targets: []string{"a"}, Repeats: 1,
		Groups: []Group{{Shape: "s", Load: report.Load{Kind: report.LoadRate, Value: 2}}, {Shape: "s", Load: report.Load{Kind: report.LoadRate, Value: 4}}}}
}

func (f *fakeRun) MaxWindows(*report.CellResult, int) int { return 8 }

func (f *fakeRun) Figures(ctx context.Context, pooled *report.Report) error {
	f.figures++
	for _, c := range pooled.Shard.Cells {
		f.pooled = append(f.pooled, c.Repeats[0].Measured)
	}
	return f.err
}

// reader is a ReadRun that gives run for fakeConfig and refuses any other
// configuration.
func reader(run *fakeRun) ReadRun {
	return func(_ context.Context, text []byte, field string) (Run, error) {
		if string(text) != fakeConfig {
			return nil, errors.New(field + ": not the configuration")
		}
		return run, nil
	}
}

// shardOf is shard i of n of the fake run: each cell's one repeat
// measured `measured` requests, all successful, in two windows.
func shardOf(i, n, measured int) ShardFile {
	started := time.Date(2026, 1, 2, 3, 4, 5+i, 0, time.UTC)
	r := &report.Report{Schema: report.Schema,
		Environment: report.Environment{Config: fakeConfig, ConfigSHA256: "c0ffee", Seed: 7, MaxSamplesRepeat: 100,
			Started: started, Finished: started.Add(time.Minute),
			Inputs: []report.Input{{Kind: report.InputConfig, SHA256: "c0ffee"}}},
		Shard: &report.ShardPart{Index: i, Count: n}}
	for _, g := range (&fakeRun{}).Matrix().Groups {
		key := report.CellKey("a", g.Load, g.Shape)
		r.Cells = append(r.Cells, report.CellResult{Key: key, Target: "a", Load: g.Load, Shape: g.Shape,
			Repeats: []report.RepeatResult{{Started: started, PromptsDrawn: measured, SchedulingLatencyP99: 0.001 * float64(i+1),
				Stats: report.Stats{Requests: measured, Successes: measured}}}})
		st := report.RecorderState{WindowSeconds: 1, Windows: 2, SpanSeconds: 2, Measured: measured, Goodput: measured,
			Outcomes: map[string]int{"success": measured}, WinTokens: []float64{float64(4 * measured), 0},
			WinSuccesses: []int{measured, 0}, WinSent: []int{measured, 0}, RecordsSeen: measured}
		for k := 0; k < measured; k++ {
			st.Records = append(st.Records, report.Record{Sched: float64(k), E2E: 0.1, TTFT: 0.01, TTFA: 0.01, TPOT: 0.02, Lag: 0.0001, Measured: true})
		}
		r.Shard.Cells = append(r.Shard.Cells, report.ShardCells{Key: key, Repeats: []report.RecorderState{st}})
	}
	return ShardFile{File: "shard-" + string(rune('0'+i)) + ".json", Report: r}
}

// TestMergePoolsShards: the shards of one run, in any order, merge into
// one report: their recorders pooled for Run.Figures (the counts added up,
// the records united), their results carried over (the prompts drawn
// added up, the worst scheduling latency), the run spanning the earliest
// start to the latest end; the merged report is no shard's.
func TestMergePoolsShards(t *testing.T) {
	run := &fakeRun{}
	shards := []ShardFile{shardOf(2, 3, 5), shardOf(0, 3, 3), shardOf(1, 3, 4)}
	got, err := Merge(context.Background(), shards, reader(run))
	if err != nil {
		t.Fatal(err)
	}
	if run.figures != 1 || !slices.Equal(run.pooled, []int{12, 12}) {
		t.Errorf("Figures called %d times on measured %v, want once on 12 and 12", run.figures, run.pooled)
	}
	if got.Shard != nil || got.MergedShards != 3 || len(got.Cells) != 2 {
		t.Fatalf("merged: shard part %v, %d shards, %d cells; want none, 3, 2", got.Shard, got.MergedShards, len(got.Cells))
	}
	first := shards[1].Report.Environment.Started
	if !got.Environment.Started.Equal(first) || !got.Environment.Finished.Equal(first.Add(time.Minute+2*time.Second)) {
		t.Errorf("run from %v to %v, want the earliest start %v to the latest end", got.Environment.Started, got.Environment.Finished, first)
	}
	for _, c := range got.Cells {
		rr := c.Repeats[0]
		if rr.PromptsDrawn != 12 || rr.SchedulingLatencyP99 != 0.003 || !rr.Started.Equal(first) || len(rr.ShardStartOffsets) != 3 {
			t.Errorf("%s: prompts %d, scheduling p99 %v, started %v, offsets %v; want 12, 0.003, %v, 3 offsets",
				c.Key, rr.PromptsDrawn, rr.SchedulingLatencyP99, rr.Started, rr.ShardStartOffsets, first)
		}
	}
	// Figures' error ends the merge.
	run = &fakeRun{err: context.Canceled}
	if _, err := Merge(context.Background(), []ShardFile{shardOf(0, 1, 2)}, reader(run)); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "merge interrupted") {
		t.Errorf("Figures failed: %v, want merge interrupted", err)
	}
}

// TestMergeRefusesMismatchedShards: shards that are not the N shards of
// one run, or that claim what their configuration does not allow, are
// refused with an error that names the file and the field; no report is
// made and no figure computed.
func TestMergeRefusesMismatchedShards(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shards func() []ShardFile
		want   string
	}{
		{"none", func() []ShardFile { return nil }, "no shard report"},
		{"not a shard", func() []ShardFile { s := shardOf(0, 1, 2); s.Report.Shard = nil; return []ShardFile{s} }, "shard-0.json: shard: absent"},
		{"no report", func() []ShardFile { return []ShardFile{{}} }, "report 1: no report"},
		{"index beyond count", func() []ShardFile { return []ShardFile{shardOf(2, 2, 1)} }, "shard-2.json: shard.index: 2 is not in [0, 2)"},
		{"another count", func() []ShardFile { return []ShardFile{shardOf(0, 2, 1), shardOf(1, 3, 1)} }, "shard-1.json: shard.count: shard 1/3 beside shards of 2"},
		{"repeated", func() []ShardFile { return []ShardFile{shardOf(0, 2, 1), shardOf(0, 2, 1)} }, "shard 1 is missing or repeated"},
		{"missing", func() []ShardFile { return []ShardFile{shardOf(0, 3, 1), shardOf(1, 3, 1)} }, "2 reports given, shard 2 missing"},
		{"interrupted", func() []ShardFile {
			s := shardOf(1, 2, 1)
			s.Report.Interrupted = true
			return []ShardFile{shardOf(0, 2, 1), s}
		}, "shard-1.json: interrupted"},
		{"another configuration", func() []ShardFile {
			s := shardOf(1, 2, 1)
			s.Report.Environment.ConfigSHA256 = "beef"
			return []ShardFile{shardOf(0, 2, 1), s}
		}, "shard-1.json: environment.config_sha256: shard 1 ran configuration beef"},
		{"edited configuration", func() []ShardFile {
			s := shardOf(1, 2, 1)
			s.Report.Environment.Config += "# edited\n"
			return []ShardFile{shardOf(0, 2, 1), s}
		}, "shard-1.json: environment.config: differs"},
		{"unreadable configuration", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Environment.Config = "x"
			return []ShardFile{s}
		}, "shard-0.json: environment.config: not the configuration"},
		{"another seed", func() []ShardFile { s := shardOf(0, 1, 1); s.Report.Environment.Seed = 8; return []ShardFile{s} }, "shard-0.json: environment.seed: 8"},
		{"other inputs", func() []ShardFile {
			s := shardOf(1, 2, 1)
			s.Report.Environment.Inputs = append(s.Report.Environment.Inputs, report.Input{Kind: report.InputTrace, Name: "t", SHA256: "00"})
			return []ShardFile{shardOf(0, 2, 1), s}
		}, "shard-1.json: environment.inputs: trace t is not among shard-0.json's inputs"},
		{"a cell short", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Cells = s.Report.Cells[:1]
			return []ShardFile{s}
		}, "shard-0.json: cells: 1 cells, its configuration's matrix has 2"},
		{"another cell", func() []ShardFile {
			s := shardOf(1, 2, 1)
			s.Report.Shard.Cells[1].Key = "a/rate=5/s"
			return []ShardFile{shardOf(0, 2, 1), s}
		}, `shard-1.json: shard.cells[1].key: "a/rate=5/s", shard 0 has "a/rate=4/s"`},
		{"too many windows", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Shard.Cells[0].Repeats[0].Windows = 100000000
			return []ShardFile{s}
		}, "shard-0.json: shard.cells[0].repeats[0].windows: 100000000 exceeds the 8 windows"},
		{"more goodput than measured", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Shard.Cells[0].Repeats[0].Goodput = 2
			return []ShardFile{s}
		}, "shard.cells[0].repeats[0].goodput: 2 above measured 1"},
		{"an unknown outcome", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Shard.Cells[1].Repeats[0].Outcomes["teapot"] = 1
			return []ShardFile{s}
		}, `shard.cells[1].repeats[0].outcomes: "teapot" is not an outcome`},
		{"more records than kept", func() []ShardFile {
			s := shardOf(0, 1, 101)
			return []ShardFile{s}
		}, "records: 101 records, above its configuration's max_samples_per_repeat 100"},
		{"a negative count", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Cells[0].Repeats[0].PromptsDrawn = -1
			return []ShardFile{s}
		}, "shard-0.json: cells[0].repeats[0].prompts_drawn: -1 is not a count"},
		{"an endless latency", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Shard.Cells[0].Repeats[0].Records[0].E2E = 1e300
			return []ShardFile{s}
		}, "shard.cells[0].repeats[0].records[0].e2e: 1e+300 is not a duration"},
		{"an unknown client verdict", func() []ShardFile {
			s := shardOf(0, 1, 1)
			s.Report.Cells[0].Repeats[0].Client = &report.ClientCheck{State: "fine"}
			return []ShardFile{s}
		}, `cells[0].repeats[0].client.state: "fine" is not a client verdict`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := &fakeRun{}
			got, err := Merge(context.Background(), tc.shards(), reader(run))
			if err == nil || got != nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Merge = %v, %v; want an error with %q", got, err, tc.want)
			}
			if run.figures != 0 {
				t.Error("figures computed for refused shards")
			}
		})
	}
	// A context already ended: no merge.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Merge(ctx, []ShardFile{shardOf(0, 2, 1), shardOf(1, 2, 1)}, reader(&fakeRun{})); !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v", err)
	}
}

// TestPoolStates: the recorders of one repeat add up, window by window;
// the records are the union while no shard sampled, and a uniform share
// at the lowest sampling fraction when one did.
func TestPoolStates(t *testing.T) {
	recs := func(n int) []report.Record { return make([]report.Record, n) }
	a := report.RecorderState{WindowSeconds: 1, Windows: 2, SpanSeconds: 2, Measured: 10, Goodput: 8, ReasoningTokens: 5,
		Outcomes: map[string]int{"success": 9, "http_5xx": 1}, HTTPErrors: map[string]int{"503": 1},
		WinTokens: []float64{10, 20}, WinSuccesses: []int{4, 5}, WinE2E: [][]float64{{0.1}, {0.2}},
		StructuredChecks: map[string]int{"valid": 3}, InFlightCap: 4,
		Records: recs(10), RecordsSeen: 10, ITL: []float64{0.01, 0.02}, ITLSeen: 2,
		Points: []report.StabilityPoint{{Done: 1}}, PointsSeen: 1}
	b := report.RecorderState{WindowSeconds: 1, Windows: 3, SpanSeconds: 3, Measured: 20, Goodput: 20,
		Outcomes:  map[string]int{"success": 19, "timeout": 1},
		WinTokens: []float64{1, 2, 3}, WinSuccesses: []int{6, 7, 6}, WinE2E: [][]float64{{0.3}, {}, {0.5}},
		StructuredChecks: map[string]int{"valid": 1, "invalid_json": 1}, InFlightCap: 4,
		Records: recs(5), RecordsSeen: 20, ITL: []float64{0.03}, ITLSeen: 4,
		Points: []report.StabilityPoint{{Done: 2}, {Done: 3}}, PointsSeen: 2}
	got := PoolStates([]report.RecorderState{a, b})
	switch {
	case got.Windows != 3 || got.SpanSeconds != 3 || got.WindowSeconds != 1:
		t.Errorf("windows %d, span %v, window %v; want the longest shard's 3, 3, 1", got.Windows, got.SpanSeconds, got.WindowSeconds)
	case got.Measured != 30 || got.Goodput != 28 || got.ReasoningTokens != 5 || got.InFlightCap != 8:
		t.Errorf("counts %d %d %d %d, want 30 28 5 8", got.Measured, got.Goodput, got.ReasoningTokens, got.InFlightCap)
	case !maps.Equal(got.Outcomes, map[string]int{"success": 28, "http_5xx": 1, "timeout": 1}) || !maps.Equal(got.HTTPErrors, map[string]int{"503": 1}):
		t.Errorf("outcomes %v, HTTP errors %v", got.Outcomes, got.HTTPErrors)
	case !maps.Equal(got.StructuredChecks, map[string]int{"valid": 4, "invalid_json": 1}) || got.ToolCallChecks != nil:
		t.Errorf("structured checks %v, tool-call checks %v", got.StructuredChecks, got.ToolCallChecks)
	case !slices.Equal(got.WinTokens, []float64{11, 22, 3}) || !slices.Equal(got.WinSuccesses, []int{10, 12, 6}):
		t.Errorf("per window: tokens %v, successes %v", got.WinTokens, got.WinSuccesses)
	case len(got.WinE2E) != 3 || !slices.Equal(got.WinE2E[0], []float64{0.1, 0.3}) || !slices.Equal(got.WinE2E[2], []float64{0.5}):
		t.Errorf("per-window E2E %v", got.WinE2E)
	case len(got.Points) != 3 || got.Points[0].Done != 1 || got.PointsSeen != 3:
		t.Errorf("stability points %v of %d, want a's then b's", got.Points, got.PointsSeen)
	}
	// b kept a quarter of its records: a contributes a quarter of its own.
	if len(got.Records) != 3+5 || got.RecordsSeen != 30 {
		t.Errorf("%d records of %d seen, want 8 (a quarter of each shard's) of 30", len(got.Records), got.RecordsSeen)
	}
	// b kept a quarter of its gaps: a half of a's two rounds to 1.
	if len(got.ITL) != 1+1 || got.ITLSeen != 6 {
		t.Errorf("%d gaps of %d seen, want 2 of 6", len(got.ITL), got.ITLSeen)
	}
	if one := PoolStates([]report.RecorderState{a}); one.Measured != 10 || len(one.Records) != 10 || !slices.Equal(one.WinTokens, a.WinTokens) {
		t.Errorf("one shard pooled: %+v, want it unchanged", one)
	}
}

// TestPoolReplays: the rows sent and dropped add up, clamped is counted
// once, the drift is the worst shard's, and any degraded shard degrades
// the merge.
func TestPoolReplays(t *testing.T) {
	got := poolReplays([]*report.ReplayResult{
		{Rows: 100, Replayed: 48, Dropped: 1, Clamped: 3, WindowSeconds: 60, Drift: report.Dist{P99: 0.002}},
		{Rows: 100, Replayed: 50, Dropped: 1, Clamped: 3, WindowSeconds: 60, Drift: report.Dist{P99: 0.012, Max: 0.02}, Degraded: true},
		{Rows: 100, Replayed: 0, Clamped: 2, WindowSeconds: 60, Drift: report.Dist{P99: 0.001}},
	})
	if got.Rows != 100 || got.Replayed != 98 || got.Dropped != 2 || got.Clamped != 3 || got.Drift.P99 != 0.012 || got.Drift.Max != 0.02 || !got.Degraded || got.WindowSeconds != 60 {
		t.Errorf("pooled replay %+v", got)
	}
}

// TestRead: shard reports are read with report's bounds, and an error
// names the file.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"schema": "`+report.Schema+`", "shard": {"index": 0, "count": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"schema": "v0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	shards, err := Read(context.Background(), []string{good})
	if err != nil || len(shards) != 1 || shards[0].File != good || shards[0].Report.Shard.Count != 1 {
		t.Fatalf("Read(good) = %+v, %v", shards, err)
	}
	if _, err := Read(context.Background(), []string{good, bad}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Read(bad) = %v, want an error naming %s", err, bad)
	}
}
