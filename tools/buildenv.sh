#!/bin/sh
# tools/buildenv.sh DIR COMMAND...: runs COMMAND with the environment of
# DIR/build.env (if there is one), as internal/realstack.BuildEnv reads it:
# one KEY=VALUE a line, the value verbatim, blank lines and # comments
# skipped. `make tools` builds every pinned tool through it, so that the
# tests, which read the same file, find the same binaries in Go's cache.
set -eu
dir=$1
shift
if [ -f "$dir/build.env" ]; then
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line#"${line%%[![:space:]]*}"}
		case $line in
		'' | '#'*) continue ;;
		esac
		export "$line"
	done <"$dir/build.env"
fi
exec "$@"
