#!/usr/bin/env bash
# The stability rule on a real GPU engine: starts e2e/gpu/server.py (a
# random-initialised ~0.8B Llama under transformers' continuous batching),
# runs `infer_exporter bench` with e2e/gpu/stability.yml (default stability
# settings, mixed lengths, three rates below capacity and one above) and
# writes each cell's verdict to OUTPUT_DIR/stability.md, beside the bench's
# report.json and console output.
#
#   make build
#   e2e/gpu/stability.sh [EXPORTER_BINARY [OUTPUT_DIR]]
#
# RATES ("1.5, 3") replaces the rates, MAX_DURATION (4m) the cells' most
# measured time, BENCH_TIMEOUT (seconds) bounds the bench.
#
# About 7 minutes on one H200: the engine's start (20 s), then the bench,
# 6 minutes (the four cells' warm-up and 60 s measured, and the overloaded
# cell's queue draining; an extended cell would add up to 120 s).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-./infer_exporter}")
out=${2:-${OUT:-$here/out-stability}}
mkdir -p "$out"
out=$(realpath "$out")
PYTHON=${PYTHON:-python3}
PORT=${PORT:-8000}

server_pid=
# The engine may take long to exit on SIGTERM (torch's teardown): kill it
# for good after 5 s rather than wait on it.
stop_server() {
	[[ -n "$server_pid" ]] || return 0
	kill "$server_pid" 2>/dev/null || true
	for ((i = 0; i < 25; i++)); do
		kill -0 "$server_pid" 2>/dev/null || return 0
		sleep 0.2
	done
	kill -9 "$server_pid" 2>/dev/null || true
}
trap stop_server EXIT

PYTHONUNBUFFERED=1 $PYTHON "$here/server.py" --engine cb --port "$PORT" >"$out/server.log" 2>&1 &
server_pid=$!
for ((i = 0; i < 1500; i++)); do
	if $PYTHON -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$PORT/health" 2>/dev/null; then
		break
	fi
	kill -0 "$server_pid" 2>/dev/null || { tail -30 "$out/server.log" >&2; exit 1; }
	sleep 0.2
done
echo "server ready: $(date -u +%H:%M:%S)"

sed "s#127.0.0.1:8000#127.0.0.1:$PORT#" "$here/stability.yml" >"$out/stability.yml"
if [[ -n "${RATES:-}" ]]; then
	sed -i "s#rates: \[.*\]#rates: [$RATES]#" "$out/stability.yml"
fi
# MAX_DURATION (a Go duration) bounds each cell's run-on, for a machine lent
# for less time than the default's 5 minutes a cell.
if [[ -n "${MAX_DURATION:-}" ]]; then
	sed -i "s#^bench:#bench:\n  stability: {max_duration: $MAX_DURATION}#" "$out/stability.yml"
fi
rc=0
timeout -s INT "${BENCH_TIMEOUT:-540}" "$bin" bench --config.file="$out/stability.yml" --output.dir="$out/bench" --output.overwrite --progress=never \
	>"$out/console.log" 2>&1 || rc=$?
echo "bench exited $rc"
[[ -f "$out/bench/report.json" ]] || { tail -30 "$out/console.log" >&2; exit 1; }
cp "$out/bench/report.json" "$out/report.json"

$PYTHON - "$out/report.json" >"$out/stability.md" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("| cell | state | overloaded | warm-up s (ended by) | in flight at start / Little | E2E p90 s | windows (extended) | requests judged (effective) | drift [interval] | req/s | note |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for c in r["cells"]:
    for rep in c["repeats"]:
        st, s = rep["stability"], rep["stats"]
        g = st.get("growth")
        drift = "" if g is None else "%+.1f%% [%+.1f%%, %+.1f%%]" % (100 * g, 100 * st["growth_low"], 100 * st["growth_high"])
        eff = st.get("effective_requests")
        print("| %s | %s | %s | %.1f (%s) | %d / %.1f | %.1f | %d (%d) | %d (%s) | %s | %.2f | %s |" % (c["key"], st.get("state", ""), s.get("overloaded", False),
              rep.get("warmup_seconds", 0), rep.get("warmup_ended_by", ""), s.get("in_flight_at_start", 0), s.get("in_flight_expected", 0),
              s["e2e_seconds"]["p90"], st["windows"], st["extended"], st.get("requests", 0), "" if eff is None else "%.0f" % eff,
              drift, s["requests_per_second"], st.get("note", "").replace("|", "/")))
PY
cat "$out/stability.md"
exit "$rc"
