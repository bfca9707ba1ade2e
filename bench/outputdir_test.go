package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOutputDir: a directory that holds a report is never written over:
// the quick start's default gives way to the first free one beside it,
// one named by --output.dir is refused unless --output.overwrite.
func TestOutputDir(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reports   []string // directories (under the test's) that hold a report
		others    []string // directories without one, and files
		files     []string
		defaulted bool
		overwrite bool
		want      string // "" with an error
	}{
		{name: "absent", defaulted: true, want: "bench-out"},
		{name: "empty", others: []string{"bench-out"}, defaulted: true, want: "bench-out"},
		{name: "held, default", reports: []string{"bench-out"}, defaulted: true, want: "bench-out-2"},
		{name: "held twice, default", reports: []string{"bench-out", "bench-out-2"}, defaulted: true, want: "bench-out-3"},
		{name: "held, its sibling empty", reports: []string{"bench-out"}, others: []string{"bench-out-2"}, defaulted: true, want: "bench-out-2"},
		{name: "held, its sibling a file", reports: []string{"bench-out"}, files: []string{"bench-out-2"}, defaulted: true, want: "bench-out-3"},
		{name: "held, named", reports: []string{"bench-out"}},
		{name: "held, named, overwrite", reports: []string{"bench-out"}, overwrite: true, want: "bench-out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range append(tc.reports, tc.others...) {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tc.reports {
				writeTestFile(t, filepath.Join(dir, d), JSONFile, "{}")
			}
			for _, f := range tc.files {
				writeTestFile(t, dir, f, "x")
			}
			got, err := outputDir(filepath.Join(dir, "bench-out"), tc.defaulted, tc.overwrite)
			switch {
			case tc.want == "" && !errors.Is(err, errHoldsReport):
				t.Fatalf("got %q, %v; want it refused", got, err)
			case tc.want == "":
				if !strings.Contains(err.Error(), "--output.overwrite") {
					t.Errorf("error %q does not say what to do", err)
				}
			case err != nil || got != filepath.Join(dir, tc.want):
				t.Fatalf("got %q, %v; want %s", got, err, tc.want)
			}
			for _, d := range tc.reports {
				if b, err := os.ReadFile(filepath.Join(dir, d, JSONFile)); err != nil || string(b) != "{}" {
					t.Errorf("%s's report: %q, %v", d, b, err)
				}
			}
		})
	}
}

// TestSecondQuickStartKeepsTheFirst is the acceptance: a second
// quick start, with the default output, keeps the first's report and
// says where it wrote its own; a run into a named directory that holds a
// report is refused before it sends anything, and --output.overwrite
// replaces it.
func TestSecondQuickStartKeepsTheFirst(t *testing.T) {
	sim := startSim(t, 5*time.Millisecond, 1, 0)
	t.Chdir(t.TempDir())
	quick := []string{"bench", "--target.url=" + sim.URL, "--rate=10", "--input-tokens=16", "--output-tokens=4", "--duration=1s"}
	if code, so, se := runCLI(t, context.Background(), quick...); code != ExitOK {
		t.Fatalf("first: exit %d\n%s\n%s", code, so, se)
	}
	first, err := os.ReadFile(filepath.Join(DefaultQuickOutputDir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	code, so, se := runCLI(t, context.Background(), quick...)
	if code != ExitOK {
		t.Fatalf("second: exit %d\n%s\n%s", code, so, se)
	}
	if again, err := os.ReadFile(filepath.Join(DefaultQuickOutputDir, JSONFile)); err != nil || string(again) != string(first) {
		t.Errorf("the first report changed (%v)", err)
	}
	second := DefaultQuickOutputDir + "-2"
	if _, err := os.Stat(filepath.Join(second, JSONFile)); err != nil {
		t.Errorf("the second report: %v", err)
	}
	if !strings.Contains(se, "bench-out holds an earlier run's report, kept; this run writes bench-out-2") ||
		!strings.Contains(so, "wrote "+filepath.Join(second, JSONFile)) {
		t.Errorf("the second run does not say where it wrote:\nstdout %s\nstderr %s", so, se)
	}

	// Named: refused at once, nothing sent.
	sent := len(sim.bodies())
	code, so, se = runCLI(t, context.Background(), append(quick, "--output.dir="+second)...)
	if code != ExitUsage || !strings.Contains(se, "already holds a report") || len(sim.bodies()) != sent {
		t.Errorf("a named directory holding a report: exit %d, %d requests sent, stderr %q; want %d, none", code, len(sim.bodies())-sent, se, ExitUsage)
	}
	code, so, se = runCLI(t, context.Background(), append(quick, "--output.dir="+second, "--output.overwrite")...)
	if code != ExitOK {
		t.Fatalf("--output.overwrite: exit %d\n%s\n%s", code, so, se)
	}
	if _, err := os.Stat(DefaultQuickOutputDir + "-3"); err == nil {
		t.Error("--output.overwrite wrote beside the directory named")
	}
}
