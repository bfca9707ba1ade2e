package merge

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
)

// TestPoolShardStart: shards given one --shard.start-at start each
// repeat's schedule at the agreed instant whatever their hosts' wake-ups
// (23 and 54 ms late on a busy machine): the merged schedule offsets are
// 0, and the wake-ups are apart, shard by shard; a shard that reached the
// agreed start after it had passed shows in the offsets; a shard with no
// share of the repeat is null in both. Shards that started on their own
// have no wake-up lateness.
func TestPoolShardStart(t *testing.T) {
	agreed := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	type shard struct {
		started time.Time // the schedule's origin; zero: no share
		late    float64
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name      string
		clocked   bool
		shards    []shard
		offsets   []float64
		wakeLate  []float64 // nil: absent
		wantStart time.Time
	}{
		{"late wake-ups, one agreed origin", true,
			[]shard{{agreed, 0.023}, {agreed, 0.054}, {agreed, 0.0004}},
			[]float64{0, 0, 0}, []float64{0.023, 0.054, 0.0004}, agreed},
		{"a shard reached the agreed start after it had passed", true,
			[]shard{{agreed, 0.002}, {agreed.Add(1500 * time.Millisecond), 1.5}},
			[]float64{0, 1.5}, []float64{0.002, 1.5}, agreed},
		{"a shard without a share", true,
			[]shard{{agreed, 0.03}, {}},
			[]float64{0, nan}, []float64{0.03, nan}, agreed},
		{"started on their own", false,
			[]shard{{agreed.Add(124 * time.Millisecond), 0}, {agreed, 0}},
			[]float64{0.124, 0}, nil, agreed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files []ShardFile
			for i, s := range tc.shards {
				r := &report.Report{Schema: report.Schema,
					Cells: []report.CellResult{{Key: "a/rate=1/s", Repeats: []report.RepeatResult{{Started: s.started, WakeupLateSeconds: report.Num(s.late)}}}},
					Shard: &report.ShardPart{Index: i, Count: len(tc.shards), Cells: []report.ShardCells{{Key: "a/rate=1/s", Repeats: []report.RecorderState{{}}}}}}
				if tc.clocked {
					r.Shard.StartAt = &agreed
				}
				files = append(files, ShardFile{File: "s.json", Report: r})
			}
			res, _ := poolRepeat(files, 0, 0)
			same := func(got []report.Num, want []float64) bool {
				return slices.EqualFunc(got, want, func(g report.Num, w float64) bool {
					return math.IsNaN(float64(g)) && math.IsNaN(w) || math.Abs(float64(g)-w) < 1e-9
				})
			}
			if !same(res.ShardStartOffsets, tc.offsets) {
				t.Errorf("shard_start_offsets_seconds %v, want %v", res.ShardStartOffsets, tc.offsets)
			}
			if !same(res.ShardWakeupLate, tc.wakeLate) || (res.ShardWakeupLate == nil) != (tc.wakeLate == nil) {
				t.Errorf("shard_wakeup_late_seconds %v, want %v", res.ShardWakeupLate, tc.wakeLate)
			}
			if !res.Started.Equal(tc.wantStart) || res.WakeupLateSeconds != 0 {
				t.Errorf("merged started %v, wakeup_late_seconds %v: want %v and absent", res.Started, res.WakeupLateSeconds, tc.wantStart)
			}
		})
	}
}

// TestPoolClients: each shard is a client of its own, and one that fell
// behind put its delay into the merged figures: the merge is degraded
// when any shard was, with that shard's note; else ok when any was
// judged; else not judged. The arrivals add up, the p99s are the worst
// shard's; no shard with a verdict (reports from before it), no verdict.
func TestPoolClients(t *testing.T) {
	ok := &report.ClientCheck{State: report.ClientOK, Arrivals: 100, Late: 1, LateRuns: 1, LagP99: 0.004, SchedulingLatencyP99: 0.0003, LateAfterSeconds: 0.01}
	bad := &report.ClientCheck{State: report.ClientDegraded, Arrivals: 100, Late: 30, LateRuns: 20, LagP99: 0.05, SchedulingLatencyP99: 0.02, LateAfterSeconds: 0.01, Note: "client degraded: 30%"}
	few := &report.ClientCheck{State: report.StateNotJudged, Arrivals: 10, LagP99: report.NaN(), LateAfterSeconds: 0.01, Note: "client not judged: 10 measured arrivals"}
	shards := func(cs ...*report.ClientCheck) []ShardFile {
		var out []ShardFile
		for _, c := range cs {
			out = append(out, ShardFile{Report: &report.Report{Cells: []report.CellResult{{Repeats: []report.RepeatResult{{Client: c}}}}}})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		shards   []*report.ClientCheck
		state    string
		arrivals int
		note     string
	}{
		{"both ok", []*report.ClientCheck{ok, ok}, report.ClientOK, 200, ""},
		{"shard 1 degraded", []*report.ClientCheck{ok, bad}, report.ClientDegraded, 200, "shard 1: client degraded: 30%"},
		{"one judged", []*report.ClientCheck{few, ok}, report.ClientOK, 110, ""},
		{"none judged", []*report.ClientCheck{few, few}, report.StateNotJudged, 20, "client not judged: no shard measured enough arrivals"},
		{"from before", []*report.ClientCheck{nil, nil}, "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := poolClients(shards(tc.shards...), 0, 0)
			if tc.state == "" {
				if got != nil {
					t.Fatalf("%+v, want none", got)
				}
				return
			}
			if got.State != tc.state || got.Arrivals != tc.arrivals || !strings.HasPrefix(got.Note, tc.note) || tc.note == "" && got.Note != "" {
				t.Errorf("%+v, want %s of %d arrivals, note %q", got, tc.state, tc.arrivals, tc.note)
			}
			if tc.name == "shard 1 degraded" && (got.LagP99 != 0.05 || got.SchedulingLatencyP99 != 0.02 || math.Abs(got.LateShare-31.0/200) > 1e-12) {
				t.Errorf("%+v: want the worst shard's p99s and the pooled share", got)
			}
		})
	}
}
