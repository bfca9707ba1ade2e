#!/usr/bin/env bash
# Real-GPU check of infer_exporter: starts a real inference engine
# (e2e/gpu/server.py: a random-initialised ~0.8B Llama in bf16 under
# transformers' continuous batching, behind an OpenAI streaming API), probes it
# with the exporter live (serve mode, NVML on) while sampling /metrics and
# nvidia-smi at the same instants, runs `infer_exporter bench` against it, and
# compares the exporter's figures with the server's per-request log and with
# nvidia-smi (e2e/gpu/compare.py). 203 s on one H200 (measured).
#
#   make build     # cgo on: NVML built in
#   e2e/gpu/run.sh [EXPORTER_BINARY [OUTPUT_DIR]]
#
# EXPORTER_BINARY defaults to ./infer_exporter (make build), OUTPUT_DIR to $OUT
# when set, else e2e/gpu/out (git-ignored). Results: OUTPUT_DIR/
# summary.md, comparison.json, gauges.csv, server_requests.csv, report.json
# (the bench's), and raw/ (every log and sample; packed into raw.tar.gz when
# PACK=1). Environment: PYTHON (python3), ENGINE (cb | generate | fake: fake
# needs no GPU nor torch, for checking the script), SERVE_SECONDS (60: the
# workload's duration, set in exporter.yml), PORT (8000), EXPORTER_PORT (9750).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-./infer_exporter}")
out=${2:-${OUT:-$here/out}}
mkdir -p "$out"
out=$(realpath "$out")
raw=$out/raw
rm -rf "$raw"
mkdir -p "$raw"
PYTHON=${PYTHON:-python3}
ENGINE=${ENGINE:-cb}
SERVE_SECONDS=${SERVE_SECONDS:-60}
PORT=${PORT:-8000}
EXPORTER_PORT=${EXPORTER_PORT:-9750}
t_start=$(date +%s)

log() { echo "$(date +%H:%M:%S) run.sh: $*" | tee -a "$raw/run.log" >&2; }

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if [[ "${PACK:-0}" == 1 && -d "$raw" ]]; then # also after a failure or a time-out
		tar -C "$out" -czf "$out/raw.tar.gz" raw && rm -rf "$raw"
	fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# GET a URL (curl where there is one, else Python's urllib); fails on non-2xx.
if command -v curl >/dev/null 2>&1; then
	http_get() { curl -fsS --max-time "${2:-5}" "$1"; }
else
	http_get() { $PYTHON -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])).read())' "$1" "${2:-5}"; }
fi

wait_http() { # url seconds pid
	local i
	for ((i = 0; i < $2 * 5; i++)); do
		if http_get "$1" 2 >/dev/null 2>&1; then return 0; fi
		if ! kill -0 "$3" 2>/dev/null; then
			log "process $3 exited while waiting for $1"
			return 1
		fi
		sleep 0.2
	done
	log "timed out after $2 s waiting for $1"
	return 1
}

metric() { # name-regex: the first matching sample's value from the exporter
	http_get "http://127.0.0.1:$EXPORTER_PORT/metrics" 5 2>/dev/null | awk -v re="$1" '!done && $0 !~ /^#/ && $1 ~ re {print $2; done = 1}'
}

# -- environment
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host: $(uname -a)"
	echo "cpus: $(nproc)"
	"$bin" --version 2>&1 | head -1
	"$bin" --version 2>&1 | grep -i nvml || true
	nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader 2>&1 || echo "nvidia-smi: absent"
	$PYTHON --version 2>&1
} >"$raw/env.txt"
log "environment: $(tr '\n' ' ' <"$raw/env.txt")"

# The configurations, pointed at $PORT.
sed "s#127.0.0.1:8000#127.0.0.1:$PORT#" "$here/exporter.yml" >"$raw/exporter.yml"
sed "s#127.0.0.1:8000#127.0.0.1:$PORT#" "$here/bench.yml" >"$raw/bench.yml"

# -- 1. the engine
log "starting server.py (engine $ENGINE) on :$PORT"
PYTHONUNBUFFERED=1 $PYTHON "$here/server.py" --engine "$ENGINE" --port "$PORT" \
	--request-log "$raw/server-requests.jsonl" --info-file "$raw/server-info.json" \
	>"$raw/server.log" 2>&1 &
server_pid=$!
pids+=("$server_pid")
wait_http "http://127.0.0.1:$PORT/health" 300 "$server_pid" || { tail -50 "$raw/server.log" >&2; exit 1; }
log "server ready after $(($(date +%s) - t_start)) s: $(cat "$raw/server-info.json" 2>/dev/null | tr -d '\n ')"

# -- 2. the exporter, live, with NVML, sampled together with nvidia-smi
log "starting infer_exporter (serve mode) for the ${SERVE_SECONDS} s workload"
"$bin" --config.file="$raw/exporter.yml" --web.listen-address="127.0.0.1:$EXPORTER_PORT" \
	--collector.nvml.poll-interval=200ms >"$raw/exporter.log" 2>&1 &
exp_pid=$!
pids+=("$exp_pid")
wait_http "http://127.0.0.1:$EXPORTER_PORT/-/ready" 90 "$exp_pid" || { tail -30 "$raw/exporter.log" >&2; exit 1; }
stop_file=$raw/.stop-sampling
PYTHONUNBUFFERED=1 $PYTHON "$here/sample.py" --metrics-url "http://127.0.0.1:$EXPORTER_PORT/metrics" \
	--out-dir "$raw" --interval 5 --stop-file "$stop_file" --max-seconds 240 >"$raw/sample.log" 2>&1 &
sampler_pid=$!
pids+=("$sampler_pid")
live_start=$(date +%s)
# Until the workload has finished (its duration is in exporter.yml) and its
# last requests have ended.
while :; do
	sleep 2
	el=$(($(date +%s) - live_start))
	fin=$(metric 'infer_probe_workload_state[{].*state="finished"' || true)
	failed=$(metric 'infer_probe_workload_state[{].*state="failed"' || true)
	infl=$(metric '^infer_probe_in_flight_requests' || true)
	if [[ "$failed" == 1 ]]; then
		log "the workload failed:"
		tail -20 "$raw/exporter.log" >&2
		break
	fi
	if [[ "$fin" == 1 && "${infl:-0}" == 0 ]]; then break; fi
	if ((el > SERVE_SECONDS + 90)); then
		log "the workload did not finish within $((SERVE_SECONDS + 90)) s (in flight: ${infl:-?})"
		break
	fi
done
log "live workload done after $(($(date +%s) - live_start)) s; final scrape"
touch "$stop_file"
wait "$sampler_pid" || log "sampler exited $?"
kill "$exp_pid" 2>/dev/null || true
wait "$exp_pid" 2>/dev/null || true

# -- 3. the bench
log "infer_exporter bench (rates 2 and 8 req/s)"
bench_rc=0
timeout 300 "$bin" bench --config.file="$raw/bench.yml" --output.dir="$raw/bench" --progress=never \
	--output.requests="$raw/bench/requests.jsonl" \
	>"$raw/bench.log" 2>&1 || bench_rc=$?
log "bench exited $bench_rc after $(($(date +%s) - t_start)) s in all"
[[ $bench_rc == 0 ]] || tail -20 "$raw/bench.log" >&2

# -- 4. stop the engine, compare
kill -INT "$server_pid" 2>/dev/null || true
for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
kill "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
nvidia-smi >"$raw/nvidia-smi-end.txt" 2>&1 || true

meta="$(date -u +%Y-%m-%dT%H:%M:%SZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'no GPU'), $(nproc) CPUs, engine $ENGINE, $("$bin" --version 2>&1 | head -1), run.sh wall $(($(date +%s) - t_start)) s"
$PYTHON "$here/compare.py" "$raw" --out "$out" --meta "$meta" 2>&1 | tee -a "$raw/run.log"
[[ -f "$raw/bench/report.json" ]] && cp "$raw/bench/report.json" "$out/report.json"
[[ -f "$raw/bench/requests.jsonl" ]] && gzip -c "$raw/bench/requests.jsonl" >"$out/requests.jsonl.gz"
log "done in $(($(date +%s) - t_start)) s; summary: $out/summary.md"
cat "$out/summary.md"
exit "$bench_rc"
