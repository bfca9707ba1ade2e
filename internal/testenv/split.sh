#!/usr/bin/env bash
# split.sh N PKG GO FLAGS... -- PKGS...: `GO test FLAGS PKGS` with the tests
# of PKG (one of PKGS, or of the packages a pattern of them names) in N processes of their own beside the
# other packages' run, each given every Nth of PKG's tests by name.
#
# Why: the bench package holds most of the tests that wait on real time (a
# cell, a sweep, a repeat run on until judged), some 260 s in one process
# where every other package ends within a minute, so the step lasted as
# long as the bench alone while the machine stood mostly idle. Its tests
# share nothing but the test binary (each starts its own simulator and
# bench), and the binary is built once: `go test -list` builds it with the
# same flags, and each process runs it from Go's cache.
#
# Each process's output comes as go test prints it (a package's lines at
# its end without -v); the step fails when any of them fails.
set -uo pipefail
n=$1 split=$2 gocmd=$3
shift 3
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  flags+=("$1")
  shift
done
shift
pkgs=("$@")

# The build flags among FLAGS, for go test -list: -race changes the binary.
build=()
for f in "${flags[@]}"; do
  case $f in -race | -tags=* | -gcflags=*) build+=("$f") ;; esac
done
names=$($gocmd test "${build[@]}" -list '.*' "$split" | grep -E '^(Test|Fuzz|Example)') || {
  echo "split.sh: cannot list the tests of $split" >&2
  exit 1
}

# PKGS less PKG, by import path (PKGS may be patterns such as ./...).
splitpath=$($gocmd list "$split") || exit 1
mapfile -t rest < <($gocmd list "${pkgs[@]}" | grep -v -x -F "$splitpath")

pids=()
if [ ${#rest[@]} -gt 0 ]; then
  $gocmd test "${flags[@]}" "${rest[@]}" &
  pids+=($!)
fi
for i in $(seq 0 $((n - 1))); do
  # Every Nth name from the i-th, in go test -list's order (the files' and
  # then the source's), so that each process gets tests from every file.
  part=$(echo "$names" | awk -v n="$n" -v i="$i" '(NR - 1) % n == i' | paste -sd '|')
  [ -n "$part" ] || continue
  $gocmd test "${flags[@]}" -run "^(${part})\$" "$split" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit "$status"
