package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// testShardConfig is the configuration of the synthetic split run of the
// merge tests: one target, one rate, one repeat, no stability extension.
const testShardConfig = `targets:
  - {name: a, url: 'http://127.0.0.1:1', model: m}
bench:
  seed: 7
  matrix: {rates: [10], shapes: [{name: s, input_tokens: 16, output_tokens: 8}]}
  repeats: 1
  stability: {enabled: false}
  ranking: {resamples: 100}
`

// testShardJSON makes the reports of a split run of two shards, as the
// bench writes them, without a server: each shard's recorder is fed half
// of one process's synthetic requests.
func testShardJSON(t testing.TB, requests int) [2][]byte {
	t.Helper()
	cfg, err := Parse([]byte(testShardConfig), "b.yml")
	if err != nil {
		t.Fatal(err)
	}
	w0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	key := report.CellKey("a", report.Load{Kind: report.LoadRate, Value: 10}, "s")
	var out [2][]byte
	for i := range out {
		rec := newRecorderAt(w0, cfg.Bench.Duration, config.SLO{}, cfg.Bench.MaxSamplesPerRepeat, DefaultMaxITLSamples, 1)
		for n := i; n < requests; n += 2 {
			sched := float64(n) * 4 / float64(requests)
			o := &observation.Request{Seq: uint64(n), Scheduled: at(sched), Sent: at(sched), Outcome: observation.Success}
			for k := 0; k < 4; k++ {
				o.TokenTimes = append(o.TokenTimes, at(sched+0.05+0.01*float64(k)))
			}
			o.FirstToken, o.End = o.TokenTimes[0], o.TokenTimes[3]
			o.ContentEvents, o.OutputTokens = 4, 4
			rec.observe(o)
		}
		st := rec.export(1, 0)
		stats, _ := rec.finish(1, 0)
		r := &report.Report{Schema: report.Schema,
			Environment: report.Environment{Config: cfg.EffectiveYAML(), ConfigSHA256: cfg.SHA256, Seed: cfg.Bench.Seed,
				MaxSamplesRepeat: cfg.Bench.MaxSamplesPerRepeat, Started: w0, Finished: w0.Add(time.Minute)},
			Cells: []report.CellResult{{Key: key, Target: "a", Load: report.Load{Kind: report.LoadRate, Value: 10}, Shape: "s",
				Repeats: []report.RepeatResult{{Stats: stats, Stability: report.StabilityResult{}}}, Summary: stats}},
			Shard: &report.ShardPart{Index: i, Count: 2, Cells: []report.ShardCells{{Key: key, Repeats: []report.RecorderState{st}}}},
		}
		var b bytes.Buffer
		if err := render.WriteJSON(&b, r); err != nil {
			t.Fatal(err)
		}
		out[i] = b.Bytes()
	}
	return out
}

// TestMergeRefusesCraftedShards (issue 23): every crafted shard is refused
// with an error naming its file and field; before, each of these panicked,
// exhausted memory, looped for ever, or merged silently with exit 0.
func TestMergeRefusesCraftedShards(t *testing.T) {
	legit := testShardJSON(t, 40)
	read := func(t *testing.T, b []byte) *report.Report {
		r, err := report.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Sanity: the legitimate pair merges.
	if _, err := Merge(context.Background(), []merge.ShardFile{{File: "shard-0.json", Report: read(t, legit[0])}, {File: "shard-1.json", Report: read(t, legit[1])}}); err != nil {
		t.Fatalf("legitimate shards: %v", err)
	}
	repl := func(old, new string) func(*report.Report) {
		return func(r *report.Report) { r.Environment.Config = strings.Replace(r.Environment.Config, old, new, 1) }
	}
	state := func(f func(*report.RecorderState)) func(*report.Report) {
		return func(r *report.Report) { f(&r.Shard.Cells[0].Repeats[0]) }
	}
	for _, tc := range []struct {
		name  string
		both  bool // the change is made to both shards (the configuration: equal text)
		craft func(*report.Report)
		want  string // shard-1.json unless both
	}{
		{"cells [] on shard 1", false, func(r *report.Report) { r.Shard.Cells = []report.ShardCells{} }, "shard-1.json: shard.cells: 0 cells, shard 0 has 1"},
		{"repeats [] on shard 1", false, func(r *report.Report) { r.Shard.Cells[0].Repeats = nil }, "shard-1.json: shard.cells[0].repeats: 0 repeats"},
		{"report cells [] on shard 1", false, func(r *report.Report) { r.Cells = nil }, "shard-1.json: cells: 0 cells"},
		{"windows 1e8", false, state(func(s *report.RecorderState) { s.Windows = 100000000 }), "shard-1.json: shard.cells[0].repeats[0].windows: 100000000 exceeds"},
		{"windows 9e18", false, state(func(s *report.RecorderState) { s.Windows = 9e18 }), "shard-1.json: shard.cells[0].repeats[0].windows: 9000000000000000000 exceeds"},
		{"resamples 2e9", true, repl("resamples: 100", "resamples: 2000000000"), "shard-0.json: environment.config"},
		{"confidence NaN", true, repl("confidence: 0.95", "confidence: .nan"), "bench.ranking.confidence"},
		{"negative measured", false, state(func(s *report.RecorderState) { s.Measured = -5 }), "shard-1.json: shard.cells[0].repeats[0].measured: -5"},
		{"negative outcome", false, state(func(s *report.RecorderState) { s.Outcomes["success"] = -1 }), "shard-1.json: shard.cells[0].repeats[0].outcomes.success: -1"},
		{"negative window count", false, state(func(s *report.RecorderState) { s.WinSent[0] = -1 }), "shard-1.json: shard.cells[0].repeats[0].win_sent[0]: -1"},
		{"unknown outcome", false, state(func(s *report.RecorderState) { s.Outcomes["teleported"] = 1 }), `shard-1.json: shard.cells[0].repeats[0].outcomes: "teleported" is not an outcome`},
		{"ITL +1e308", false, state(func(s *report.RecorderState) { s.ITL[0] = 1e308 }), "shard-1.json: shard.cells[0].repeats[0].itl[0]: 1e+308"},
		{"ITL -1e308", false, state(func(s *report.RecorderState) { s.ITL[0] = -1e308 }), "shard-1.json: shard.cells[0].repeats[0].itl[0]: -1e+308"},
		{"e2e 1e308", false, state(func(s *report.RecorderState) { s.Records[0].E2E = 1e308 }), "shard-1.json: shard.cells[0].repeats[0].records[0].e2e"},
		{"window tokens -1", false, state(func(s *report.RecorderState) { s.WinTokens[0] = -1 }), "shard-1.json: shard.cells[0].repeats[0].win_tokens[0]"},
		{"records seen below kept", false, state(func(s *report.RecorderState) { s.RecordsSeen = 1 }), "shard-1.json: shard.cells[0].repeats[0].records_seen: 1"},
		{"another seed, same config hash", false, func(r *report.Report) { r.Environment.Seed = 8 }, "shard-1.json: environment.seed: 8"},
		{"another config text, same hash", false, repl("seed: 7", "seed: 8"), "shard-1.json: environment.config: differs"},
		{"another cell key", false, func(r *report.Report) { r.Shard.Cells[0].Key = "x" }, `shard-1.json: shard.cells[0].key: "x"`},
		{"shard count 0", false, func(r *report.Report) { r.Shard.Count = 0 }, "shard-1.json: shard.count: 0"},
		{"shard index repeated", false, func(r *report.Report) { r.Shard.Index = 0 }, "shard.index: shards of 2: shard 1 is missing or repeated"},
		{"not a shard", false, func(r *report.Report) { r.Shard = nil }, "shard-1.json: shard: absent"},
		{"interrupted shard", false, func(r *report.Report) { r.Interrupted = true }, "shard-1.json: interrupted: this shard was stopped"},
		{"another exporter binary", false, func(r *report.Report) { r.Environment.Inputs[0].SHA256 = strings.Repeat("ab", 32) }, "shard-1.json: environment.inputs: exporter has sha256 abababababab"},
		{"a trace shard 0 did not read", false, func(r *report.Report) {
			r.Environment.Inputs = append(r.Environment.Inputs, report.Input{Kind: report.InputTrace, Name: "mc", SHA256: strings.Repeat("cd", 32)})
		}, "shard-1.json: environment.inputs: trace mc is not among shard-0.json's inputs"},
		{"an input missing", false, func(r *report.Report) { r.Environment.Inputs = r.Environment.Inputs[1:] }, "shard-1.json: environment.inputs: exporter of shard-0.json is missing"},
		{"negative input tokens", false, state(func(s *report.RecorderState) { s.WinInputTokens = []int{-1} }), "shard-1.json: shard.cells[0].repeats[0].win_input_tokens[0]: -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r0, r1 := read(t, legit[0]), read(t, legit[1])
			for _, r := range []*report.Report{r0, r1} {
				r.Environment.Inputs = []report.Input{{Kind: report.InputExporter, SHA256: strings.Repeat("01", 32)}, {Kind: report.InputConfig, SHA256: strings.Repeat("02", 32)}}
			}
			tc.craft(r1)
			if tc.both {
				tc.craft(r0)
			}
			rep, err := Merge(context.Background(), []merge.ShardFile{{File: "shard-0.json", Report: r0}, {File: "shard-1.json", Report: r1}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Merge error %v, want one with %q (report %v)", err, tc.want, rep != nil)
			}
		})
	}
}

// TestMergeOfflineConfig: the embedded configuration is validated without
// reading what it names: a bearer_token_file and a trace absent from the
// merging machine do not stop a merge.
func TestMergeOfflineConfig(t *testing.T) {
	text := "targets:\n  - bearer_token_file: /nonexistent/token\n    name: a\n    url: http://127.0.0.1:1\n    model: m\n" +
		"bench:\n  matrix:\n    replays: [{name: r, source: jsonl, path: /nonexistent/trace.jsonl}]\n"
	if _, err := Parse([]byte(text), "b.yml"); err == nil {
		t.Fatal("Parse read neither file: the test proves nothing")
	}
	if _, err := parseEmbedded(context.Background(), []byte(text), "shard-0.json: environment.config"); err != nil {
		t.Fatalf("parseEmbedded: %v", err)
	}
}

// TestMergeAndVerifyEndOnSIGTERM (issue 23): merge and verify end within
// 1 s of the context's end (SIGTERM, through main's signal.NotifyContext):
// verify while it hashes an input of 20 GB (sparse, at its recorded size),
// merge while it merges shards whose ranking asks for MaxResamples.
func TestMergeAndVerifyEndOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "trace.jsonl")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 20 << 30
	if err := os.Truncate(huge, size); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	rep := &report.Report{Schema: report.Schema, Environment: report.Environment{Inputs: []report.Input{{Kind: report.InputTrace, Name: "t", Path: huge, SHA256: "00", Bytes: size}}}}
	var b bytes.Buffer
	if err := render.WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	report := writeTestFile(t, dir, "report.json", b.String())

	legit := testShardJSON(t, 20000)
	var shards []string
	for i, raw := range legit {
		// A legitimate configuration that merges for long: many resamples.
		raw = bytes.Replace(raw, []byte(`resamples: 100\n`), []byte(`resamples: 100000\n`), 1)
		shards = append(shards, writeTestFile(t, dir, "shard-"+string(rune('0'+i))+".json", string(raw)))
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"verify", []string{"bench", "verify", report}},
		{"merge", append([]string{"bench", "merge", "--output.dir=" + filepath.Join(dir, "merged")}, shards...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan time.Time, 1)
			var code int
			var stderr string
			go func() { code, _, stderr = runCLI(t, ctx, tc.args...); done <- time.Now() }()
			time.Sleep(300 * time.Millisecond)
			select {
			case <-done:
				t.Fatalf("ended before the signal, exit %d: %s", code, stderr)
			default:
			}
			cancelled := time.Now()
			cancel()
			select {
			case end := <-done:
				if d := end.Sub(cancelled); d > time.Second {
					t.Errorf("ended %v after the signal, want within 1 s", d)
				}
				if code != ExitError || !strings.Contains(stderr, "context canceled") {
					t.Errorf("exit %d, stderr %q: want %d, interrupted", code, stderr, ExitError)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("did not end within 30 s of the signal")
			}
		})
	}
}

// FuzzReadShard feeds bytes to the report reader and, when they decode,
// merges them as shard 1 beside a legitimate shard 0: no input panics,
// allocates beyond report.MaxReportDecodedBytes, or merges with a figure that is
// not finite.
func FuzzReadShard(f *testing.F) {
	// Two requests: the smallest legitimate shard, so that minimising an
	// interesting input (some 10 KB) does not take the whole run.
	legit := testShardJSON(f, 2)
	f.Add(legit[1])
	f.Add(bytes.Replace(legit[1], []byte(`"windows": 1`), []byte(`"windows": 9000000000000000000`), 1))
	f.Add(bytes.Replace(legit[1], []byte(`"cells": [`), []byte(`"cells": [], "x": [`), 1))
	f.Add([]byte(`{"schema":"infer_exporter/bench/v1","cells":[{},{},{}],"shard":{"index":1,"count":2,"cells":[]}}`))
	shard0, err := report.Decode(legit[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := report.Decode(b)
		if err != nil {
			return
		}
		// report.Decode hands out its report; the legitimate shard 0 is
		// shared, so merge from a copy that this input cannot change.
		var s0 report.Report
		raw, _ := json.Marshal(shard0)
		if err := json.Unmarshal(raw, &s0); err != nil {
			t.Fatal(err)
		}
		rep, err := Merge(context.Background(), []merge.ShardFile{{File: "shard-0.json", Report: &s0}, {File: "fuzz.json", Report: r}})
		if err != nil {
			return
		}
		for _, c := range rep.Cells {
			if s := c.Summary; math.IsInf(s.E2E.Mean, 0) || math.IsInf(s.ITL.Mean, 0) || math.IsInf(s.OutputTokensPerSecond, 0) {
				t.Fatalf("merged a figure that is not finite: %+v", s)
			}
		}
		if err := render.WriteJSON(&bytes.Buffer{}, rep); err != nil {
			t.Fatalf("merged a report that cannot be written: %v", err)
		}
	})
}

// TestMergeDistributionAsOneProcess: the merged report's CDF quantiles and
// windows are one process's of the same requests (the pooled records, the
// added-up counts), and they are bounded: 101 quantiles per latency, one
// entry per window.
func TestMergeDistributionAsOneProcess(t *testing.T) {
	one, merged := oneAndMerged(t, 400)
	r1, rm := one.Cells[0].Repeats[0], merged.Cells[0].Repeats[0]
	if r1.Distribution == nil || rm.Distribution == nil || r1.Windows == nil || rm.Windows == nil {
		t.Fatalf("no distribution or windows: one %+v, merged %+v", r1.Distribution, rm.Distribution)
	}
	for _, l := range []struct {
		name      string
		one, mrg  []float64
		min, max  float64
		wantCount int
	}{
		{"ttft", r1.Distribution.TTFT, rm.Distribution.TTFT, r1.Stats.TTFT.Min, r1.Stats.TTFT.Max, r1.Stats.TTFT.Count},
		{"tpot", r1.Distribution.TPOT, rm.Distribution.TPOT, r1.Stats.TPOT.Min, r1.Stats.TPOT.Max, r1.Stats.TPOT.Count},
		{"e2e", r1.Distribution.E2E, rm.Distribution.E2E, r1.Stats.E2E.Min, r1.Stats.E2E.Max, r1.Stats.E2E.Count},
	} {
		if len(l.one) != 101 || len(l.mrg) != 101 || l.wantCount == 0 {
			t.Fatalf("%s: %d and %d quantiles of %d values, want 101", l.name, len(l.one), len(l.mrg), l.wantCount)
		}
		if l.one[0] != l.min || l.one[100] != l.max {
			t.Errorf("%s: q0 %v q100 %v, want min %v max %v", l.name, l.one[0], l.one[100], l.min, l.max)
		}
		for i := range l.one {
			if math.Abs(l.one[i]-l.mrg[i]) > 1e-12 || i > 0 && l.one[i] < l.one[i-1] {
				t.Errorf("%s q%d: merged %v, one process %v (or not ascending)", l.name, i, l.mrg[i], l.one[i])
			}
		}
	}
	if d := r1.Distribution.E2E; math.Abs(d[50]-r1.Stats.E2E.P50) > 1e-12 || math.Abs(d[99]-r1.Stats.E2E.P99) > 1e-12 {
		t.Errorf("E2E q50 %v q99 %v, the percentiles %v %v", d[50], d[99], r1.Stats.E2E.P50, r1.Stats.E2E.P99)
	}
	a, _ := json.Marshal(r1.Windows)
	b, _ := json.Marshal(rm.Windows)
	if !bytes.Equal(a, b) {
		t.Errorf("windows: merged %s, one process %s", b, a)
	}
	w := r1.Windows
	if len(w.Sent) != 1 || w.Sent[0] == 0 || w.Completed[0] == 0 || !w.TTFTP50[0].Valid() {
		t.Errorf("windows %s", a)
	}
	if w.InFlight[0] != r1.Stats.InFlightAtEnd {
		t.Errorf("in flight at the end of the last window %d, Stats %d", w.InFlight[0], r1.Stats.InFlightAtEnd)
	}
}

// TestReplayWindowsBound: the windows bench merge allows a replay repeat
// follow its span (the trace's window at its speed, the rows the ceiling
// can hold back, the request timeout, a second; over the window, plus one)
// and stay within MaxShardWindows whatever a shard claims.
func TestReplayWindowsBound(t *testing.T) {
	conf := func(replay, stability string) *Config {
		cfg, err := parseEmbedded(context.Background(), []byte(`targets:
  - {name: a, url: 'http://127.0.0.1:1', model: m, timeout: 2s}
bench:
  matrix: {replays: [{name: mc, source: mooncake, path: t.jsonl`+replay+`}]}
  warmup: 500ms
  duration: 3s
  repeats: 1
`+stability), "b.yml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		name              string
		replay, stability string
		window            float64 // the trace's, at its speed, as the shard reports it
		rows              int
		want              int
	}{
		// Windows of 1 s: 6 + 0.7 (a tenth of 7 s under the default
		// ceiling) + 2 + 1 = 9.7 s: 10 windows, and one more.
		{"stability on", "", "", 6, 60, 11},
		// Windows of the duration, 3 s: 4 windows, and one more.
		{"stability off", "", "  stability: {enabled: false}\n", 6, 60, 5},
		// 60 rows under 10 req/s: up to 6 s held back; 15 s.
		{"max_rate", ", max_rate: 10", "", 6, 60, 16},
		// The configuration bounds the window, (end - start) / speed:
		// 2 + 0.3 + 2 + 1 s.
		{"end", ", end: 4s, speed: 2", "", 600, 60, 7},
		// A looping replay is cut at warm-up + duration: its base windows.
		{"loop", ", loop: true", "", 6, 60, 3},
		// A claim of a window of 10^6 s stays within MaxShardWindows.
		{"hostile window", "", "", 1e6, 60, merge.MaxShardWindows},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &report.CellResult{Target: "a", Shape: "mc", Load: report.Load{Kind: report.LoadReplay, Value: 1},
				Repeats: []report.RepeatResult{{Replay: &report.ReplayResult{WindowSeconds: tc.window, Rows: tc.rows}}}}
			if got := maxWindows(conf(tc.replay, tc.stability), c, 0); got != tc.want {
				t.Errorf("%d windows allowed, want %d", got, tc.want)
			}
		})
	}
}
