package main

import (
	"runtime/debug"
	"testing"
)

// TestStamped: what -ldflags set is kept; what it left empty comes from the
// build information (go build, go install); without either, "dev" and
// "unknown" (go run).
func TestStamped(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
		}}
	}
	tests := []struct {
		name                         string
		ver, rev, branch             string
		bi                           *debug.BuildInfo
		ok                           bool
		wantVer, wantRev, wantBranch string
	}{
		{"ldflags win", "v1.2.0", "abc", "main", vcs("def", "false"), true, "v1.2.0", "abc", "main"},
		{"go build, clean tree", "", "", "", vcs("def", "false"), true, "dev", "def", "unknown"},
		{"go build, modified tree", "", "", "", vcs("def", "true"), true, "dev", "def-modified", "unknown"},
		{"go install at a version", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, true, "v0.3.0", "unknown", "unknown"},
		{"pseudo-version and revision", "", "", "", func() *debug.BuildInfo {
			bi := vcs("0123abcd", "false")
			bi.Main.Version = "v0.0.0-20261203175114-0123abcd0000"
			return bi
		}(), true, "v0.0.0-20261203175114-0123abcd0000", "0123abcd", "unknown"},
		{"go run: no vcs settings", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev", "unknown", "unknown"},
		{"no build information", "", "", "", nil, false, "dev", "unknown", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ver, rev, branch := stamped(tt.ver, tt.rev, tt.branch, tt.bi, tt.ok)
			if ver != tt.wantVer || rev != tt.wantRev || branch != tt.wantBranch {
				t.Errorf("got (%s, %s, %s), want (%s, %s, %s)", ver, rev, branch, tt.wantVer, tt.wantRev, tt.wantBranch)
			}
		})
	}
}
