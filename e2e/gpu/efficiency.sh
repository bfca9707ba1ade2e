#!/usr/bin/env bash
# The bench's efficiency figures on a real GPU engine: starts
# e2e/gpu/server.py (a random-initialised ~0.8B Llama under transformers'
# continuous batching) with its request log, samples nvidia-smi's
# instantaneous power every 100 ms beside `infer_exporter bench` with
# e2e/gpu/efficiency.yml, then compares, for each cell's measured span:
#   - the bench's energy (NVML's energy counter, read once a second and
#     interpolated to the span's ends) with nvidia-smi's power integrated
#     over the same span (trapezoids);
#   - the bench's joules per output token with that integral over the
#     output tokens the server's own log put in the span (each request's
#     tokens spread evenly between its first and last token written);
#   - the cost per million output tokens with the price × span over those
#     tokens.
# Writes OUTPUT_DIR/efficiency.md beside report.json, power.csv and the
# server's request log.
#
#   make build
#   e2e/gpu/efficiency.sh [EXPORTER_BINARY [OUTPUT_DIR]]
#
# About 4 minutes on one H200: the engine's start (20 s), two cells of 80 s.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-./infer_exporter}")
out=${2:-${OUT:-$here/out-efficiency}}
mkdir -p "$out"
out=$(realpath "$out")
PYTHON=${PYTHON:-python3}
PORT=${PORT:-8000}

pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap stop_all EXIT

nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader >"$out/env.txt"
"$bin" --version 2>&1 | head -1 >>"$out/env.txt"

PYTHONUNBUFFERED=1 $PYTHON "$here/server.py" --engine cb --port "$PORT" \
	--request-log "$out/server-requests.jsonl" >"$out/server.log" 2>&1 &
pids+=($!)
for ((i = 0; i < 1500; i++)); do
	if $PYTHON -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$PORT/health" 2>/dev/null; then
		break
	fi
	kill -0 "${pids[0]}" 2>/dev/null || { tail -30 "$out/server.log" >&2; exit 1; }
	sleep 0.2
done
echo "server ready: $(date -u +%H:%M:%S)"

# Unix time in ms and the instantaneous power in W, every 100 ms.
$PYTHON - "$out/power.csv" <<'PY' &
import subprocess, sys, time
with open(sys.argv[1], "w") as f:
    f.write("unix_ms,power_w\n")
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw.instant", "--format=csv,noheader,nounits", "-lms", "100"],
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    for line in p.stdout:
        try:
            w = float(line.strip())
        except ValueError:
            continue
        f.write("%d,%.3f\n" % (time.time() * 1000, w))
        f.flush()
PY
pids+=($!)
sleep 2

sed "s#127.0.0.1:8000#127.0.0.1:$PORT#" "$here/efficiency.yml" >"$out/efficiency.yml"
rc=0
timeout -s INT 400 "$bin" bench --config.file="$out/efficiency.yml" --output.dir="$out/bench" --output.overwrite --progress=never \
	>"$out/console.log" 2>&1 || rc=$?
echo "bench exited $rc"
[[ -f "$out/bench/report.json" ]] || { tail -30 "$out/console.log" >&2; exit 1; }
cp "$out/bench/report.json" "$out/report.json"

$PYTHON "$here/efficiency_compare.py" "$out/report.json" "$out/power.csv" "$out/server-requests.jsonl" >"$out/efficiency.md"
cat "$out/efficiency.md"
exit "$rc"
