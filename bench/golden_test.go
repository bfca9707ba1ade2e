package bench

import (
	"bytes"
	"context"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/merge"
	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// updateGolden rewrites testdata/golden from the code under test:
// go test -run Golden ./bench/ -update.
var updateGolden = flag.Bool("update", false, "rewrite bench/testdata/golden from the code under test")

// goldenConfig is the configuration of the golden report: two targets,
// two rates, two repeats, an SLO so that goodput is not every success.
const goldenConfig = `targets:
  - {name: fast, url: 'http://127.0.0.1:1', model: m}
  - {name: slow, url: 'http://127.0.0.1:2', model: m}
bench:
  seed: 11
  matrix: {rates: [4, 8], shapes: [{name: s, input_tokens: 16, output_tokens: 8}]}
  repeats: 2
  stability: {enabled: false}
  slo: {e2e: 250ms}
  ranking: {resamples: 200}
`

// goldenRequests are one repeat's synthetic requests: seeded, with
// successes, HTTP failures, drops, reasoning requests (a TTFA after the
// TTFT) and warm-up requests, scheduled over [-0.5 s, 3 s) from the end of
// the warm-up; slow stretches every latency.
func goldenRequests(seed uint64, n int, slow float64) []*observation.Request {
	w0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return w0.Add(time.Duration(s * float64(time.Second))) }
	rng := rand.New(rand.NewPCG(seed, 3))
	var reqs []*observation.Request
	for i := 0; i < n; i++ {
		sched := -0.5 + 3.5*float64(i)/float64(n)
		o := &observation.Request{Seq: uint64(i), Scheduled: at(sched), Sent: at(sched + 0.0005*rng.Float64())}
		switch rng.IntN(30) {
		case 0:
			o.Outcome, o.DropReason = observation.Dropped, "in_flight_cap"
			o.Sent = time.Time{}
			reqs = append(reqs, o)
			continue
		case 1:
			// Every other failure is a 429 (rate limited), which counts
			// under its own code (issue 25).
			o.Outcome, o.HTTPStatus = observation.HTTP5xx, 503
			if i%2 == 1 {
				o.Outcome, o.HTTPStatus = observation.HTTP4xx, 429
			}
			o.End = at(sched + 0.01)
			reqs = append(reqs, o)
			continue
		}
		o.Outcome = observation.Success
		t := sched + slow*(0.04+0.1*rng.Float64())
		reasoning := rng.IntN(4) == 0
		events := 6 + rng.IntN(4)
		for k := 0; k < events; k++ {
			o.TokenTimes = append(o.TokenTimes, at(t))
			if reasoning && k == 2 {
				o.FirstAnswer = at(t)
			}
			t += slow * (0.008 + 0.02*rng.Float64())
		}
		o.FirstToken, o.End = o.TokenTimes[0], o.TokenTimes[len(o.TokenTimes)-1]
		if !reasoning {
			o.FirstAnswer = o.FirstToken
		} else {
			o.ReasoningEvents = 2
			if rng.IntN(2) == 0 {
				o.ReasoningTokens = 5 + rng.IntN(10)
			}
		}
		o.ContentEvents, o.OutputTokens = events, events+rng.IntN(3)
		// The server's prompt count, without a draw of rng: the golden
		// figures drawn before it keep their values.
		o.PromptTokens = 16 + i%5
		reqs = append(reqs, o)
	}
	return reqs
}

// goldenReport builds a report as Run assembles one, without a server: the
// synthetic requests of every cell and repeat go through the recorder,
// finish, assembleCells and the ranking; the environment, the sweep, the
// inputs, the baseline and the cold-start step are fixed.
func goldenReport(t testing.TB) *report.Report {
	t.Helper()
	cfg, err := Parse([]byte(goldenConfig), "golden.yml")
	if err != nil {
		t.Fatal(err)
	}
	spec := &cfg.Bench
	w0 := time.Unix(1000, 0)
	names := []string{"fast", "slow"}
	groups := []group{{name: "s", load: report.Load{Kind: report.LoadRate, Value: 4}}, {name: "s", load: report.Load{Kind: report.LoadRate, Value: 8}}}
	acc := make([][]cellAcc, len(groups))
	for gi, g := range groups {
		acc[gi] = make([]cellAcc, len(names))
		for ti := range names {
			for r := 0; r < spec.Repeats; r++ {
				slo := config.SLO{E2E: 250 * time.Millisecond}
				rec := newRecorderAt(w0, time.Second, slo, spec.MaxSamplesPerRepeat, DefaultMaxITLSamples, uint64(r+1))
				n := int(g.load.Value * 3.5)
				// The repeat's failure watch hears them too, for its first
				// error (a failed request's text: the outputs name it).
				fw := newFailWatch()
				for _, o := range goldenRequests(uint64(100*gi+10*ti+r), n, 1+1.5*float64(ti)) {
					rec.observe(o)
					if o.Outcome == observation.Dropped {
						fw.Dropped(o)
					} else {
						fw.Done(o)
					}
				}
				stats, smp := rec.finish(3, 0)
				med, _ := rec.windowMedians(3)
				res := report.RepeatResult{Index: r, Started: w0.Add(time.Duration(gi*10+r) * time.Second).UTC(), Stats: stats,
					Stability: report.StabilityResult{WindowSeconds: 1, Windows: 3,
						Growth: report.NaN(), GrowthLow: report.NaN(), GrowthHigh: report.NaN(), NeedSeconds: report.NaN(),
						Step: report.NaN(), StepAtSeconds: report.NaN(), EffectiveRequests: report.NaN()},
					PromptsDrawn: n, SchedulingLatencyP99: 0.0001, WarmupSeconds: 0.5,
					Distribution: smp.distribution(), Windows: rec.windows(3)}
				res.FirstError, res.StoppedEarly = fw.result()
				if ti == 1 && gi == 1 && r == 1 {
					res.Stability.Checked, res.Stability.State, res.Stability.Requests = true, report.StateUnstable, 23
					res.Stability.Growth, res.Stability.GrowthLow, res.Stability.GrowthHigh = 0.3, 0.12, 0.5
					res.Stability.Note = "unstable: length-normalised latency grew +30.0% across the span (+12.0% to +50.0% at 99.5%), 23 requests, Mann-Kendall z 3.10"
				}
				if ti == 1 && gi == 1 {
					res.SchedulingLatencyP99 = 0.02 // degraded
				}
				// The client's verdict as finishRepeat gives it: not
				// judged at 4 req/s (14 arrivals), degraded where the
				// CPU was saturated.
				res.Client = rec.judgeClient(stats.ScheduleLag, res.SchedulingLatencyP99)
				for _, m := range med {
					res.Stability.Medians = append(res.Stability.Medians, report.Num(m))
				}
				acc[gi][ti].repeats = append(acc[gi][ti].repeats, res)
				acc[gi][ti].samples = append(acc[gi][ti].samples, smp)
			}
		}
	}
	rep := &report.Report{Schema: report.Schema, Environment: report.Environment{
		ExporterVersion: "0.0.0-golden", ExporterRevision: "golden", GoVersion: "go", OS: "linux", Arch: "amd64", CPUs: 2,
		Started: w0.UTC(), Finished: w0.Add(time.Minute).UTC(),
		Inputs:     []report.Input{{Kind: report.InputConfig, Path: "golden.yml", SHA256: cfg.SHA256, Bytes: int64(len(goldenConfig))}},
		ConfigFile: "golden.yml", ConfigSHA256: cfg.SHA256, Config: cfg.EffectiveYAML(),
		Seed: spec.Seed, MaxSamplesRepeat: spec.MaxSamplesPerRepeat,
	}}
	cells, reps := assembleCells(context.Background(), spec, names, groups, acc)
	rep.Cells = cells
	targets := make([]config.Target, len(names))
	for i, n := range names {
		targets[i].Name = n
	}
	b := &run{cfg: cfg, spec: spec}
	rep.Ranking = rank(b.rankInput(targets, groups, reps, rep))
	rep.Sweeps = []report.SweepResult{{Target: "fast", Shape: "s", Rule: "goodput >= 0.95", MaxRate: 4, GoodputPerSecond: 3.5,
		SuccessRatio: 0.97, FirstFailingRate: 8, Points: []report.SweepPoint{{Rate: 4, GoodputRatio: 0.96, Requests: 14, SuccessRatio: 0.97, Pass: true, E2EP99: 0.2}}}}
	for _, c := range rep.Cells {
		rep.Timeline = append(rep.Timeline, report.Span{Target: c.Target, Cell: c.Key, Repeat: 0, Start: 1, End: 4.5})
	}
	// A baseline: the same report, its median E2E a third faster (the
	// report 50% slower). (Its p99,
	// of 14 to 28 requests a repeat, has no interval: the requests do not
	// bound it.)
	base := *rep
	base.Cells = append([]report.CellResult(nil), rep.Cells...)
	for i := range base.Cells {
		base.Cells[i].Summary.E2E.P50 /= 1.5
	}
	rep.Baseline = Compare(&base, rep, "baseline.json", 0.1, []string{"e2e_p50", "e2e_p99", "output_tokens_per_second", "success_ratio"}, 0.95)
	rep.ColdStart = &report.ColdStartReport{Target: "fast", Command: []string{"server", "--port=1"}, RequestMaxTokens: 8, Failed: 1, Repeats: []report.ColdStartRepeat{
		{Index: 0, Started: w0.UTC(), ReadySeconds: 1.5, FirstTokenSeconds: 1.75, FirstRequestTTFTSeconds: 0.25, Requests: 2},
		{Index: 1, Started: w0.Add(time.Minute).UTC(), ReadySeconds: report.NaN(), FirstTokenSeconds: report.NaN(), FirstRequestTTFTSeconds: report.NaN(), Error: "exited: status 1"},
	}, ReadySeconds: 1.5, FirstTokenSeconds: 1.75, FirstRequestTTFTSeconds: 0.25}
	return rep
}

// goldenMerged is the merge of testShardJSON's two synthetic shards.
func goldenMerged(t testing.TB) *report.Report {
	t.Helper()
	raw := testShardJSON(t, 40)
	var shards []merge.ShardFile
	for i, b := range raw {
		r, err := report.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, merge.ShardFile{File: "shard-" + string(rune('0'+i)) + ".json", Report: r})
	}
	rep, err := Merge(context.Background(), shards)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// goldenRecorded is a real run's report (e2e/gpu/results/report.json, an
// H200 run, copied), decoded: its outputs render its figures as they were
// measured.
func goldenRecorded(t testing.TB) *report.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "h200.input.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkGolden compares what write renders of r with testdata/golden/name,
// byte for byte (or rewrites it with -update).
func checkGolden(t *testing.T, name string, r *report.Report, write func(io.Writer, *report.Report) error) {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b, r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run Golden ./bench/ -update writes it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		got, wl := bytes.Split(b.Bytes(), []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := 0; i < max(len(got), len(wl)); i++ {
			var g, w []byte
			if i < len(got) {
				g = got[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if !bytes.Equal(g, w) {
				t.Fatalf("%s differs from %s at line %d:\ngot  %s\nwant %s", name, path, i+1, g, w)
			}
		}
	}
}

// TestGoldenReport pins the report outputs byte for byte on deterministic
// input: synthetic requests through the recorder, finish and the cells'
// assembly (report.*), and the merge of two synthetic shards (merged.*).
func TestGoldenReport(t *testing.T) {
	outputs := []struct {
		ext   string
		write func(io.Writer, *report.Report) error
	}{{"json", render.WriteJSON}, {"csv", render.WriteCSV}, {"md", render.WriteMarkdown}, {"html", render.WriteHTML}}
	for _, tc := range []struct {
		prefix string
		report func(testing.TB) *report.Report
	}{{"report", goldenReport}, {"merged", goldenMerged}, {"h200", goldenRecorded}} {
		t.Run(tc.prefix, func(t *testing.T) {
			r := tc.report(t)
			for _, o := range outputs {
				checkGolden(t, tc.prefix+"."+o.ext, r, o.write)
			}
			if r.ColdStart != nil {
				checkGolden(t, "cold_start.csv", r, WriteColdStartCSV)
			}
			// The same report twice renders the same bytes (no map order,
			// no clock, no randomness left).
			var a, b bytes.Buffer
			render.WriteJSON(&a, tc.report(t))
			render.WriteJSON(&b, tc.report(t))
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatal("two builds of the same report differ")
			}
		})
	}
}
