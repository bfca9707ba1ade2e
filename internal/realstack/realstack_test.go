package realstack

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestBuildEnv(t *testing.T) {
	for _, tc := range []struct {
		name, file string // file "": no build.env
		want       []string
		err        string // a part of the error; "" none
	}{
		{name: "absent"},
		{name: "comments and blanks", file: "# why\n\nCGO_CFLAGS=-O1\n  # indented\nCGO_CXXFLAGS=-O1\n", want: []string{"CGO_CFLAGS=-O1", "CGO_CXXFLAGS=-O1"}},
		{name: "empty value", file: "CGO_CFLAGS=\n", want: []string{"CGO_CFLAGS="}},
		{name: "no equals", file: "# x\nCGO_CFLAGS\n", err: "build.env:2: want KEY=VALUE"},
		{name: "spaces and quotes verbatim", file: "GOFLAGS=\"-gcflags=all=-N -l\" -tags=x\n", want: []string{"GOFLAGS=\"-gcflags=all=-N -l\" -tags=x"}},
		{name: "no key", file: "=-O1\n", err: "build.env:1:"},
		{name: "space in key", file: "CGO CFLAGS=-O1\n", err: "build.env:1:"},
		{name: "key starts with a digit", file: "\n1X=-O1\n", err: "build.env:2:"},
		{name: "key with a dash", file: "CGO-CFLAGS=-O1\n", err: "build.env:1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "build.env"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := BuildEnv(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestToolsBuildEnv reads every tool module's build.env, so that a broken
// one fails here and not as a tool rebuilt in the middle of a test, and
// checks that tools/buildenv.sh (make tools) exports what BuildEnv reads.
func TestToolsBuildEnv(t *testing.T) {
	root := RepoRoot(t)
	mods, err := filepath.Glob(filepath.Join(root, "tools", "*", "go.mod"))
	if err != nil || len(mods) == 0 {
		t.Fatal(mods, err)
	}
	for _, mod := range mods {
		dir := filepath.Dir(mod)
		env, err := BuildEnv(dir)
		if err != nil {
			t.Error(err)
			continue
		}
		cmd := exec.Command(filepath.Join(root, "tools", "buildenv.sh"), dir, "env")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tools/buildenv.sh %s env: %v", dir, err)
		}
		for _, kv := range env {
			if !slices.Contains(strings.Split(string(out), "\n"), kv) {
				t.Errorf("tools/buildenv.sh %s: %q not exported; env:\n%s", dir, kv, out)
			}
		}
	}
}

// TestToolPackage resolves tool names as `go tool` does, and every tool
// directive of tools/*/go.mod by its own name, so that Tool runs the package
// `go tool NAME` would.
func TestToolPackage(t *testing.T) {
	for _, tc := range []struct{ pkg, name string }{
		{"github.com/prometheus/prometheus/cmd/promtool", "promtool"},
		{"sigs.k8s.io/kustomize/kustomize/v5", "kustomize"},
		{"example.com/tool/v2", "tool"},
		{"example.com/v2", "example.com"},
		{"example.com/tool/v1", "v1"},
		{"example.com/tool/v0", "v0"},
		{"example.com/tool/v01", "v01"},
		{"example.com/tool/v", "v"},
		{"example.com/tool/vx1", "vx1"},
		{"tool", "tool"},
	} {
		if got := toolName(tc.pkg); got != tc.name {
			t.Errorf("toolName(%q) = %q, want %q", tc.pkg, got, tc.name)
		}
	}
	got, err := modfileTools([]byte("module m\n\ntool a.example/x // why\ntool (\n\tb.example/y/v3\n\n\tc.example/z\n)\n"))
	if err != nil || strings.Join(got, " ") != "a.example/x b.example/y/v3 c.example/z" {
		t.Errorf("modfileTools: %q, %v", got, err)
	}
	if _, err := modfileTools([]byte("tool (\n\ta.example/x\n")); err == nil {
		t.Error("an unclosed tool block was read")
	}
	mods, err := filepath.Glob(filepath.Join(RepoRoot(t), "tools", "*", "go.mod"))
	if err != nil || len(mods) == 0 {
		t.Fatal(mods, err)
	}
	for _, mod := range mods {
		b, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := modfileTools(b)
		if err != nil || len(tools) == 0 {
			t.Errorf("%s: tools %q, %v", mod, tools, err)
		}
		for _, pkg := range tools {
			if got, err := ToolPackage(mod, toolName(pkg)); err != nil || got != pkg {
				t.Errorf("%s: ToolPackage(%s) = %q, %v; want %q", mod, toolName(pkg), got, err, pkg)
			}
		}
	}
	if _, err := ToolPackage(mods[0], "no-such-tool"); err == nil {
		t.Error("a missing tool was found")
	}
}

// TestFreeAddrOutsideEphemeralRange: on Linux, FreeAddr's ports are below
// the kernel's ephemeral range, so that no listener on port 0 and no
// outgoing connection of another process takes one before the test binds
// it; and the port is free.
func TestFreeAddrOutsideEphemeralRange(t *testing.T) {
	lo, ok := ephemeralLow()
	if !ok {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range")
	}
	for range 20 {
		addr := FreeAddr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		if port < freePortMin || port >= lo {
			t.Errorf("FreeAddr %s: port outside [%d, %d)", addr, freePortMin, lo)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("FreeAddr %s not free: %v", addr, err)
			continue
		}
		ln.Close()
	}
}
