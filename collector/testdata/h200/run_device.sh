#!/usr/bin/env bash
# Validates the NVML collector on a real GPU: runs the exporter with only its
# collectors, loads the GPU with a bf16 matmul loop, and at the same moments
# captures /metrics and nvidia-smi, under load and idle. Everything lands in
# $OUT/h200_run.tar.gz; compare.py turns it into COMPARISON.md.
# Run from the repository root: bash collector/testdata/h200/run_device.sh
set -u
OUT=${OUT:-/tmp/h200_out}
BIN=${BIN:-.device/infer_exporter}
HERE=collector/testdata/h200
ADDR=127.0.0.1:9750
W=$(mktemp -d)
mkdir -p "$OUT"
Q=memory.used,memory.total,power.draw,temperature.gpu,clocks.sm,clocks.mem,clocks.max.sm,utilization.gpu,pstate,enforced.power.limit
Q2=power.draw.instant,power.draw.average,utilization.memory,memory.reserved,memory.free,clocks.max.memory,clocks_event_reasons.active,pci.bus_id,uuid,driver_version,mig.mode.current,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total

{ nvidia-smi; nvidia-smi -q; } >"$W/nvidia-smi.txt" 2>&1
python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0))' >"$W/torch.txt" 2>&1
{ uname -a; ldd --version | head -1; nproc; date; } >"$W/host.txt" 2>&1
"$BIN" --version >"$W/version.txt" 2>&1

"$BIN" --web.listen-address=$ADDR --collector.nvml.poll-interval=200ms \
  --collector.nvml.gpm-interval=1s --log.level=debug >"$W/exporter.log" 2>&1 &
EXP=$!
for _ in $(seq 100); do curl -sf "http://$ADDR/metrics" >/dev/null && break; sleep 0.1; done

# sample TAG: one scrape and the nvidia-smi queries, started together.
sample() {
  local t=$1 pids=()
  date +%s.%N >"$W/$t.time"
  curl -s -o "$W/$t.prom" -w '%{time_total}\n' "http://$ADDR/metrics" >"$W/$t.curl" & pids+=($!)
  nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits >"$W/$t.smi" 2>&1 & pids+=($!)
  nvidia-smi --query-gpu=$Q2 --format=csv,noheader,nounits >"$W/$t.smi2" 2>&1 & pids+=($!)
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits >"$W/$t.apps" 2>&1 & pids+=($!)
  wait "${pids[@]}"
  date +%s.%N >>"$W/$t.time"
}

# nvidia-smi's own 1 s log, GPM metrics and PCIe included, for the GPM and
# PCIe cross-checks (matched to the samples by time).
nvidia-smi dmon -d 1 -s putc -o T --gpm-metrics 2,3,5,10 >"$W/dmon.log" 2>&1 &
DMON=$!
sleep 2
if ! kill -0 $DMON 2>/dev/null; then # that combination refused: log each part
  nvidia-smi dmon -d 1 -s putc -o T >"$W/dmon.log" 2>&1 &
  DMON=$!
  nvidia-smi dmon -d 1 -o T --gpm-metrics 2,3,5,10 >"$W/dmon_gpm.log" 2>&1 &
  DMON="$DMON $!"
fi
sample idle0_1; sleep 1; sample idle0_2

python3 "$HERE/matmul_load.py" "$W/load.ready" "$W/load.stop" >"$W/load.log" 2>&1 &
LOAD=$!
echo "$LOAD" >"$W/load.pid"
for _ in $(seq 600); do [ -f "$W/load.ready" ] && break; sleep 0.1; done
sleep 3 # past the GPM window and the driver's utilisation period
for i in 1 2 3 4 5; do
  sample load_$i
  sleep 0.5
done
touch "$W/load.stop"; wait $LOAD
sleep 4
for i in 1 2 3; do
  sample idle_$i
  sleep 0.5
done

# PCIe: copy loops in each direction; their achieved payload rate is the truth.
for dir in h2d d2h; do
  rm -f "$W/copy.ready" "$W/copy.stop"
  python3 "$HERE/copy_load.py" "$W/copy.ready" "$W/copy.stop" $dir >>"$W/copy.log" 2>&1 &
  CP=$!
  for _ in $(seq 600); do [ -f "$W/copy.ready" ] && break; sleep 0.1; done
  sleep 2.5 # one full GPM window inside the copy loop
  sample ${dir}_1; sleep 0.5; sample ${dir}_2
  touch "$W/copy.stop"; wait $CP
done

kill -TERM $DMON; wait $DMON 2>/dev/null
kill -TERM $EXP; wait $EXP; echo "exporter exit $?" >>"$W/exporter.log"
tar czf "$OUT/h200_run.tar.gz" -C "$W" .
cat "$W/host.txt" "$W/torch.txt" "$W/version.txt" "$W/load.log" "$W/copy.log"
head -4 "$W/dmon.log"
grep -h "nvml\|NVML\|level=WARN\|level=ERROR" "$W/exporter.log" | head -20
echo "--- load_3"; grep -v '^#' "$W/load_3.prom" | grep -E '^infer_gpu_(sm_active|tensor|utilization|power_watts|memory_used|process_mem|poll_dur|sample_age)|collector_scrape' ; cat "$W/load_3.smi" "$W/load_3.apps" "$W/load_3.curl"
echo "--- idle_3"; grep -v '^#' "$W/idle_3.prom" | grep -E '^infer_gpu_(sm_active|tensor|utilization|power_watts)'; cat "$W/idle_3.smi"
for t in h2d_2 d2h_2; do echo "--- $t"; grep -h '^infer_gpu_pcie' "$W/$t.prom"; done
