package bench

import (
	"bytes"
	"context"
	"math"
	pathpkg "path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// notInCSV are the cell's report.json fields that no column shows, each
// with its reason (path.Match patterns over the fields' JSON paths).
var notInCSV = map[string]string{
	"summary.outcomes":                "one count per outcome, a set that varies: report.json",
	"summary.overload_note":           "a sentence for people: the command's summary, the HTML report",
	"summary.draining_note":           "a sentence for people: the command's summary, the HTML report",
	"degraded_note":                   "a sentence for people: the command's summary, report.md's Client degraded, the HTML report",
	"summary.*_seconds.count":         "the number of values behind a distribution: report.json",
	"summary.*_seconds.min":           "the distributions' minima: report.json",
	"summary.schedule_lag_seconds.*":  "the client's own delay: its p99 is a column (degraded judges it), the rest is in report.json",
	"stability":                       "the stable column says it in words: stable, unstable (flagged), not judged, not checked",
	"ci.*":                            "the other figures' intervals: report.json (the ranking and the baseline gate read them)",
	"partial":                         "only a run interrupted during its first cell has it: report.json, the Markdown table's and the HTML report's flags (report.CellFlags), the console",
	"summary.efficiency.gpus":         "the GPUs counted: report.json, the Markdown and HTML efficiency sections",
	"summary.efficiency.gpu_hour_usd": "the price the cost is from: report.json, the Markdown and HTML efficiency sections",
	"summary.efficiency.cost_usd":     "the span's cost, behind the cost per million tokens: report.json",
	"summary.efficiency.devices":      "one entry per GPU, a set that varies: report.json",
	"summary.efficiency.note":         "a sentence for people: the console, the Markdown and HTML efficiency sections",
	"summary.server_timings.*":        "the engine's own timings, for the runs whose answers carry them: report.json, report.md's and the HTML report's Where the time went",
	"prefix_cache.*":                  "the views of a shape with a cache_hit_rate, in a matrix that has one (columns would change every CSV): report.json, report.md's Prefix cache table",
	"summary.success_ratio":           "the regression gate's figure (the median of the repeats' successes over measured requests, with its interval in ci): report.json; the success_ratio column is the floor's, pooled over the requests sent",
}

// jsonLeaves are the JSON paths of t's fields (a struct), below prefix: a
// struct's fields are walked into, a map or a slice is one leaf.
func jsonLeaves(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Time{}) {
			out = append(out, jsonLeaves(f.Type, prefix+name+".")...)
			continue
		}
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && f.Type.Elem() != reflect.TypeOf(time.Time{}) {
			// An optional part (summary.efficiency): its fields.
			out = append(out, jsonLeaves(f.Type.Elem(), prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// TestColumnsComplete: the column table is whole. Every figure of a cell
// in report.json (CellResult, its Summary, its intervals) has a column or
// a reason in notInCSV; every column names a field that exists, has a
// unit, a getter and a merge rule; the names are unique, the Markdown
// positions are 1..n, flags are on flags.
func TestColumnsComplete(t *testing.T) {
	var leaves []string
	for _, l := range jsonLeaves(reflect.TypeOf(report.CellResult{}), "") {
		switch l {
		case "ci":
			for _, f := range FigureNames {
				leaves = append(leaves, "ci."+f+".lo", "ci."+f+".hi")
			}
		default:
			leaves = append(leaves, l)
		}
	}
	isLeaf := map[string]bool{}
	for _, l := range leaves {
		isLeaf[l] = true
	}
	shown := map[string]string{}
	names := map[string]bool{}
	at := map[int]string{}
	for _, c := range report.Columns {
		switch {
		case names[c.Name]:
			t.Errorf("column %s: twice", c.Name)
		case !isLeaf[c.JSON]:
			t.Errorf("column %s: shows %q, not a field of a cell in report.json", c.Name, c.JSON)
		case c.Unit == 0:
			t.Errorf("column %s: no unit", c.Name)
		case c.Merge == 0:
			t.Errorf("column %s: no merge rule (how bench merge obtains it)", c.Name)
		case (c.Text == nil) == (c.Num == nil) || (c.Text != nil) != (c.Unit == report.UnitText):
			t.Errorf("column %s: want a text getter for a text column, a number getter otherwise", c.Name)
		case c.Flag != "" && c.Unit != report.UnitBool && c.Unit != report.UnitCount:
			t.Errorf("column %s: a flag on a column that is neither a flag nor a count (flagged when not 0)", c.Name)
		}
		names[c.Name] = true
		shown[c.JSON] = c.Name
		if c.MD != "" {
			if prev, ok := at[c.MDAt]; ok {
				t.Errorf("columns %s and %s: both at Markdown position %d", prev, c.Name, c.MDAt)
			}
			at[c.MDAt] = c.Name
		}
	}
	for i := 1; i <= len(at); i++ {
		if _, ok := at[i]; !ok {
			t.Errorf("no column at Markdown position %d of %d", i, len(at))
		}
	}
	used := map[string]bool{}
	for _, l := range leaves {
		if _, ok := shown[l]; ok {
			continue
		}
		excused := false
		for pat := range notInCSV {
			if ok, _ := pathpkg.Match(pat, l); ok {
				excused, used[pat] = true, true
			}
		}
		if !excused && l != "summary" && l != "repeats" {
			t.Errorf("report.json's %s has no column (columns.go) and no reason in notInCSV", l)
		}
	}
	for pat := range notInCSV {
		if !used[pat] {
			t.Errorf("notInCSV %q excuses nothing: remove it", pat)
		}
	}
}

// oneAndMerged builds, from the same synthetic requests, the report of one
// process and the merge of two shards' reports (round-tripped through
// JSON, as bench merge reads them).
func oneAndMerged(t *testing.T, requests int) (one, merged *report.Report) {
	t.Helper()
	cfg, err := Parse([]byte(testShardConfig), "b.yml")
	if err != nil {
		t.Fatal(err)
	}
	spec := &cfg.Bench
	w0 := time.Unix(1000, 0)
	load := report.Load{Kind: report.LoadRate, Value: 10}
	key := report.CellKey("a", load, "s")
	newRec := func() *recorder {
		return newRecorderAt(w0, spec.Duration, config.SLO{E2E: 200 * time.Millisecond}, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, 1)
	}
	single, shards := newRec(), [2]*recorder{newRec(), newRec()}
	for i, o := range goldenRequests(5, requests, 1) {
		single.observe(o)
		shards[i%2].observe(o)
	}
	env := report.Environment{Config: cfg.EffectiveYAML(), ConfigSHA256: cfg.SHA256, Seed: spec.Seed,
		MaxSamplesRepeat: spec.MaxSamplesPerRepeat, Started: w0, Finished: w0.Add(time.Minute)}
	reportOf := func(rec *recorder) (*report.Report, report.RecorderState) {
		st := rec.export(1, 0)
		stats, smp := rec.finish(1, 0)
		res := report.RepeatResult{Stats: stats, Stability: report.StabilityResult{}, Distribution: smp.distribution(), Windows: rec.windows(1)}
		acc := [][]cellAcc{{{repeats: []report.RepeatResult{res}, samples: []*sample{smp}}}}
		groups := []group{{name: "s", load: load}}
		cells, reps := assembleCells(context.Background(), spec, []string{"a"}, groups, acc)
		r := &report.Report{Schema: report.Schema, Environment: env, Cells: cells}
		b := &run{cfg: cfg, spec: spec}
		r.Ranking = rank(b.rankInput([]config.Target{{Name: "a"}}, groups, reps, r))
		return r, st
	}
	one, _ = reportOf(single)
	var files []merge.ShardFile
	for i, rec := range shards {
		r, st := reportOf(rec)
		r.Shard = &report.ShardPart{Index: i, Count: 2, Cells: []report.ShardCells{{Key: key, Repeats: []report.RecorderState{st}}}}
		var b bytes.Buffer
		if err := render.WriteJSON(&b, r); err != nil {
			t.Fatal(err)
		}
		d, err := report.Decode(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, merge.ShardFile{File: "shard-" + strconv.Itoa(i) + ".json", Report: d})
	}
	merged, err = Merge(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	return one, merged
}

// TestColumnsMergeAsOneProcess holds every column to its merge rule: the
// merge of two shards' reports gives, column by column, what one process
// gives of the same requests. A column whose figure the shard report does
// not carry (a recorder field missing from RecorderState) fails here,
// named.
func TestColumnsMergeAsOneProcess(t *testing.T) {
	one, merged := oneAndMerged(t, 400)
	c1, cm := &one.Cells[0], &merged.Cells[0]
	if c1.Summary.Requests < 300 || c1.Summary.Successes == c1.Summary.Requests || c1.Summary.Goodput == c1.Summary.Successes ||
		c1.Summary.ReasoningRequests == 0 || c1.Summary.TTFA.Count == 0 || c1.Summary.HTTPErrors["429"] == 0 {
		t.Fatalf("the requests do not exercise the columns: %+v", c1.Summary)
	}
	for _, col := range report.Columns {
		a, b := col.CSV(c1), col.CSV(cm)
		switch col.Merge {
		case report.MergeSame, report.MergeCounts, report.MergeRepeats, report.MergeEnergy:
			// MergeEnergy: both without GPUs here (empty);
			// TestMergeEfficiency merges GPU energies.
			if a != b {
				t.Errorf("%s (exact): merged %q, one process %q", col.Name, b, a)
			}
		case report.MergePooled:
			x, errA := strconv.ParseFloat(a, 64)
			y, errB := strconv.ParseFloat(b, 64)
			if (errA != nil || errB != nil) && a != b || math.Abs(x-y) > 1e-9*math.Max(1, math.Abs(x)) {
				t.Errorf("%s (pooled records): merged %q, one process %q", col.Name, b, a)
			}
		case report.MergeBootstrap:
			fig := strings.TrimSuffix(strings.TrimSuffix(col.Name, "_ci_lo"), "_ci_hi")
			ci := c1.CI[fig]
			x, _ := strconv.ParseFloat(a, 64)
			y, _ := strconv.ParseFloat(b, 64)
			if (a == "") != (b == "") || math.Abs(x-y) > ci.Hi-ci.Lo+1e-9 {
				t.Errorf("%s (bootstrap): merged %q, one process %q (interval %+v)", col.Name, b, a, ci)
			}
		default:
			t.Errorf("%s: merge rule %d has no test", col.Name, col.Merge)
		}
	}
}

// TestMedianStatsEveryField: the summary of repeats that agree on every
// figure is that figure, whatever the field (a repeat without values in
// between does not change it): a field added to Stats has its median.
func TestMedianStatsEveryField(t *testing.T) {
	var s report.Stats
	v := reflect.ValueOf(&s).Elem()
	for i := 0; i < v.NumField(); i++ {
		switch f := v.Field(i); f.Kind() {
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		case reflect.Int:
			f.SetInt(int64(i) + 1)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("note " + v.Type().Field(i).Name)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]int{"success": i + 1}))
		case reflect.Struct:
			f.Set(reflect.ValueOf(report.Dist{Count: i + 1, Mean: 0.1, Min: 0.01, P50: 0.2, P90: 0.3, P95: 0.4, P99: 0.5, P999: 0.6, Max: 0.7}))
		case reflect.Pointer:
			if f.Type() == reflect.TypeFor[*report.ServerTimings]() {
				f.Set(reflect.ValueOf(&report.ServerTimings{Successes: 10, Decomposed: 9, DecomposedRatio: 0.9,
					Queue: report.TimingPart{Count: 9, P50: 0.01, P99: 0.05}, EngineTTFT: report.TimingPart{Count: 9, P50: 0.02, P99: 0.06},
					Generation: report.TimingPart{Count: 8, P50: 0.3, P99: 0.9}, ClientOverhead: report.TimingPart{Count: 9, P50: 0.001, P99: 0.004}}))
				break
			}
			f.Set(reflect.ValueOf(&report.Efficiency{Source: report.EnergyPower, EnergyJoules: 1000, JoulesPerOutputToken: 0.5, JoulesPerGoodOutputToken: 0.6,
				GPUs: 2, GPUHourUSD: 4, CostUSD: 0.1, CostPerMillionOutputTokens: 50, CostPerMillionGoodOutputTokens: 60, Note: "note",
				Devices: []report.GPUEnergy{{GPU: "0", UUID: "GPU-0", Name: "H", Joules: 400, Source: report.EnergyCounter}, {GPU: "1", UUID: "GPU-1", Name: "H", Joules: 600, Source: report.EnergyPower}}}))
		default:
			t.Fatalf("Stats.%s: a %s, which the test does not fill", v.Type().Field(i).Name, f.Kind())
		}
	}
	for _, all := range [][]report.Stats{{s}, {s, s, s}, {s, {Outcomes: map[string]int{}}, s}} {
		if got := medianStats(all); !reflect.DeepEqual(got, s) {
			t.Errorf("median of %d repeats:\n got %+v\nwant %+v", len(all), got, s)
		}
	}
}

// TestCSVSampledColumn: the sampled column, after draining, says when a cell's percentiles
// come from a reservoir sample (the worked example of CONTRIBUTING.md's
// "Adding a report column").
func TestCSVSampledColumn(t *testing.T) {
	w0 := time.Unix(1000, 0)
	rows := func(maxRecs int) []string {
		rec := newRecorderAt(w0, time.Second, config.SLO{}, maxRecs, DefaultMaxITLSamples, 1)
		for _, o := range goldenRequests(1, 40, 1) {
			rec.observe(o)
		}
		st, _ := rec.finish(3, 0)
		var b bytes.Buffer
		if err := render.WriteCSV(&b, &report.Report{Cells: []report.CellResult{{Key: "k", Summary: st}}}); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(b.String()), "\n")
	}
	for _, tc := range []struct {
		maxRecs int
		want    string
	}{{10, "true"}, {1000, "false"}} {
		r := rows(tc.maxRecs)
		// sampled follows draining (later columns come after it).
		h, row := strings.Split(r[0], ","), strings.Split(r[1], ",")
		i := slices.Index(h, "sampled")
		if i < 1 || h[i-1] != "draining" || len(row) != len(h) || row[i] != tc.want {
			t.Errorf("a reservoir of %d records: header %v, row %v; want sampled after draining, %s", tc.maxRecs, h, row, tc.want)
		}
	}
}

// TestCSVHTTP429Column (issue 25): the http_429 column follows sampled (it
// was last when added) and counts the measured requests answered 429,
// apart from the other failures; summary.http_errors has every code seen.
func TestCSVHTTP429Column(t *testing.T) {
	w0 := time.Unix(1000, 0)
	rec := newRecorderAt(w0, time.Second, config.SLO{}, 100, DefaultMaxITLSamples, 1)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	for i, f := range []struct {
		outcome observation.Outcome
		status  int
	}{
		{observation.HTTP4xx, 429}, {observation.HTTP4xx, 429}, {observation.HTTP5xx, 503},
		{observation.HTTP4xx, 401}, {observation.HTTP4xx, 418}, {observation.Disconnected, 0},
	} {
		rec.observe(&observation.Request{Seq: uint64(i), Scheduled: at(0.1 * float64(i)), Sent: at(0.1 * float64(i)),
			End: at(0.1*float64(i) + 0.01), Outcome: f.outcome, HTTPStatus: f.status})
	}
	st, _ := rec.finish(1, 0)
	if want := map[string]int{"429": 2, "503": 1, "401": 1, "other": 1}; !reflect.DeepEqual(st.HTTPErrors, want) {
		t.Errorf("http_errors %v, want %v", st.HTTPErrors, want)
	}
	cell := &report.CellResult{Summary: st}
	i := slices.IndexFunc(report.Columns, func(c report.Column) bool { return c.Name == "http_429" })
	if i < 1 || report.Columns[i-1].Name != "sampled" {
		t.Fatalf("http_429 at %d, not after sampled", i)
	}
	last := &report.Columns[i]
	if last.CSV(cell) != "2" {
		t.Errorf("column %s = %q, want 2", last.Name, last.CSV(cell))
	}
	// A cell without failures has 0 and no http_errors in report.json.
	clean := newRecorderAt(w0, time.Second, config.SLO{}, 100, DefaultMaxITLSamples, 1)
	st, _ = clean.finish(1, 0)
	if st.HTTPErrors != nil || last.CSV(&report.CellResult{Summary: st}) != "0" {
		t.Errorf("no failures: http_errors %v, column %q", st.HTTPErrors, last.CSV(&report.CellResult{Summary: st}))
	}
}

// TestCSVTokenTotalsColumns: input_tokens, output_tokens and
// total_tokens_per_second follow http_429 (they were last when added);
// the output total is output_tokens_per_second's numerator, and the input
// total the server's prompt counts of the successes that ended within the
// windows (the requests_per_second rule), so each total over the windows'
// length is its rate.
func TestCSVTokenTotalsColumns(t *testing.T) {
	w0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	rec := newRecorderAt(w0, time.Second, config.SLO{}, 100, DefaultMaxITLSamples, 1)
	for i, r := range []struct {
		sched, end float64
		prompt     int
		outcome    observation.Outcome
	}{
		{0.1, 0.5, 100, observation.Success},  // counted
		{0.2, 1.5, 200, observation.Success},  // ends in window 1: counted over 2 windows
		{-0.5, 0.3, 50, observation.Success},  // a warm-up request that ends in the windows: counted, as in req/s
		{0.4, 0.6, 70, observation.HTTP5xx},   // failed: not counted
		{1.5, 2.5, 300, observation.Success},  // ends after window 1: not counted over 2 windows
		{-0.9, -0.1, 40, observation.Success}, // ends in the warm-up: not counted
	} {
		o := &observation.Request{Seq: uint64(i), Scheduled: at(r.sched), Sent: at(r.sched), End: at(r.end),
			Outcome: r.outcome, PromptTokens: r.prompt}
		if r.outcome == observation.Success {
			o.FirstToken = at(r.end - 0.1)
			o.TokenTimes = []time.Time{o.FirstToken, o.End}
			o.ContentEvents, o.OutputTokens = 2, 4
		}
		rec.observe(o)
	}
	st, _ := rec.finish(2, 0)
	if st.InputTokens != 350 {
		t.Errorf("input_tokens %d, want 350 (100 + 200 + 50)", st.InputTokens)
	}
	// Output: 4 tokens each for the three counted successes, and the one
	// ending at 2.5 s delivers nothing within [0, 2 s).
	if st.OutputTokens != 12 || st.OutputTokensPerSecond != 6 {
		t.Errorf("output_tokens %v (%v/s), want 12 (6/s)", st.OutputTokens, st.OutputTokensPerSecond)
	}
	if want := (350.0 + 12) / 2; st.TotalTokensPerSecond != want {
		t.Errorf("total_tokens_per_second %v, want %v", st.TotalTokensPerSecond, want)
	}
	i := slices.IndexFunc(report.Columns, func(c report.Column) bool { return c.Name == "input_tokens" })
	if i < 1 || report.Columns[i-1].Name != "http_429" || i+2 >= len(report.Columns) ||
		report.Columns[i+1].Name != "output_tokens" || report.Columns[i+2].Name != "total_tokens_per_second" {
		t.Fatalf("input_tokens at %d: not http_429, input_tokens, output_tokens, total_tokens_per_second", i)
	}
	cell := &report.CellResult{Summary: st}
	for j, want := range []string{"350", "12", "181"} {
		if got := report.Columns[i+j].CSV(cell); got != want {
			t.Errorf("column %s = %q, want %s", report.Columns[i+j].Name, got, want)
		}
	}
}

// TestValidityCountsThroughShards: a repeat's validity counts (the
// measured successes' structured and tool-call checks) go into its stats,
// survive a shard's export, add up in the merge's pool, and come back as
// one process's would; a failure is not judged.
func TestValidityCountsThroughShards(t *testing.T) {
	if report.ResultValid != observation.Valid {
		t.Fatalf("report.ResultValid %q, observation.Valid %q", report.ResultValid, observation.Valid)
	}
	w0 := time.Unix(1000, 0)
	rec := newRecorderAt(w0, time.Second, config.SLO{}, 100, DefaultMaxITLSamples, 1)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	for i, f := range []struct {
		outcome          observation.Outcome
		structured, tool string
	}{
		{observation.Success, observation.Valid, ""}, {observation.Success, observation.InvalidJSON, ""},
		{observation.Success, observation.Valid, observation.UnknownTool}, {observation.Success, "", observation.Valid},
		{observation.HTTP5xx, "", ""},
	} {
		s := 0.1 * float64(i)
		rec.observe(&observation.Request{Seq: uint64(i), Scheduled: at(s), Sent: at(s), End: at(s + 0.01),
			Outcome: f.outcome, StructuredCheck: f.structured, ToolCallCheck: f.tool})
	}
	st, _ := rec.finish(1, 0)
	wantS, wantT := map[string]int{"valid": 2, "invalid_json": 1}, map[string]int{"valid": 1, "unknown_tool": 1}
	if !reflect.DeepEqual(st.StructuredChecks, wantS) || !reflect.DeepEqual(st.ToolCallChecks, wantT) {
		t.Fatalf("structured %v, tool calls %v; want %v, %v", st.StructuredChecks, st.ToolCallChecks, wantS, wantT)
	}
	cell := &report.CellResult{Repeats: []report.RepeatResult{{Stats: st}}}
	if got := report.ColumnNamed("structured_valid_ratio").Num(cell); math.Abs(got-2.0/3) > 1e-12 {
		t.Errorf("structured_valid_ratio %v, want 2/3", got)
	}
	exp := rec.export(1, 0)
	pooled := merge.PoolStates([]report.RecorderState{exp, exp})
	back, k, span := recorderOf(pooled, 100, DefaultMaxITLSamples)
	st2, _ := back.finish(k, span)
	if st2.StructuredChecks["valid"] != 4 || st2.StructuredChecks["invalid_json"] != 2 || st2.ToolCallChecks["unknown_tool"] != 2 {
		t.Errorf("after two shards: structured %v, tool calls %v", st2.StructuredChecks, st2.ToolCallChecks)
	}
	if got := report.ColumnNamed("tool_call_valid_ratio").Num(&report.CellResult{}); !math.IsNaN(got) {
		t.Errorf("a cell without checks: tool_call_valid_ratio %v, want NaN", got)
	}
}
