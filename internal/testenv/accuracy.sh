#!/usr/bin/env bash
# make test-timing: the timing-accuracy tests (named ...Accuracy...,
# testenv.Timing), each in a process of its own, without the race
# detector, a few at a time.
#
# A process of its own, because a timing test measures the machine as well
# as the code: run one after another in one process (go test -run Accuracy
# over a package), a test inherited the heap, the garbage collector's work
# and the goroutines still winding down of the tests before it, and five
# of them failed their first try in a green run and passed when run again
# alone. So each package's test binary is built once (go test -c), and
# each test runs from it in a fresh process, from its package's directory
# as go test runs it.
#
# A few at a time (ACCURACY_JOBS, default 3), because they wait: on the
# simulator's token steps, on real-time cells and sweeps. The whole step
# kept 0.1 of a core busy when they ran one after another (407 s of tests
# on 2 cores), so three of them side by side still leave the machine
# mostly idle, and each still has a core whenever it wakes; the longest
# first, so that the step lasts about its longest test rather than their
# sum. ACCURACY_JOBS=1 runs them one at a time.
#
# On a shared machine (CI's included) a moment of contention can still
# push a p99 past its bound, so a test that fails is run again alone, with
# nothing else of the step running, up to ACCURACY_TRIES times in all
# (default 3), and the step fails only when a test fails every try. Every
# failed try stays in the log, and the last line counts the tests that
# needed a retry: on an idle machine it should say none. A regression in
# the code fails every try; contention rarely lasts that long.
set -uo pipefail
GO=${GO:-go}
tries=${ACCURACY_TRIES:-3}
jobs=${ACCURACY_JOBS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Only the packages that hold such a test (or those of ACCURACY_PKGS, to
# run some again). A test function that go test -run Accuracy selects has
# Accuracy in its name, and gofmt puts its func at the start of a line.
pkgs=${ACCURACY_PKGS:-}
[ -n "$pkgs" ] || pkgs=$(git grep -l -E '^func Test[A-Za-z0-9_]*Accuracy' -- '*_test.go' | xargs -r -n1 dirname | sort -u)
if [ -z "$pkgs" ]; then
  echo "test-timing: git grep found no ...Accuracy test" >&2
  exit 1
fi

# The tests that take longest, by their last measured time (CONTRIBUTING.md,
# "The timing tests"), start first; the rest follow in package order. A
# name here that no longer exists is passed over.
longest="TestSimulatorCellsJudgedStableAccuracy TestSweepSuccessCapacityAccuracy
TestAccuracyAgentSearchRepeatable
TestRankingTwoSpeedsAccuracy TestSteadyStateThroughputAccuracy
TestBaselineRegressionAccuracy TestAccuracyAgainstGroundTruth
TestFlavorAccuracyAgainstGroundTruth"

failed=()
list="$work/tests"
: >"$list"
for dir in $pkgs; do
  bin="$work/$(echo "$dir" | tr / _).test"
  if ! $GO test -c -o "$bin" "./$dir"; then
    echo "test-timing: ./$dir does not build" >&2
    failed+=("./$dir (build)")
    continue
  fi
  # The top-level tests that go test -run Accuracy selects.
  "$bin" -test.list 'Accuracy' | grep '^Test' | while read -r name; do
    echo "$dir $bin $name"
  done >>"$list"
done
ordered="$work/ordered"
{
  for name in $longest; do grep " $name\$" "$list"; done
  grep -v -F -x -f <(for name in $longest; do grep " $name\$" "$list"; done) "$list"
} >"$ordered"

# runone DIR BIN NAME: one test in a process of its own, from its package's
# directory; its output only when it fails. Its status goes to
# $work/status/NAME, for the retries.
runone() {
  local dir=$1 bin=$2 name=$3 out start status secs
  out=$(mktemp -p "$work")
  start=$(date +%s.%N)
  (cd "$dir" && "$bin" -test.paniconexit0 -test.count=1 -test.timeout=10m -test.run "^${name}\$") >"$out" 2>&1
  status=$?
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  # One write, so that lines of tests side by side do not interleave.
  if [ "$status" -eq 0 ]; then
    printf 'ok  \t%s\t%s\t%ss\n' "$dir" "$name" "$secs"
  else
    printf '%s\nFAIL\t%s\t%s\t%ss\n' "$(cat "$out")" "$dir" "$name" "$secs"
  fi
  rm -f "$out"
  echo "$status" >"$work/status/$name"
  return 0
}
export -f runone
export work
mkdir -p "$work/status"
tests=$(wc -l <"$ordered")
xargs -P "$jobs" -L 1 bash -c 'runone "$@"' _ <"$ordered"

retried=()
while read -r dir bin name; do
  [ "$(cat "$work/status/$name" 2>/dev/null)" = 0 ] && continue
  ok=0
  for try in $(seq 2 "$tries"); do
    echo "test-timing: $name ($dir) failed; try $try of $tries, alone"
    runone "$dir" "$bin" "$name"
    if [ "$(cat "$work/status/$name")" = 0 ]; then
      ok=1
      break
    fi
  done
  if [ "$ok" -eq 1 ]; then
    retried+=("$name")
  else
    echo "test-timing: $name ($dir) failed all $tries tries" >&2
    failed+=("$name")
  fi
done <"$ordered"

summary="timing: $tests tests, $jobs at a time, ${#retried[@]} needed a retry"
if [ "${#retried[@]}" -gt 0 ]; then
  summary+=": ${retried[*]}"
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "$summary; ${#failed[@]} failed every try: ${failed[*]}"
  exit 1
fi
echo "$summary"
