package main

import (
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
	_, simPort, _ := net.SplitHostPort(DefaultSimulatorAddress)
	simURL := "127.0.0.1:" + simPort
	if !strings.Contains(block, "http://"+simURL) {
		t.Fatalf("docs/bench.md's quick start does not point at the simulator's default address %s:\n%s", simURL, block)
	}
	dir := t.TempDir()
	simAddr := freeAddr(t)
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
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The background simulator holds the output pipe: a failed step ends
	// the script before its kill, and then the group's end releases it.
	cmd.WaitDelay = 5 * time.Second
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("docs/bench.md's quick start failed (%v):\n%s", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "bench-out", "report.json")); err != nil {
		t.Errorf("the quick start wrote no bench-out/report.json (%v):\n%s", err, out.String())
	}
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
