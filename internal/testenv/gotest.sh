#!/usr/bin/env bash
# gotest.sh TARGET COMMAND...: runs a go test command of make test's step
# TARGET, its output as it comes, and when it fails ends with a short summary
# of what failed (failures.sh), so that the last lines of the log name the
# failing tests and packages. With FAILURES naming a file, the summary is
# appended to it too: a target that runs steps side by side prints it
# again once both have ended, after the other step's last lines.
set -uo pipefail
step=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
  exit 0
fi
summary=$(bash "$(dirname "$0")/failures.sh" "$step" "$status" <"$log")
echo "$summary"
if [ -n "${FAILURES:-}" ]; then
  echo "$summary" >>"$FAILURES"
fi
exit "$status"
