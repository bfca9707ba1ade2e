#!/usr/bin/env bash
# make test-timing: the timing-accuracy tests (named ...Accuracy...,
# testenv.Timing), each alone in its own process, without the race
# detector.
#
# Alone, because a timing test measures the machine as well as the code:
# run one after another in one process (go test -run Accuracy over a
# package), a test inherited the heap, the garbage collector's work and
# any goroutines still winding down of the tests before it, and five of
# them failed their first try in the last green run and passed when run
# again alone. So each package's test binary is built once (go test -c),
# and each test runs from it in a process of its own, one at a time, from
# its package's directory as go test runs it.
#
# On a shared machine (CI's included) a moment of contention can still
# push a p99 past its bound, so a test that fails is run again, alone, up
# to ACCURACY_TRIES times in all (default 3), and the step fails only when
# a test fails every try. Every failed try stays in the log, and the last
# line counts the tests that needed a retry: on an idle machine it should
# say none. A regression in the code fails every try; contention rarely
# lasts that long.
set -uo pipefail
GO=${GO:-go}
tries=${ACCURACY_TRIES:-3}
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT

# Only the packages that hold such a test (or those of ACCURACY_PKGS, to
# run some again). A test function that go test -run Accuracy selects has
# Accuracy in its name, and gofmt puts its func at the start of a line.
pkgs=${ACCURACY_PKGS:-}
[ -n "$pkgs" ] || pkgs=$(git grep -l -E '^func Test[A-Za-z0-9_]*Accuracy' -- '*_test.go' | xargs -r -n1 dirname | sort -u)
if [ -z "$pkgs" ]; then
  echo "test-timing: git grep found no ...Accuracy test" >&2
  exit 1
fi

# runone DIR BIN NAME: one test, alone, from its package's directory; its
# output only when it fails.
runone() {
  local dir=$1 bin=$2 name=$3 out start status secs
  out=$(mktemp)
  start=$(date +%s.%N)
  (cd "$dir" && "$bin" -test.paniconexit0 -test.count=1 -test.timeout=10m -test.run "^${name}\$") >"$out" 2>&1
  status=$?
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  if [ "$status" -eq 0 ]; then
    printf 'ok  \t%s\t%s\t%ss\n' "$dir" "$name" "$secs"
  else
    cat "$out"
    printf 'FAIL\t%s\t%s\t%ss\n' "$dir" "$name" "$secs"
  fi
  rm -f "$out"
  return "$status"
}

tests=0
retried=()
failed=()
for dir in $pkgs; do
  bin="$bins/$(echo "$dir" | tr / _).test"
  if ! $GO test -c -o "$bin" "./$dir"; then
    echo "test-timing: ./$dir does not build" >&2
    failed+=("./$dir (build)")
    continue
  fi
  # The top-level tests that go test -run Accuracy selects.
  names=$("$bin" -test.list 'Accuracy' | grep '^Test')
  for name in $names; do
    tests=$((tests + 1))
    runone "$dir" "$bin" "$name" && continue
    ok=0
    for try in $(seq 2 "$tries"); do
      echo "test-timing: $name ($dir) failed; try $try of $tries, alone"
      if runone "$dir" "$bin" "$name"; then
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
  done
done

summary="timing: $tests tests, ${#retried[@]} needed a retry"
if [ "${#retried[@]}" -gt 0 ]; then
  summary+=": ${retried[*]}"
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "$summary; ${#failed[@]} failed every try: ${failed[*]}"
  exit 1
fi
echo "$summary"
