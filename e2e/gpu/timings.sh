#!/usr/bin/env bash
# The engine's own per-request timings on a real GPU engine: starts
# e2e/gpu/server.py --per-request-metrics (a random-initialised ~0.8B Llama
# under transformers' continuous batching, answering with vLLM's per-request
# metrics object from the clocks of its own request log), runs
# `infer_exporter bench` with e2e/gpu/timings.yml, every request recorded,
# and joins each record with the engine's log by X-Request-Id
# (e2e/gpu/timings_compare.py): the share of streamed requests decomposed,
# and the exporter's client overhead against the client's TTFT less the
# engine's TTFT taken from the log.
#
#   make build
#   e2e/gpu/timings.sh [EXPORTER_BINARY [OUTPUT_DIR]]
#
# About 3 minutes on one H100: the engine's start (20 s), two cells of 10 s
# warm-up and 45 s measured, the queue's drain.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-./infer_exporter}")
out=${2:-${OUT:-$here/out-timings}}
mkdir -p "$out"
out=$(realpath "$out")
PYTHON=${PYTHON:-python3}
PORT=${PORT:-8000}
ENGINE=${ENGINE:-cb}

server_pid=
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

rm -f "$out/server-requests.jsonl"
PYTHONUNBUFFERED=1 $PYTHON "$here/server.py" --engine "$ENGINE" --port "$PORT" --per-request-metrics \
	--request-log "$out/server-requests.jsonl" --info-file "$out/server-info.json" >"$out/server.log" 2>&1 &
server_pid=$!
for ((i = 0; i < 1500; i++)); do
	if $PYTHON -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$PORT/health" 2>/dev/null; then
		break
	fi
	kill -0 "$server_pid" 2>/dev/null || { tail -30 "$out/server.log" >&2; exit 1; }
	sleep 0.2
done
echo "server ready: $(date -u +%H:%M:%S)"

sed "s#127.0.0.1:8000#127.0.0.1:$PORT#" "$here/timings.yml" >"$out/timings.yml"
rc=0
timeout -s INT "${BENCH_TIMEOUT:-400}" "$bin" bench --config.file="$out/timings.yml" --output.dir="$out/bench" --output.overwrite \
	--output.requests="$out/requests.jsonl" --progress=never >"$out/console.log" 2>&1 || rc=$?
echo "bench exited $rc"
[[ -f "$out/bench/report.json" ]] || { tail -30 "$out/console.log" >&2; exit 1; }
cp "$out/bench/report.json" "$out/report.json"
stop_server
$PYTHON "$here/timings_compare.py" "$out/requests.jsonl" "$out/server-requests.jsonl" >"$out/timings.md"
cat "$out/timings.md"
exit "$rc"
