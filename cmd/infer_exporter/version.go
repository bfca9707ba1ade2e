package main

import (
	"runtime/debug"

	"github.com/prometheus/common/version"
)

// stampVersion fills what -ldflags left empty (make build and the
// Dockerfile set all three) from the binary's build information, so that
// `go build` and `go install` name their commit too: the main module's
// version (a tag, or Go's pseudo-version of the commit) and vcs.revision,
// with "-modified" for an uncommitted tree. `go run` does not record the
// commit unless it is given -buildvcs=true (make demo passes the ldflags
// instead), so there the revision stays unknown.
func stampVersion(bi *debug.BuildInfo, ok bool) {
	version.Version, version.Revision, version.Branch = stamped(version.Version, version.Revision, version.Branch, bi, ok)
}

// stamped is stampVersion without the package variables, for its test.
func stamped(ver, rev, branch string, bi *debug.BuildInfo, ok bool) (string, string, string) {
	if ok && bi != nil {
		if ver == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			ver = bi.Main.Version
		}
		if rev == "" {
			modified := false
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if rev != "" && modified {
				rev += "-modified"
			}
		}
	}
	if ver == "" {
		ver = "dev"
	}
	if rev == "" {
		rev = "unknown"
	}
	// The build information has no branch; "unknown" reads better in
	// --version than an empty "branch=".
	if branch == "" {
		branch = "unknown"
	}
	return ver, rev, branch
}
