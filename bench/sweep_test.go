package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
)

// sweepSpec is a sweep configuration as Parse leaves it.
func sweepSpec(t *testing.T, sweep string) *SweepSpec {
	t.Helper()
	cfg, err := Parse([]byte("targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  sweep: "+sweep+"\n"), "b.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Bench.Sweep
}

// TestSweepRefine: refine: 0 is no bisection (it used to mean the default
// 3); unset is 3.
func TestSweepRefine(t *testing.T) {
	for _, tc := range []struct {
		sweep string
		want  int
	}{
		{"{}", 3},
		{"{refine: 0}", 0},
		{"{refine: 1}", 1},
	} {
		if got := *sweepSpec(t, tc.sweep).Refine; got != tc.want {
			t.Errorf("%s: refine %d, want %d", tc.sweep, got, tc.want)
		}
	}
	if _, err := Parse([]byte("targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\nbench:\n  matrix: {rates: [1]}\n  sweep: {refine: -1}\n"), "b.yml"); err == nil || !strings.Contains(err.Error(), "refine") {
		t.Errorf("refine -1: %v, want refused", err)
	}
}

// fakeServer is a server and client pair for searchSweep: points below
// capacity pass, at or above it fail; the client degrades at and above
// clientLimit (0: never), and at clientAt.
type fakeServer struct {
	capacity, clientLimit float64
	clientAt              float64
	tried                 []float64
}

func (f *fakeServer) try(rate float64) (report.SweepPoint, error) {
	f.tried = append(f.tried, rate)
	r := report.RepeatResult{Stats: report.Stats{Requests: 100, Successes: 100, GoodputRatio: 1}}
	if rate >= f.capacity {
		r.Stats.Successes, r.Stats.GoodputRatio = 50, 0.5
	}
	r.Client = judgeClient(clientCounts{arrivals: 100}, 0.001, 0.0003)
	if f.clientLimit > 0 && rate >= f.clientLimit || rate == f.clientAt {
		r.Client = judgeClient(clientCounts{arrivals: 100, late: 40, runs: 30}, 0.05, 0.02)
	}
	sw := &SweepSpec{Pass: SweepPassSuccess, MinSuccess: 0.999}
	return sweepPoint(sw, "success >= 0.999", rate, &r), nil
}

// TestSearchSweep: the search's rates and result. A point whose client was
// degraded counts for neither side: it ends the sweep there, as the
// client's limit, whose note says so and what to change; refine: 0 tries
// no rate between the last passing and the first failing.
func TestSearchSweep(t *testing.T) {
	three, zero := 3, 0
	for _, tc := range []struct {
		name                  string
		refine                *int
		capacity, clientLimit float64
		clientAt              float64
		tried                 []float64
		max, failing, client  float64
		note                  []string
	}{
		{name: "server's limit, refined", refine: &three, capacity: 12, tried: []float64{4, 8, 16, 12, 10, 11},
			max: 11, failing: 12},
		{name: "refine 0", refine: &zero, capacity: 12, tried: []float64{4, 8, 16}, max: 8, failing: 16},
		{name: "client's limit before the server's", refine: &three, capacity: 64, clientLimit: 16, tried: []float64{4, 8, 16},
			max: 8, client: 16, note: []string{"stopped at 16 req/s, the client's limit, not the server's", "40% of 100 arrivals",
				"the server passed success >= 0.999 up to 8 req/s", "GOMAXPROCS"}},
		{name: "client degraded at the start", refine: &three, capacity: 64, clientLimit: 1, tried: []float64{4},
			client: 4, note: []string{"stopped at 4 req/s, the client's limit", "no rate was judged (lower sweep.start)"}},
		{name: "client's limit while refining", refine: &three, capacity: 16, clientAt: 12, tried: []float64{4, 8, 16, 12},
			max: 8, failing: 16, client: 12, note: []string{"the server passed success >= 0.999 at 8 req/s and failed it at 16 req/s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw := &SweepSpec{Start: 4, Factor: 2, MaxRate: 64, Refine: tc.refine, Pass: SweepPassSuccess, MinSuccess: 0.999}
			f := &fakeServer{capacity: tc.capacity, clientLimit: tc.clientLimit, clientAt: tc.clientAt}
			res := report.SweepResult{Rule: "success >= 0.999"}
			if err := searchSweep(sw, &res, f.try); err != nil {
				t.Fatal(err)
			}
			if !slicesEqual(f.tried, tc.tried) || len(res.Points) != len(tc.tried) {
				t.Errorf("tried %v (%d points), want %v", f.tried, len(res.Points), tc.tried)
			}
			if res.MaxRate != tc.max || res.FirstFailingRate != tc.failing || res.ClientLimitedRate != tc.client {
				t.Errorf("max %g, first failing %g, client's limit %g; want %g, %g, %g", res.MaxRate, res.FirstFailingRate, res.ClientLimitedRate, tc.max, tc.failing, tc.client)
			}
			for _, want := range tc.note {
				if !strings.Contains(res.Note, want) {
					t.Errorf("note %q lacks %q", res.Note, want)
				}
			}
			if tc.client == 0 && strings.Contains(res.Note, "client") {
				t.Errorf("note %q speaks of the client", res.Note)
			}
			for _, pt := range res.Points {
				if pt.Degraded && (pt.Pass || !strings.Contains(pt.Note, "the point measured the client, not the server")) {
					t.Errorf("degraded point %+v", pt)
				}
			}
		})
	}
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSweepLines: the lines the progress says as each point ends and at
// the sweep's end, and the console's block: rate, verdict and why; the
// result with the client's limit.
func TestSweepLines(t *testing.T) {
	f := &fakeServer{capacity: 64, clientLimit: 16}
	three := 3
	res := report.SweepResult{Target: "vllm", Shape: "chat", Rule: "success >= 0.999"}
	if err := searchSweep(&SweepSpec{Start: 4, Factor: 2, MaxRate: 64, Refine: &three}, &res, f.try); err != nil {
		t.Fatal(err)
	}
	if got, want := render.SweepPointLine("vllm", "m", "chat", res.Points[0]), "sweep vllm/m/chat: 4 req/s passed (100 requests, success 1.000, goodput 1.000)"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got := render.SweepPointLine("vllm", "m", "chat", res.Points[2]); !strings.HasPrefix(got, "sweep vllm/m/chat: 16 req/s not judged (the client's limit) (100 requests") ||
		!strings.Contains(got, "client degraded: 40% of 100 arrivals") {
		t.Errorf("degraded point's line %q", got)
	}
	if got := render.SweepResultLine("m", &res); !strings.HasPrefix(got, "sweep vllm/m/chat: max rate 8 req/s (success >= 0.999), stopped at 16 req/s by the client: the sweep stopped") {
		t.Errorf("result line %q", got)
	}
	var b strings.Builder
	render.WriteSweeps(&b, &report.Report{Sweeps: []report.SweepResult{res}})
	for _, want := range []string{"Rate sweep vllm/chat", "Point:", "8 req/s passed", "Max rate (req/s):", "Client's limit (req/s):                  16", "Note:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the console's sweep lacks %q:\n%s", want, b.String())
		}
	}
}

// TestSweepSaysEachPoint: a sweep is not silent for its minutes: the
// progress says each point as it ends and the result, and the console's
// summary says the sweep again after the cells.
func TestSweepSaysEachPoint(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	sim := startSim(t, 2*time.Millisecond, 1, 0)
	dir := t.TempDir()
	yml := targetsYAML([]string{"sim"}, []*simTarget{sim}) + `
bench:
  matrix: {rates: [5], shapes: [{name: s, input_tokens: 16, output_tokens: 4}]}
  warmup: 0s
  duration: 500ms
  repeats: 1
  stability: {enabled: false}
  sweep: {start: 5, factor: 2, max_rate: 10, refine: 0, duration: 1s, warmup: 0s}
  ranking: {resamples: 100}
`
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+writeTestFile(t, dir, "b.yml", yml), "--output.dir="+filepath.Join(dir, "out"))
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	// The second point only when the first passed: a verdict this test
	// does not hold a busy machine to.
	for _, want := range []string{"sweep sim/sim-model/s: 5 req/s ", "sweep sim/sim-model/s: max rate "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the progress lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "Rate sweep sim/sim-model/s") || !strings.Contains(stdout, "Max rate (req/s):") {
		t.Errorf("the console's summary lacks the sweep:\n%s", stdout)
	}
}
