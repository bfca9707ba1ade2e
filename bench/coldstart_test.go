package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// The cold-start tests start the simulator as a server process: this test
// binary again, running TestColdStartHelperProcess, which serves
// `infer_exporter simulate`'s flags (simulator.AddFlags) and appends its
// ground truth, the instants it started and became ready, to a file.
const helperEnv = "INFER_EXPORTER_COLDSTART_HELPER"

// truth is one server process's ground truth.
type truth struct {
	Started time.Time `json:"started"`
	Ready   time.Time `json:"ready"`
}

// TestColdStartHelperProcess is the server process of the cold-start tests;
// run directly, it skips. Its arguments, after "--": the truth file, then
// --web.listen-address and the --sim.* flags.
func TestColdStartHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the server process of the cold-start tests, which run it")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	app := kingpin.New("simulate", "")
	addr := app.Flag("web.listen-address", "").Required().String()
	cfg := simulator.AddFlags(app)
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "no truth file")
		os.Exit(2)
	}
	if _, err := app.Parse(args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(2)
	}
	sim, err := simulator.New(*cfg, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	line, _ := json.Marshal(truth{sim.StartedAt(), sim.ReadyAt()})
	f, err := os.OpenFile(args[0], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.Write(append(line, '\n'))
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("simulator loading for", cfg.LoadDelay)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	err = sim.ListenAndServe(ctx, *addr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// helperCommand is the YAML command list that starts the helper server.
func helperCommand(truthFile, addr string, simFlags ...string) string {
	argv := append([]string{os.Args[0], "-test.run=^TestColdStartHelperProcess$", "--", truthFile, "--web.listen-address=" + addr}, simFlags...)
	b, _ := json.Marshal(argv)
	return string(b)
}

func readTruths(t *testing.T, path string) []truth {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []truth
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var x truth
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

// refused reports whether nothing listens on addr.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return true
}

func coldStartConfig(t *testing.T, dir, addr, coldStart string) *Config {
	t.Helper()
	yml := fmt.Sprintf(`targets:
  - name: sim
    url: http://%s
    model: sim-model
    flavor: openai-completions
    timeout: 10s
    metrics: {interval: 1s, timeout: 1s}
bench:
  seed: 1
  warmup: 0s
  duration: 1s
  repeats: 1
  prompt_set_size: 10
  stability: {enabled: false}
  ranking: {resamples: 100}
  matrix:
    rates: [4]
    shapes: [{input_tokens: 8, output_tokens: 4}]
  cold_start:
%s`, addr, coldStart)
	cfg, err := Parse([]byte(yml), filepath.Join(dir, "bench.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestColdStartMeasuresTheLoad: the bench starts a server whose model
// load takes a known time, twice; each repeat's start, ready and first
// token are checked against the instants the server itself recorded, the
// last server serves the matrix, and none outlives the run.
func TestColdStartMeasuresTheLoad(t *testing.T) {
	const delay = 700 * time.Millisecond
	t.Setenv(helperEnv, "1")
	dir := t.TempDir()
	addr := freeAddr(t)
	truthFile := filepath.Join(dir, "truth.jsonl")
	cfg := coldStartConfig(t, dir, addr, fmt.Sprintf(`    command: %s
    ready_url: http://%s/health
    repeats: 2
    timeout: 30s
    poll_interval: 20ms
    stop_timeout: 5s
`, helperCommand(truthFile, addr, "--sim.load-delay="+delay.String(), "--sim.time-scale=0"), addr))
	rep, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !refused(addr) {
		t.Error("a server still listens after the run")
	}
	cs := rep.ColdStart
	if cs == nil || len(cs.Repeats) != 2 || cs.Failed != 0 {
		t.Fatalf("cold start report %+v", cs)
	}
	truths := readTruths(t, truthFile)
	if len(truths) != 2 {
		t.Fatalf("%d server processes recorded, want 2", len(truths))
	}
	for i, r := range cs.Repeats {
		tr := truths[i]
		ready := r.Started.Add(time.Duration(float64(r.ReadySeconds) * float64(time.Second)))
		t.Logf("repeat %d: ready %.3f s, first token %.3f s (TTFT %.4f s, %d requests); the process started its simulator %v after the bench started it",
			i+1, r.ReadySeconds, r.FirstTokenSeconds, r.FirstRequestTTFTSeconds, r.Requests, tr.Started.Sub(r.Started))
		if r.Started.After(tr.Started) {
			t.Errorf("repeat %d: started at %v, after the server's own start %v", i+1, r.Started, tr.Started)
		}
		// Ready is a poll that answered 200: not before the load ended,
		// and within a poll interval of it, with a wide margin for a
		// loaded machine.
		if late := ready.Sub(tr.Ready); late < 0 || late > time.Second {
			t.Errorf("repeat %d: ready %v after the load ended, want within [0, 1s]", i+1, late)
		}
		if float64(r.ReadySeconds) < delay.Seconds() {
			t.Errorf("repeat %d: ready after %.3f s, below the load delay %v", i+1, r.ReadySeconds, delay)
		}
		if !(r.FirstTokenSeconds > r.ReadySeconds) || float64(r.FirstTokenSeconds-r.ReadySeconds) > 1 || !(r.FirstRequestTTFTSeconds > 0) {
			t.Errorf("repeat %d: first token %.3f s, ready %.3f s, TTFT %.4f s: want the first token just after ready",
				i+1, r.FirstTokenSeconds, r.ReadySeconds, r.FirstRequestTTFTSeconds)
		}
		if r.Requests != 1 {
			t.Errorf("repeat %d: %d requests, want 1 (sent once ready)", i+1, r.Requests)
		}
	}
	if !(cs.ReadySeconds >= report.Num(delay.Seconds())) || !(cs.FirstTokenSeconds > cs.ReadySeconds) {
		t.Errorf("medians: ready %v, first token %v", cs.ReadySeconds, cs.FirstTokenSeconds)
	}
	if len(rep.Cells) != 1 || rep.Cells[0].Summary.Successes == 0 {
		t.Errorf("the matrix did not meet the kept server: %+v", rep.Cells)
	}

	// The reports carry it: the JSON's figures, a CSV row per repeat and
	// the median, an HTML section.
	out := filepath.Join(dir, "out")
	if err := WriteFiles(out, rep); err != nil {
		t.Fatal(err)
	}
	back := readReport(t, out)
	if back.ColdStart == nil || back.ColdStart.ReadySeconds != cs.ReadySeconds {
		t.Errorf("report.json cold start %+v, want %+v", back.ColdStart, cs)
	}
	f, err := os.ReadFile(filepath.Join(out, ColdStartCSVFile))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(f)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[3][1] != "median" || rows[3][3] != report.FormatFloat(float64(cs.ReadySeconds)) {
		t.Errorf("cold_start.csv rows %q", rows)
	}
	html, err := os.ReadFile(filepath.Join(out, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := `data-q="ready_seconds" data-value="` + report.FormatFloat(float64(cs.ReadySeconds)) + `"`; !strings.Contains(string(html), want) {
		t.Errorf("report.html lacks %s", want)
	}
}

// TestColdStartFailures: a server that exits, or never gets ready, fails
// its repeat with the reason and its output, and is stopped; the run,
// which needs the last repeat's server, fails with that reason; a command
// that cannot start fails the run too.
func TestColdStartFailures(t *testing.T) {
	t.Setenv(helperEnv, "1")
	for _, tc := range []struct {
		name     string
		simFlags []string
		extra    string
		program  string // a program that does not exist, instead of the helper
		want     string // the run's error holds this
		command  string // a command of its own, instead of the helper
	}{
		{"exits at once", []string{"--sim.no-such-flag"}, "", "", "exited with status 2 before ready", ""},
		{"the first exits, the second serves", []string{"--sim.no-such-flag"}, "    repeats: 2\n", "", "", ""},
		{"never ready", []string{"--sim.load-delay=1h"}, "    timeout: 1s\n", "", "no ready within the timeout of 1s", ""},
		{"no program", nil, "", "no-such-program", "no-such-program", ""},
		// Issue 23: a child that keeps the output open hid the exit until
		// the timeout, reported as "no ready within the timeout".
		{"exits, its child lives on", nil, "    timeout: 30s\n", "", "the server command exited with status 3 before ready",
			`["/bin/sh", "-c", "sleep 1000 & exit 3"]`},
		// Issue 23: a child that left the process group held the stop,
		// and so the bench, for ever.
		{"never ready, its child escaped the group", nil, "    timeout: 2s\n", "", "no ready within the timeout of 2s",
			`["/bin/sh", "-c", "setsid /bin/sh -c 'echo $$ > ESCAPED; exec sleep 300' & sleep 1000"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			truthFile := filepath.Join(dir, "truth.jsonl")
			cmd := helperCommand(truthFile, addr, tc.simFlags...)
			if tc.program != "" {
				cmd = `["` + filepath.Join(dir, tc.program) + `"]`
			}
			if tc.name == "the first exits, the second serves" {
				// A wrapper that fails once, then serves: the helper with a
				// bad flag, then a good one, chosen by a marker file.
				cmd = `["/bin/sh", "-c", "if [ -e ` + filepath.Join(dir, "once") + ` ]; then exec \"$0\" \"$@\"; fi; touch ` + filepath.Join(dir, "once") + `; exit 3", ` +
					strings.TrimPrefix(helperCommand(truthFile, addr, "--sim.time-scale=0"), "[")
			}
			escaped := filepath.Join(dir, "escaped.pid")
			if tc.command != "" {
				cmd = strings.ReplaceAll(tc.command, "ESCAPED", escaped)
			}
			cfg := coldStartConfig(t, dir, addr, fmt.Sprintf("    command: %s\n    ready_url: http://%s/health\n    stop_timeout: 5s\n%s", cmd, addr, tc.extra))
			var rep *report.Report
			var err error
			done := make(chan struct{})
			go func() { defer close(done); rep, err = Run(context.Background(), cfg, Options{}) }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("the run did not end (the bench hung on its server command)")
			}
			if !refused(addr) {
				t.Error("a server still listens after the run")
			}
			if tc.command != "" && strings.Contains(tc.command, "ESCAPED") {
				assertEscapedKilled(t, escaped)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cs := rep.ColdStart; cs.Failed != 1 || !strings.Contains(cs.Repeats[0].Error, "exited with status 3") || cs.Repeats[1].Error != "" || !cs.FirstTokenSeconds.Valid() {
					t.Errorf("cold start %+v: want repeat 1 failed (exit status 3), repeat 2 measured", cs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run error %v, want one with %q", err, tc.want)
			}
			if tc.name == "exits at once" && !strings.Contains(err.Error(), "no-such-flag") {
				t.Errorf("the error %q lacks the server's own output", err)
			}
		})
	}
}

// assertEscapedKilled checks that the process whose pid is in file (a
// child that left the server's process group) was killed with the server.
func assertEscapedKilled(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the escaped child wrote no pid: %v", err)
	}
	pid := strings.TrimSpace(string(b))
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		// Gone, or a zombie waiting for its reaper: killed either way.
		if err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(atoiOrZero(pid), syscall.SIGKILL)
			t.Fatalf("the escaped child %s still runs after the run: %s", pid, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func atoiOrZero(s string) int {
	n := 0
	fmt.Sscanf(s, "%d", &n)
	return n
}

// TestColdStartStopHonoursContext: a run interrupted while its server
// command never gets ready, and has a child that left its process group,
// ends promptly: the stop skips the grace once the context has ended, and
// none of its waits is unbounded (issue 23: it waited for ever).
func TestColdStartStopHonoursContext(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	escaped := filepath.Join(dir, "escaped.pid")
	cmd := `["/bin/sh", "-c", "trap '' TERM; setsid /bin/sh -c 'echo $$ > ` + escaped + `; exec sleep 300' & sleep 1000"]`
	cfg := coldStartConfig(t, dir, addr, fmt.Sprintf("    command: %s\n    ready_url: http://%s/health\n    stop_timeout: 1m\n    timeout: 1h\n", cmd, addr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := Run(ctx, cfg, Options{}); done <- err }()
	time.Sleep(time.Second)
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Errorf("Run error %v, want interrupted", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the interrupted run did not end within a minute (its stop_timeout is 1m: the grace was not cut short)")
	}
	assertEscapedKilled(t, escaped)
}

func TestColdStartConfig(t *testing.T) {
	base := "targets:\n  - {name: a, url: 'http://127.0.0.1:1', model: m}\n%s" +
		"bench:\n  matrix: {rates: [1]}\n  cold_start:\n%s"
	second := "  - {name: b, url: 'http://127.0.0.1:2', model: m}\n"
	for _, tc := range []struct {
		name, targets, block string
		err                  string // "" = valid
	}{
		{"minimal", "", "    command: [server]\n", ""},
		{"no command", "", "    ready_url: http://x/health\n", "bench.cold_start.command: is required"},
		{"empty program", "", "    command: ['']\n", "the program is empty"},
		{"bad ready url", "", "    command: [s]\n    ready_url: ftp://x/\n", "not an http or https URL"},
		{"several targets, none named", second, "    command: [s]\n", "bench.cold_start.target: is required"},
		{"several targets, one named", second, "    command: [s]\n    target: b\n", ""},
		{"unknown target", "", "    command: [s]\n    target: z\n", "not a target of the run"},
		{"too many repeats", "", "    command: [s]\n    repeats: 101\n", "bench.cold_start.repeats"},
		{"negative repeats", "", "    command: [s]\n    repeats: -1\n", "bench.cold_start.repeats"},
		{"poll too fast", "", "    command: [s]\n    poll_interval: 1ms\n", "bench.cold_start.poll_interval"},
		{"timeout too long", "", "    command: [s]\n    timeout: 48h\n", "bench.cold_start.timeout"},
		{"stop timeout negative", "", "    command: [s]\n    stop_timeout: -1s\n", "bench.cold_start.stop_timeout"},
		{"unknown field", "", "    command: [s]\n    shell: true\n", "shell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(fmt.Sprintf(base, tc.targets, tc.block)), "c.yml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cs := cfg.Bench.ColdStart
			if cs.Repeats != DefaultColdStartRepeats || cs.Timeout != DefaultColdStartTimeout || cs.PollInterval != DefaultColdStartPollInterval ||
				cs.StopTimeout != DefaultColdStartStopTimeout || cs.Target == "" {
				t.Errorf("defaults not applied: %+v", cs)
			}
		})
	}
}
