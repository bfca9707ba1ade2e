package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"go.yaml.in/yaml/v3"

	"github.com/infer-exporter/infer_exporter/bench/render"
)

// TestQuickStart: `bench --target.url=... --rate --input-tokens
// --output-tokens --duration` runs one cell against the simulator without
// a configuration file, asks /v1/models for the model it was not given,
// writes the report in --output.dir and prints the cell's result block.
func TestQuickStart(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	sim := startSim(t, 10*time.Millisecond, 1, 0)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--target.url="+sim.URL, "--rate=4",
		"--input-tokens=32", "--output-tokens=8", "--duration=5s", "--output.dir="+out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)
	if len(r.Cells) != 1 || r.Cells[0].Key != "target/rate=4/in32-out8" {
		t.Fatalf("cells %+v", r.Cells)
	}
	c := r.Cells[0]
	if len(c.Repeats) != 1 || c.Summary.Successes == 0 || c.Summary.WindowSeconds != 5 {
		t.Errorf("one repeat of 5 s with successes: %d repeats, %d successes, %v s", len(c.Repeats), c.Summary.Successes, c.Summary.WindowSeconds)
	}
	// The figures read as the flags: constant arrivals at --rate (20 in the
	// window, give or take the one a window's edge cuts: 5%), and every
	// answer asked to be --output-tokens long (ignore_eos).
	// The offered rate is the schedule's, whatever the machine; the
	// printed throughput equals it unless a busy machine made the client
	// late enough for the wire ceiling to drop an arrival (counted, and
	// then the throughput is the ceiling's business, not the flags').
	if got := c.Summary.OfferedPerSecond; math.Abs(got-4)/4 > 0.10 {
		t.Errorf("offered %.2f req/s, want --rate 4 within 10%%", got)
	}
	if got := c.Summary.RequestsPerSecond; c.Summary.DroppedPerSecond == 0 && math.Abs(got-4)/4 > 0.10 {
		t.Errorf("requests per second %.2f with none dropped, want --rate 4 within 10%%", got)
	}
	for _, b := range sim.bodies() {
		var req struct {
			MaxTokens int  `json:"max_tokens"`
			IgnoreEOS bool `json:"ignore_eos"`
		}
		if err := json.Unmarshal([]byte(b), &req); err != nil || req.MaxTokens != 8 || !req.IgnoreEOS {
			t.Fatalf("request %s (%v): want max_tokens 8 and ignore_eos", b, err)
		}
	}
	if r.Environment.Targets[0].ConfiguredModel != "sim-model" || r.Environment.Targets[0].Flavor != "openai-chat" {
		t.Errorf("target %+v: want the model /v1/models lists, flavor openai-chat", r.Environment.Targets[0])
	}
	if r.Environment.ConfigFile != "" || !strings.Contains(r.Environment.Config, "rates:\n") {
		t.Errorf("config file %q; embedded config:\n%s", r.Environment.ConfigFile, r.Environment.Config)
	}
	b := parseBlocks(t, stdout)[c.Key]
	if b == nil || b["heading"][0] != "target/sim-model/in32-out8 rate 4" || b["Stable"][0] != "not checked" {
		t.Errorf("result block %v:\n%s", b, stdout)
	}
	if _, err := os.Stat(filepath.Join(out, render.MarkdownFile)); err != nil {
		t.Error(err)
	}
}

// TestQuickStartWrongModel: docs/bench.md's quick start with a --model the
// server does not serve: every request is refused with a 404, the bench
// exits ExitNoSuccess, and its console says so first, with the status and
// the models the server serves.
func TestQuickStartWrongModel(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	sim := startSim(t, 10*time.Millisecond, 1, 0)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI(t, context.Background(), "bench", "--target.url="+sim.URL, "--model=meta-llama/Llama-3.1-8B-Instruct",
		"--rate=4", "--input-tokens=32", "--output-tokens=8", "--duration=2s", "--output.dir="+out)
	if code != ExitNoSuccess {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitNoSuccess, stdout, stderr)
	}
	for _, want := range []string{"FAILED target/rate=4/in32-out8: no request succeeded", "404 ",
		`the server does not serve model "meta-llama/Llama-3.1-8B-Instruct"; it serves: sim-model`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the console lacks %q:\n%s", want, stdout)
		}
	}
	if i, j := strings.Index(stdout, "FAILED"), strings.Index(stdout, "leaderboard"); i < 0 || j >= 0 && j < i {
		t.Errorf("the failure is not said before the leaderboard:\n%s", stdout)
	}
	if strings.Contains(stdout, "  1  target") || !strings.Contains(stdout, "leaderboard: none (") {
		t.Errorf("the leaderboard ranks a target that measured nothing, or is an empty heading:\n%s", stdout)
	}
	if !strings.Contains(stderr, "1 cell measured no successful request") {
		t.Errorf("stderr %q", stderr)
	}
	if _, err := os.Stat(filepath.Join(out, JSONFile)); err != nil {
		t.Errorf("the report is still written: %v", err)
	}
}

// TestQuickStartRefused: a configuration file with the quick-start flags,
// or the flags without a URL, are refused before anything runs.
func TestQuickStartRefused(t *testing.T) {
	dir := t.TempDir()
	file := writeTestFile(t, dir, "b.yml", "targets: [{name: a, url: 'http://127.0.0.1:1', model: m}]\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"file and flags", []string{"--config.file=" + file, "--rate=2"}, "--config.file and the quick-start flags"},
		{"file and URL", []string{"--config.file=" + file, "--target.url=http://127.0.0.1:1", "--output.dir=" + dir}, "exclude each other"},
		{"flags without a URL", []string{"--rate=2", "--duration=2s"}, "needs --target.url"},
		{"neither", []string{"--output.dir=" + dir}, "needs --config.file, or the quick-start flags"},
		{"URL without its scheme", []string{"--target.url=localhost:8000", "--output.dir=" + dir}, `--target.url=localhost:8000: not an absolute http or https URL; did you mean "http://localhost:8000"?`},
		{"address without its scheme", []string{"--target.url=127.0.0.1:8000", "--output.dir=" + dir}, `did you mean "http://127.0.0.1:8000"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, context.Background(), append([]string{"bench"}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q\n%s", code, stderr, ExitUsage, tc.want, stdout)
			}
		})
	}
}

// TestServedModel: without --model, the one model /v1/models lists; a
// server that lists none or several asks for --model.
func TestServedModel(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want, err  string
	}{
		{"one", `{"object":"list","data":[{"id":"m1","object":"model"}]}`, 200, "m1", ""},
		{"two", `{"data":[{"id":"m1"},{"id":"m2"}]}`, 200, "", "lists 2 models (m1, m2): name one with --model"},
		{"none", `{"data":[]}`, 200, "", "lists 0 models"},
		{"not found", `nope`, 404, "", "answered 404"},
		{"not JSON", `<html>`, 200, "", "no --model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			got, err := servedModel(context.Background(), srv.URL+"/")
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("servedModel = %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestTwoBenchesSideBySide: two benches in one process at once, against
// one server, share nothing (no fixed port, path or global state; the
// live listener opens only with --web.listen-address): both end well,
// each with its own report.
func TestTwoBenchesSideBySide(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	sim := startSim(t, 10*time.Millisecond, 1, 0)
	dir := t.TempDir()
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, 2)
	done := make(chan int)
	for i := range results {
		go func() {
			app := kingpin.New("infer_exporter", "")
			var stdout, stderr bytes.Buffer
			_, run := addCommand(app, false, &stdout, &stderr)
			args := []string{"bench", "--target.url=" + sim.URL, "--model=sim-model", "--rate=4", "--input-tokens=16",
				"--output-tokens=4", "--duration=1s", "--output.dir=" + filepath.Join(dir, strconv.Itoa(i))}
			results[i].code = ExitUsage
			if _, err := app.Parse(args); err == nil {
				results[i].code = run(context.Background(), slog.New(slog.DiscardHandler))
			}
			results[i].stdout, results[i].stderr = stdout.String(), stderr.String()
			done <- i
		}()
	}
	<-done
	<-done
	for i, r := range results {
		if r.code != ExitOK {
			t.Fatalf("bench %d: exit %d\n%s\n%s", i, r.code, r.stdout, r.stderr)
		}
		rep := readReport(t, filepath.Join(dir, strconv.Itoa(i)))
		if len(rep.Cells) != 1 || rep.Cells[0].Summary.Successes == 0 {
			t.Errorf("bench %d: cells %+v", i, rep.Cells)
		}
	}
}

// TestQuickStartRateHelpNamesItsProcess: --rate's help names the arrival
// process the quick start's configuration sends, and no other.
func TestQuickStartRateHelpNamesItsProcess(t *testing.T) {
	app := kingpin.New("infer_exporter", "")
	addCommand(app, false, io.Discard, io.Discard)
	var help string
	for _, c := range app.Model().Commands {
		for _, sub := range c.Commands {
			for _, f := range sub.Flags {
				if sub.Name == "run" && f.Name == "rate" {
					help = f.Help
				}
			}
		}
	}
	if help == "" {
		t.Fatal("bench run has no --rate flag")
	}
	b, err := quickConfig(&quickFlags{url: "http://127.0.0.1:8000", rate: 2})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Bench struct {
			Matrix struct {
				Process string `yaml:"process"`
			} `yaml:"matrix"`
		} `yaml:"bench"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil || doc.Bench.Matrix.Process == "" {
		t.Fatalf("quick start configuration %v:\n%s", err, b)
	}
	if !strings.Contains(help, doc.Bench.Matrix.Process) {
		t.Errorf("--rate's help %q does not name the quick start's process %q", help, doc.Bench.Matrix.Process)
	}
	for _, other := range []string{"poisson", "gamma"} {
		if other != doc.Bench.Matrix.Process && strings.Contains(strings.ToLower(help), other) {
			t.Errorf("--rate's help %q names %s; the quick start sends %s", help, other, doc.Bench.Matrix.Process)
		}
	}
}
