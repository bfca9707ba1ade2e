#!/bin/sh
# Runs the repository's pinned jsonnet (tools/prometheus/go.mod) from any
# directory, with the repository's root on the import path, for example
#
#   /path/to/infer_exporter/mixin/jsonnet.sh -J vendor -c -m out -S mine.jsonnet
#
# `go run -modfile=tools/prometheus/go.mod ...` works only inside the
# repository ("go: cannot find main module, but -modfile was set"), so this
# builds the tool there, into Go's cache, with the module's build.env as
# `make tools` builds it (`go run -exec echo` prints the binary's path
# instead of running it), and runs that binary here: your relative paths
# stay yours.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
path() {
	cd "$root" && tools/buildenv.sh tools/prometheus \
		go run -modfile=tools/prometheus/go.mod -exec echo github.com/google/go-jsonnet/cmd/jsonnet
}
# The run that links it prints a temporary path, gone as go run exits (the
# binary is then in the cache): the next prints the cached one.
bin=$(path)
[ -x "$bin" ] || bin=$(path)
exec "$bin" -J "$root" "$@"
