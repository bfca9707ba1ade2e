package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
)

// TestAuditChainAndMarkdown: a report records the SHA-256 of the exporter
// binary, the configuration and every trace, with UTC start and end; its
// report.md carries the same numbers as report.json; `bench verify` passes
// on the fresh report and names the input that changed once one is edited.
func TestAuditChainAndMarkdown(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	st := []*simTarget{startSim(t, 5*time.Millisecond, 1, 0), startSim(t, 10*time.Millisecond, 1, 0)}
	dir := t.TempDir()
	trace := writeTestFile(t, dir, "trace.jsonl", mooncakeTrace(6, 50*time.Millisecond, 100, 4))
	cfgFile := writeTestFile(t, dir, "b.yml", targetsYAML([]string{"fast", "slow"}, st)+`
bench:
  matrix:
    process: constant
    rates: [4]
    shapes: [{name: s, input_tokens: 16, output_tokens: 8}]
    replays: [{name: mc, source: mooncake, path: trace.jsonl}]
  warmup: 200ms
  duration: 1s
  repeats: 1
  prompt_set_size: 16
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  ranking: {resamples: 100}
`)
	out := filepath.Join(dir, "out")
	if code, stdout, stderr := runCLI(t, context.Background(), "bench", "--config.file="+cfgFile, "--output.dir="+out); code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)
	env := r.Environment
	if env.Started.Location() != time.UTC || env.Finished.Before(env.Started) {
		t.Errorf("start %v, end %v: want UTC instants in order", env.Started, env.Finished)
	}
	kinds := map[string]int{}
	for _, in := range env.Inputs {
		kinds[in.Kind]++
		if len(in.SHA256) != 64 {
			t.Errorf("input %+v: no SHA-256", in)
		}
	}
	if kinds[report.InputExporter] != 1 || kinds[report.InputConfig] != 1 || kinds[report.InputTrace] != 1 || kinds[report.InputPromptSet] != 2 {
		t.Errorf("inputs %+v", env.Inputs)
	}
	for _, in := range env.Inputs {
		if in.Kind == report.InputConfig && in.SHA256 != env.ConfigSHA256 {
			t.Errorf("config hashed %s, loaded as %s", in.SHA256, env.ConfigSHA256)
		}
	}

	// report.md: the numbers of report.json, cell by cell and on the
	// leaderboard.
	md, err := os.ReadFile(filepath.Join(out, render.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	// The leaderboard's rows by rank and target: tied targets share a rank
	// ("=1"), as two simulators of alike speed may on a busy machine.
	ranked := map[[2]string][]string{}
	for _, line := range strings.Split(string(md), "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		f := strings.Split(strings.Trim(line, "| "), " | ")
		if _, seen := rows[f[0]]; !seen { // the cells table comes first; the replays' rows later
			rows[f[0]] = f
		}
		if len(f) > 1 {
			ranked[[2]string{f[0], f[1]}] = f
		}
	}
	if len(r.Cells) != 4 {
		t.Fatalf("%d cells", len(r.Cells))
	}
	for _, c := range r.Cells {
		s := c.Summary
		want := []string{c.Key, strconv.Itoa(s.Requests), strconv.Itoa(s.Successes), report.MarkdownRate(s.RequestsPerSecond), report.MarkdownRate(s.OutputTokensPerSecond),
			report.MarkdownRatio(s.GoodputRatio), report.MarkdownMillis(s.TTFT.P50), report.MarkdownMillis(s.TTFT.P99), report.MarkdownMillis(s.TPOT.P50), report.MarkdownMillis(s.TPOT.P99), report.MarkdownMillis(s.E2E.P50), report.MarkdownMillis(s.E2E.P99)}
		got := rows[c.Key]
		if len(got) < len(want) {
			t.Errorf("cell %s: row %v", c.Key, got)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("cell %s, column %d: %q in report.md, %q from report.json", c.Key, i, got[i], want[i])
			}
		}
	}
	for _, e := range r.Ranking.Entries {
		rank := strconv.Itoa(e.Rank)
		if e.Tied {
			rank = "=" + rank
		}
		if got := ranked[[2]string{rank, e.Target}]; len(got) < 3 || got[2] != report.MarkdownRatio(e.Score) {
			t.Errorf("leaderboard row %v for %+v", got, e)
		}
	}
	for _, in := range env.Inputs {
		if !strings.Contains(string(md), in.SHA256) {
			t.Errorf("report.md lacks the hash of %s %s", in.Kind, in.Name)
		}
	}

	// bench verify: all match, then the trace is edited.
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "verify", filepath.Join(out, JSONFile))
	if code != ExitOK || strings.Contains(stdout, "CHANGED") || !strings.Contains(stdout, "every input found matches") {
		t.Fatalf("verify of a fresh report: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if err := os.WriteFile(trace, []byte(mooncakeTrace(7, 50*time.Millisecond, 100, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCLI(t, context.Background(), "bench", "verify", filepath.Join(out, JSONFile))
	if code != ExitError || !strings.Contains(stdout, "CHANGED  trace mc") || strings.Contains(stdout, "CHANGED  config") {
		t.Errorf("verify after the trace changed: exit %d\n%s", code, stdout)
	}
	if err := os.Remove(cfgFile); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ = runCLI(t, context.Background(), "bench", "verify", filepath.Join(out, JSONFile)); code != ExitError || !strings.Contains(stdout, "MISSING  config") {
		t.Errorf("verify without the configuration: exit %d\n%s", code, stdout)
	}
}
