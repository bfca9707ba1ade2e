package realstack

import (
	"os"
	"path/filepath"
	"slices"
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
		{name: "space in value", file: "CGO_CFLAGS=-O1 -g\n", err: "build.env:1:"},
		{name: "quoted", file: "CGO_CFLAGS='-O1'\n", err: "build.env:1:"},
		{name: "no key", file: "=-O1\n", err: "build.env:1:"},
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
// one fails here and not as a tool rebuilt in the middle of a test.
func TestToolsBuildEnv(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(RepoRoot(t), "tools", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := BuildEnv(d); err != nil {
			t.Error(err)
		}
	}
}
