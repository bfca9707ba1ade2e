#!/usr/bin/env bash
# failures.sh STEP STATUS < LOG (STEP: the make target, test-race): a short summary of what failed in the
# output of a go test command (LOG), for the end of a failed step, so that
# the last lines of a log name the failing tests (CI shows the last 25):
# the failed tests ("--- FAIL:" lines, subtests indented), the packages
# (FAIL lines, build and setup failures), the first lines of each panic
# (a test past -timeout panics naming the tests still running), and how
# many data races were reported. At most 20 lines; the full output is above
# it in the log.
set -uo pipefail
step=$1
status=$2
awk -v step="$step" -v status="$status" '
	function add(s) { if (s in seen) return 0; seen[s] = 1; lines[n++] = s; return 1 }
	/^[ \t]*--- FAIL: / { tests += add($0) }
	/^FAIL[ \t]+[^ \t]+/ { pkgs += add($0) }
	/^# / { add($0) }
	/^(panic: |fatal error: )/ { panicking = 4 }
	panicking > 0 { add($0); panicking--; next }
	/^WARNING: DATA RACE/ { races++ }
	END {
		printf "make %s failed (exit %s): %d failed tests, %d failed packages%s\n", step, status, tests, pkgs, races ? ", " races " data races" : ""
		shown = n > 19 ? 19 : n
		for (i = 0; i < shown; i++) printf "  %s\n", lines[i]
		if (n > shown) printf "  ... %d more lines of failures above\n", n - shown
		if (n == 0) printf "  no FAIL line: see the output above\n"
	}'
