// Package layers holds the test of ARCHITECTURE.md's layering rules.
package layers

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/infer-exporter/infer_exporter/"

// rules reads the ```layers block of ARCHITECTURE.md: one line per package,
// "package: the packages of this module it may import".
func rules(t *testing.T, doc []byte) map[string][]string {
	t.Helper()
	r := map[string][]string{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```layers":
			in = true
		case in && line == "```":
			return r
		case in && line != "" && !strings.HasPrefix(line, "#"):
			pkg, allowed, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("ARCHITECTURE.md: layers line %q has no colon", line)
			}
			r[strings.TrimSpace(pkg)] = strings.Fields(allowed)
		}
	}
	t.Fatal("ARCHITECTURE.md has no closed ```layers block")
	return nil
}

// violations lists every import of graph (package -> its module imports)
// that rules do not allow, and every package rules do not list.
func violations(rules map[string][]string, graph map[string][]string) []string {
	var out []string
	for pkg, imports := range graph {
		allowed, ok := rules[pkg]
		if !ok {
			out = append(out, fmt.Sprintf("%s is not in ARCHITECTURE.md's layers", pkg))
			continue
		}
		for _, imp := range imports {
			if !slices.Contains(allowed, imp) {
				out = append(out, fmt.Sprintf("%s imports %s, which ARCHITECTURE.md does not allow", pkg, imp))
			}
		}
	}
	sort.Strings(out)
	return out
}

// unused lists every import rules allow that its package does not make:
// an allowance nothing uses says less than the block seems to, and is
// dropped (the block says what the packages import, not what they might).
func unused(rules map[string][]string, graph map[string][]string) []string {
	var out []string
	for pkg, allowed := range rules {
		imports, ok := graph[pkg]
		if !ok {
			continue // reported as not a package of the module
		}
		for _, imp := range allowed {
			if !slices.Contains(imports, imp) {
				out = append(out, fmt.Sprintf("ARCHITECTURE.md allows %s to import %s, which it does not", pkg, imp))
			}
		}
	}
	sort.Strings(out)
	return out
}

// moduleGraph runs go list over the module: each package's non-test
// imports of this module.
func moduleGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		g[pkg] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				g[pkg] = append(g[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return g
}

// TestLayers: every package of the module imports only what
// ARCHITECTURE.md's layering rules allow it.
func TestLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := rules(t, doc)
	g := moduleGraph(t, root)
	for _, v := range violations(r, g) {
		t.Error(v)
	}
	for _, u := range unused(r, g) {
		t.Error(u)
	}
	if imps := g["internal/config"]; len(imps) != 0 {
		t.Errorf("internal/config imports %v: the configuration is a leaf", imps)
	}
	for pkg := range r {
		if _, ok := g[pkg]; !ok {
			t.Errorf("ARCHITECTURE.md lists %s, which is not a package of the module", pkg)
		}
	}
}

// TestViolationsFound: the checker itself catches an import across a layer
// and a package missing from the rules, so TestLayers can fail.
func TestViolationsFound(t *testing.T) {
	r := map[string][]string{"internal/config": nil, "probe/arrival": {"internal/config"}}
	g := map[string][]string{
		"internal/config": {"probe/arrival"},
		"probe/arrival":   {"internal/config"},
		"probe/new":       nil,
	}
	got := violations(r, g)
	want := []string{
		"internal/config imports probe/arrival, which ARCHITECTURE.md does not allow",
		"probe/new is not in ARCHITECTURE.md's layers",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations = %q, want %q", got, want)
	}
	r["probe/arrival"] = append(r["probe/arrival"], "probe/observation")
	got = unused(r, g)
	want = []string{"ARCHITECTURE.md allows probe/arrival to import probe/observation, which it does not"}
	if !slices.Equal(got, want) {
		t.Errorf("unused = %q, want %q", got, want)
	}
}
