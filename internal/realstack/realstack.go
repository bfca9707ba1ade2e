// Package realstack runs the real components of the end-to-end tests: the
// exporter binary, and the pinned Prometheus, promtool, Alertmanager and
// jsonnet of tools/*/go.mod, as child processes on loopback ports.
//
// The tools are run as `go run -modfile=... -exec echo PACKAGE` resolves
// them (the path `go tool -n NAME` prints, with the module's build.env
// applied, which `go tool` would not take: tools/prometheus/build.env's
// build tags): Go builds each once into its build cache (minutes for
// Prometheus on 2 cores when the cache is cold; `make tools` does it up
// front) and answers with the cached binary's path after that. A test
// that cannot get a tool fails when the environment variable CI is set,
// and skips with the reason otherwise. Under -short (make quick) every
// test that builds or runs one skips (testenv.Slow): make test-slow and
// make test-e2e run them.
package realstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/testenv"
)

// Tool modules, relative to the repository root.
const (
	PrometheusModfile   = "tools/prometheus/go.mod"   // prometheus, promtool, jsonnet
	AlertmanagerModfile = "tools/alertmanager/go.mod" // alertmanager
)

// RepoRoot is the directory of the repository's go.mod, found from the test's
// working directory upwards.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/infer-exporter/infer_exporter\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("repository root (go.mod of github.com/infer-exporter/infer_exporter) not found")
		}
		dir = parent
	}
}

// unavailable fails the test in CI and skips it elsewhere.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s (CI is set: a missing tool is a failure)", msg)
	}
	tb.Skipf("%s; skipped because CI is not set (run `make tools` first)", msg)
}

var toolPaths sync.Map // modfile+name -> path

// Tool returns the path of a pinned tool's binary, building it into Go's
// cache if needed: the tool directive of modfile (relative to the
// repository's root) whose name is name, run from the root
// (`go run -modfile=...`), as `make tools` builds it.
func Tool(tb testing.TB, modfile, name string) string {
	tb.Helper()
	testenv.Slow(tb, "runs the pinned "+name)
	root := RepoRoot(tb)
	return toolPath(tb, root, filepath.Join(root, modfile), "-modfile="+modfile, name)
}

// ModuleTool returns the path of the tool of a module of its own under
// tools/ that is run from its directory (`go -C DIR run`): one whose main
// package is ours (tools/dashlint, tools/podsecurity, tools/kube,
// tools/otelcol), or helm and Ollama, as `make tools` builds them.
func ModuleTool(tb testing.TB, dir, name string) string {
	tb.Helper()
	testenv.Slow(tb, "runs the pinned "+name)
	wd := filepath.Join(RepoRoot(tb), dir)
	return toolPath(tb, wd, filepath.Join(wd, "go.mod"), "", name)
}

// toolPath builds the tool named name of the go.mod modfile from directory
// wd (with modfileFlag, when it is not wd's own), with the environment of
// the build.env beside modfile (BuildEnv: build flags, cgo's flags), and
// returns the cached binary's path. `go run -exec echo` builds (or finds)
// the executable in Go's cache and prints its path instead of running it:
// the path `go tool -n` prints, but go run takes build flags (GOFLAGS),
// which `go tool` ignores.
func toolPath(tb testing.TB, wd, modfile, modfileFlag, name string) string {
	tb.Helper()
	key := modfile + " " + name
	if p, ok := toolPaths.Load(key); ok {
		return p.(string)
	}
	pkg, err := ToolPackage(modfile, name)
	if err != nil {
		tb.Fatal(err)
	}
	env, err := BuildEnv(filepath.Dir(modfile))
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"run"}
	if modfileFlag != "" {
		args = append(args, modfileFlag)
	}
	args = append(args, "-exec", "echo", pkg)
	what := "go " + strings.Join(args, " ") + " (in " + wd + ")"
	var p string
	// The run that links the executable prints its path in go run's
	// temporary directory, removed as go run exits, and stores it in the
	// cache; the next run prints the cached one.
	for try := 0; try < 2; try++ {
		cmd := exec.Command("go", args...)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			unavailable(tb, "%s: %v: %s", what, err, lastLines(stderr.String(), 20))
		}
		p = strings.TrimSpace(string(out))
		if _, err = os.Stat(p); err == nil {
			break
		} else if try == 1 {
			unavailable(tb, "%s gave %q: %v", what, p, err)
		}
	}
	toolPaths.Store(key, p)
	return p
}

// ToolPackage is the package of modfile's tool directive named name, by
// `go tool`'s rule: a package's last path element, or the one before a
// major version suffix (sigs.k8s.io/kustomize/kustomize/v5 is kustomize).
func ToolPackage(modfile, name string) (string, error) {
	b, err := os.ReadFile(modfile)
	if err != nil {
		return "", err
	}
	f, err := modfileTools(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", modfile, err)
	}
	for _, pkg := range f {
		if toolName(pkg) == name {
			return pkg, nil
		}
	}
	return "", fmt.Errorf("%s: no tool directive named %s (has %s)", modfile, name, strings.Join(f, ", "))
}

// modfileTools lists the packages of a go.mod's tool directives, one a
// line (tool PKG) or in a block (tool ( ... )).
func modfileTools(b []byte) ([]string, error) {
	var tools []string
	block := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case block && line == ")":
			block = false
		case block && line != "":
			tools = append(tools, line)
		case line == "tool (":
			block = true
		case strings.HasPrefix(line, "tool "):
			tools = append(tools, strings.TrimSpace(strings.TrimPrefix(line, "tool ")))
		}
	}
	if block {
		return nil, errors.New("tool block not closed")
	}
	return tools, nil
}

// toolName is the name `go tool` gives the tool of package pkg (cmd/go's
// defaultExecName): its last path element, or the one before it when the
// last is a major version suffix, v2 and up.
func toolName(pkg string) string {
	dir, last := path.Split(pkg)
	if dir != "" && isMajorVersion(last) {
		_, last = path.Split(strings.TrimSuffix(dir, "/"))
	}
	return last
}

// isMajorVersion says whether elem is a major version path element: v2,
// v3, ... (not v0, v1 or v01).
func isMajorVersion(elem string) bool {
	if len(elem) < 2 || elem[0] != 'v' || elem[1] == '0' || elem == "v1" {
		return false
	}
	return strings.Trim(elem[1:], "0123456789") == ""
}

// BuildEnv reads a tool module's build.env (none: nil), the environment
// that `make tools` builds it with too (tools/buildenv.sh): build and cgo
// flags are part of Go's cache key, so a test that built without them would
// build the tool again. One KEY=VALUE a line, the value verbatim (no shell
// quoting: GOFLAGS reads its own double quotes, as in
// GOFLAGS="-gcflags=all=-N -l"); blank lines and lines starting with # are
// skipped.
func BuildEnv(dir string) ([]string, error) {
	name := filepath.Join(dir, "build.env")
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var env []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, ok := strings.Cut(line, "=")
		if !ok || !envKey(k) {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE, KEY letters, digits and _, got %q", name, i+1, line)
		}
		env = append(env, line)
	}
	return env, nil
}

// envKey says whether k is an environment variable's name a shell exports:
// letters, digits and _, not starting with a digit.
func envKey(k string) bool {
	for i, c := range k {
		if c != '_' && !('A' <= c && c <= 'Z') && !('a' <= c && c <= 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return k != ""
}

// built is the exporter's binary that BuildExporter shares among the tests
// of a package whose TestMain is Main.
var built struct {
	sync.Mutex
	dir, bin string
}

// Main is the TestMain of a package whose tests start the exporter's binary
// many times (e2e): BuildExporter builds it once for them all, into a
// directory removed when they end. It returns m.Run's exit code.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "realstack-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	built.Lock()
	built.dir = dir
	built.Unlock()
	return m.Run()
}

// BuildExporter builds ./cmd/infer_exporter into a temporary directory: once
// per package under Main, else once per test.
func BuildExporter(tb testing.TB) string {
	tb.Helper()
	testenv.Slow(tb, "builds and runs the exporter's binary")
	built.Lock()
	defer built.Unlock()
	if built.bin != "" {
		return built.bin
	}
	if built.dir != "" {
		built.bin = buildExporter(tb, built.dir)
		return built.bin
	}
	return buildExporter(tb, tb.TempDir())
}

func buildExporter(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "infer_exporter")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/infer_exporter")
	cmd.Dir = RepoRoot(tb)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/infer_exporter: %v\n%s", err, out)
	}
	return bin
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, taken below the kernel's ephemeral range where it can: a port from
// that range (`net.Listen(":0")`) can be handed to any other process's
// listener or outgoing connection before the test binds it, and a test
// that leaves its address unbound for a while (a server that starts late)
// then finds someone else answering there. Outside the range, only a test
// that picks the same way can collide.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	if lo, ok := ephemeralLow(); ok && lo > freePortMin+1000 {
		for range 64 {
			port := freePortMin + rand.IntN(lo-freePortMin)
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				continue
			}
			addr := ln.Addr().String()
			ln.Close()
			return addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// freePortMin is the lowest port FreeAddr picks: above the well-known and
// most registered services' ports.
const freePortMin = 10000

// ephemeralLow is the first port of Linux's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range); false elsewhere.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 || lo > hi {
		return 0, false
	}
	return lo, true
}

// Process is a child process whose output goes to a log file.
type Process struct {
	Name string
	Log  string // path of its combined stdout and stderr
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs bin with args in dir (the repository root when empty). The
// process is stopped when the test ends (SIGTERM, then SIGKILL after 10 s),
// and the tail of its log is printed if the test failed.
func Start(tb testing.TB, name, dir, bin string, args ...string) *Process {
	tb.Helper()
	return StartEnv(tb, name, dir, nil, bin, args...)
}

// StartEnv is Start with env added to the test's environment (a later
// entry of a name wins, as exec.Cmd takes it).
func StartEnv(tb testing.TB, name, dir string, env []string, bin string, args ...string) *Process {
	tb.Helper()
	if dir == "" {
		dir = RepoRoot(tb)
	}
	logPath := filepath.Join(tb.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			b, _ := os.ReadFile(logPath)
			tb.Logf("last lines of %s's log:\n%s", name, lastLines(string(b), 40))
		}
	})
	return p
}

// Stop ends the process: SIGTERM, then SIGKILL if it has not exited after
// 10 s. It signals only this process, by its pid.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Chromium finds Debian's chromium, for the tests that render a page in
// it. In CI (CI set) it must be there (.ci/run installs it); elsewhere the
// test skips without it.
func Chromium(tb testing.TB) string {
	tb.Helper()
	testenv.Slow(tb, "renders a page in chromium")
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
	}
	tb.Skip("chromium is not installed (apt-get install chromium); CI runs this test")
	return ""
}

// Kill ends the process at once with SIGKILL, as a crash or an OOM kill
// would, and waits for it.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Pid is the process's id, to find the children it started.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// WaitHTTP polls url until it answers 200, the process exits, or ctx ends.
func (p *Process) WaitHTTP(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited before serving %s: %v", p.Name, url, err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not serve %s: %w", p.Name, url, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Run runs a tool to completion in the repository root and returns its
// combined output.
func Run(tb testing.TB, bin string, args ...string) (string, error) {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = RepoRoot(tb)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		tb.Fatalf("run %s: %v", bin, err)
	}
	return string(out), err
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
