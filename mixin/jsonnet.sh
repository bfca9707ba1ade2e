#!/bin/sh
# Runs the repository's pinned jsonnet (tools/prometheus/go.mod) from any
# directory, with the repository's root on the import path, for example
#
#   /path/to/infer_exporter/mixin/jsonnet.sh -J vendor -c -m out -S mine.jsonnet
#
# `go tool -modfile=tools/prometheus/go.mod jsonnet` works only inside the
# repository ("go: cannot find main module, but -modfile was set"), so this
# builds the tool there, into Go's cache (`go tool -n` prints its path), and
# runs that binary here: your relative paths stay yours.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(go -C "$root" tool -modfile=tools/prometheus/go.mod -n jsonnet)
exec "$bin" -J "$root" "$@"
