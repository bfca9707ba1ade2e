#!/usr/bin/env bash
# make test-timing: the timing-accuracy tests (named ...Accuracy...,
# testenv.Timing), one package at a time (-p 1), without the race detector.
#
# A timing test measures the machine as well as the code: on a shared
# machine (CI's included) a moment of contention can push a p99 past its
# bound. So a test that fails is run again, alone, up to ACCURACY_TRIES
# times in all (default 3), and the step fails only when a test fails every
# try. Every failed try stays in the log. A regression in the code fails
# every try; contention rarely lasts that long.
set -uo pipefail
GO=${GO:-go}
tries=${ACCURACY_TRIES:-3}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Only the packages that hold such a test: go test -p 1 over ./... built,
# linked and started every package's test binary one after another (some
# 40 s of a 270 s step) to run nothing in most. A test function that go
# test -run Accuracy selects has Accuracy in its name, and gofmt puts its
# func at the start of a line.
pkgs=$(git grep -l -E '^func Test[A-Za-z0-9_]*Accuracy' -- '*_test.go' | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
if [ -z "$pkgs" ]; then
  echo "test-timing: git grep found no ...Accuracy test" >&2
  exit 1
fi
# shellcheck disable=SC2086 # one argument a package
$GO test -p 1 -count=1 -run 'Accuracy' -timeout 10m $pkgs 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
  exit 0
fi

# The failed top-level tests, by package: a test's "--- FAIL: TestX (...)"
# line (at column 0) comes before its package's "FAIL<TAB>pkg<TAB>time" line.
failed=$(awk '/^--- FAIL: /{t[$3]=1} /^FAIL\t/{for (n in t) print $2, n; split("", t)}' "$log")
if [ -z "$failed" ]; then
  echo "test-timing: failed without a failing test to run again (a build error or a panic): see above" >&2
  exit "$status"
fi

result=0
while read -r pkg name; do
  ok=0
  for try in $(seq 2 "$tries"); do
    echo "test-timing: $name ($pkg) failed; try $try of $tries, alone"
    if $GO test -count=1 -run "^${name}\$" -timeout 10m "$pkg"; then
      echo "test-timing: $name passed on try $try of $tries (the failed tries are above)"
      ok=1
      break
    fi
  done
  if [ "$ok" -eq 0 ]; then
    echo "test-timing: $name ($pkg) failed all $tries tries" >&2
    result=1
  fi
done <<<"$failed"
exit "$result"
