package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// readmeBlock is the first ```sh block after the README's heading.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	return docBlock(t, "README.md", "\n"+heading+"\n")
}

// docBlock is the first ```sh block after marker in the repository's file.
func docBlock(t *testing.T, file, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + file)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("%s has no %q", file, marker)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("%s: no sh block after %q", file, marker)
	}
	return m[1]
}

// TestBenchQuickStartSteps runs docs/bench.md's quick start as written,
// with bash, against the simulator the README starts: it must not ask for
// a model the simulator does not serve, and must write its report into
// bench-out/. As in TestReadmeServerSteps, `infer_exporter` is this test
// binary and the simulator gets a free port in place of its default.
func TestBenchQuickStartSteps(t *testing.T) {
	block := docBlock(t, "docs/bench.md", "**Quick start, without a file.**")
	dir, out, err := runBenchDocSteps(t, "the quick start", block, true)
	if err != nil {
		t.Fatalf("docs/bench.md's quick start failed (%v):\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bench-out", "report.json")); err != nil {
		t.Errorf("the quick start wrote no bench-out/report.json (%v):\n%s", err, out)
	}
}

// benchSimExample is the bench file docs/bench.md's matrix and baseline
// steps run, from the repository's root.
const benchSimExample = "docs/examples/bench-sim.yml"

// TestBenchMatrixBaselineSteps runs docs/bench.md's matrix and baseline
// steps as written, with bash, against the simulator the README starts,
// with the example file a fresh clone has: the first run's cells all
// succeed, the second compares with the first, and the exit status it
// prints is its gate's verdict (0, 3 or 6, as the doc says). The block is
// run without -e, as a reader types it: its second run exits 6 by design.
func TestBenchMatrixBaselineSteps(t *testing.T) {
	block := docBlock(t, "docs/bench.md", "**A matrix and a baseline, from a file.**")
	if !strings.Contains(block, "--config.file="+benchSimExample) || !strings.Contains(block, "--baseline=sim-first/report.json") {
		t.Fatalf("docs/bench.md's matrix steps do not run %s with a baseline:\n%s", benchSimExample, block)
	}
	dir, out, err := runBenchDocSteps(t, "the matrix and baseline steps", block, false)
	if err != nil {
		t.Fatalf("docs/bench.md's matrix and baseline steps failed (%v):\n%s", err, out)
	}
	first := readBenchReport(t, filepath.Join(dir, "sim-first", "report.json"), out)
	if len(first.Cells) < 2 {
		t.Errorf("the first run measured %d cells, want the example's matrix:\n%s", len(first.Cells), out)
	}
	for _, c := range first.Cells {
		if c.Summary.Successes == 0 || c.Summary.Successes != c.Summary.Requests {
			t.Errorf("cell %s: %d of %d requests succeeded, want all:\n%s", c.Key, c.Summary.Successes, c.Summary.Requests, out)
		}
	}
	second := readBenchReport(t, filepath.Join(dir, "sim-second", "report.json"), out)
	m := regexp.MustCompile(`exit status (\d+)`).FindStringSubmatch(out)
	if m == nil || second.Baseline == nil {
		t.Fatalf("the second run printed no exit status or compared with no baseline:\n%s", out)
	}
	want := map[report.Verdict]string{report.VerdictOK: "0", report.VerdictRegressed: "3", report.VerdictInconclusive: "6"}[second.Baseline.Verdict]
	if m[1] != want {
		t.Errorf("exit status %s with the gate's verdict %q, want %s:\n%s", m[1], second.Baseline.Verdict, want, out)
	}
}

// readBenchReport reads a report.json the steps wrote.
func readBenchReport(t *testing.T, path, out string) *report.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the steps wrote no %s (%v):\n%s", path, err, out)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &r
}

// runBenchDocSteps runs a docs/bench.md block as written, with bash (-e
// when strict), in a fresh folder, after the README's simulator started
// in the background: `infer_exporter` is this test binary, and the
// simulator gets a free port in place of its default, in the block and
// in a copy of the example file it names. It returns the folder, the
// output and the script's error.
func runBenchDocSteps(t *testing.T, name, block string, strict bool) (dir, out string, err error) {
	t.Helper()
	_, simPort, _ := net.SplitHostPort(DefaultSimulatorAddress)
	simURL := "127.0.0.1:" + simPort
	dir = t.TempDir()
	simAddr := freeAddr(t)
	if strings.Contains(block, benchSimExample) {
		example, err := os.ReadFile("../../" + benchSimExample)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(example), "url: http://"+simURL) {
			t.Fatalf("%s does not point at the simulator's default address %s", benchSimExample, simURL)
		}
		copied := filepath.Join(dir, filepath.FromSlash(benchSimExample))
		if err := os.MkdirAll(filepath.Dir(copied), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(copied, []byte(strings.ReplaceAll(string(example), simURL, simAddr)), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if !strings.Contains(block, "http://"+simURL) {
		t.Fatalf("docs/bench.md's %s does not point at the simulator's default address %s:\n%s", name, simURL, block)
	}
	wrapper := fmt.Sprintf(`#!/bin/sh
case "$1" in
simulate) exec env INFER_EXPORTER_TEST_RUN_MAIN=1 %[1]q "$@" --web.listen-address=%[2]s ;;
*) exec env INFER_EXPORTER_TEST_RUN_MAIN=1 %[1]q "$@" --log.level=warn ;;
esac
`, os.Args[0], simAddr)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "infer_exporter"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(simAddr)
	// The README's simulator, then a wait for its port (the README's reader
	// starts it a while before), then the block as written.
	script := "infer_exporter simulate &\n" +
		"for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && break; sleep 0.1; done\n" +
		strings.ReplaceAll(block, simURL, simAddr) +
		"\nkill %1\n"
	args := []string{"-c", script}
	if strict {
		args = append([]string{"-e"}, args...)
	}
	cmd := exec.Command("bash", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf testenv.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The background simulator holds the output pipe: a failed step ends
	// the script before its kill, and then the group's end releases it.
	cmd.WaitDelay = 5 * time.Second
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	err = cmd.Wait()
	return dir, buf.String(), err
}

// TestReadmeServerSteps runs the README's "Point it at your server" steps
// as written, with bash: the simulator in the background, the file, its
// check, and the exporter probing the simulator, which then counts
// successful requests. `infer_exporter` is this test binary, which runs
// the program. The steps rely on the two defaults not clashing (they did:
// both were :9750), which the test checks first; then each command gets a
// free port in place of its default, so that the test can run beside
// anything else on the machine.
func TestReadmeServerSteps(t *testing.T) {
	block := readmeBlock(t, "## Point it at your server")
	_, simPort, _ := net.SplitHostPort(DefaultSimulatorAddress)
	_, expPort, _ := net.SplitHostPort(DefaultListenAddress)
	if simPort == expPort {
		t.Fatalf("simulate and the exporter both default to port %s", simPort)
	}
	simURL := "127.0.0.1:" + simPort
	if !strings.Contains(block, `"http://`+simURL+`"`) {
		t.Fatalf("the README's steps do not point the target at the simulator's default address %s:\n%s", simURL, block)
	}
	if strings.Contains(block, "--web.listen-address") {
		t.Fatalf("the README's steps set a listen address: they are to run on the defaults:\n%s", block)
	}

	dir := t.TempDir()
	simAddr, expAddr := freeAddr(t), freeAddr(t)
	// The stand-in for the installed binary: this test binary running the
	// program (TestMain), each command on its free address.
	wrapper := fmt.Sprintf(`#!/bin/sh
case "$1" in
simulate) exec env INFER_EXPORTER_TEST_RUN_MAIN=1 %[1]q "$@" --web.listen-address=%[2]s ;;
*) exec env INFER_EXPORTER_TEST_RUN_MAIN=1 %[1]q "$@" --web.listen-address=%[3]s --log.level=warn ;;
esac
`, os.Args[0], simAddr, expAddr)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "infer_exporter"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(block, simURL, simAddr)
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// A process group of its own: the simulator in the background and the
	// exporter in the foreground both end with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	// Waiting, not timing: a bound on how long to wait for the first
	// successful request, wide for a busy machine.
	deadline := time.Now().Add(60 * time.Second)
	success := regexp.MustCompile(`(?m)^infer_probe_requests_total\{[^}]*outcome="success"[^}]*\} ([1-9][0-9]*)`)
	for {
		select {
		case err := <-exited:
			t.Fatalf("the README's steps ended (%v) before the exporter served:\n%s", err, out.String())
		default:
		}
		if resp, err := http.Get("http://" + expAddr + "/metrics"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if success.Match(body) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful request within 60 s; the steps printed:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "infer.yml: OK: 1 target, 1 workload") {
		t.Errorf("the check's verdict is missing from the steps' output:\n%s", out.String())
	}
	resp, err := http.Get("http://" + expAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "steady") {
		t.Errorf("the landing page does not show the workload steady:\n%s", body)
	}
}

// TestReadmeIsShort: the README is the operator's page (what it is, the
// two commands, pointing it at a server, where to read on); the rest is in
// docs/ and CONTRIBUTING.md. Its first section, "The two commands", holds
// at most 30 lines and the whole at most 400.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > 400 {
		t.Errorf("README.md has %d lines, want at most 400", n)
	}
	_, after, ok := strings.Cut(text, "\n## The two commands\n")
	if !ok {
		t.Fatal(`README.md has no "## The two commands"`)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	if n := strings.Count(section, "\n"); n > 30 {
		t.Errorf(`"The two commands" has %d lines, want at most 30`, n)
	}
}
