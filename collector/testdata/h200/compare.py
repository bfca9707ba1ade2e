"""Turns the device run (h200_run.tar.gz from run_device.sh; the one kept here
is the run the fixtures come from) into COMPARISON.md
and the two /metrics fixtures. Usage: python3 compare.py RUN.tar.gz OUTDIR"""
import io
import re
import statistics
import sys
import tarfile

MIB = 1 << 20
SMI_FIELDS = ["memory.used", "memory.total", "power.draw", "temperature.gpu", "clocks.sm",
              "clocks.mem", "clocks.max.sm", "utilization.gpu", "pstate", "enforced.power.limit"]
SMI2_FIELDS = ["power.draw.instant", "power.draw.average", "utilization.memory", "memory.reserved",
               "memory.free", "clocks.max.memory", "clocks_event_reasons.active", "pci.bus_id", "uuid",
               "driver_version", "mig.mode.current", "ecc.corrected", "ecc.uncorrected"]
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)')


def prom(text):
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or line.startswith("#"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        out.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return out


def one(p, name, **want):
    for labels, v in p.get(name, []):
        if all(labels.get(k) == w for k, w in want.items()):
            return v
    return None


def csvline(text, fields):
    line = text.strip().splitlines()[0] if text.strip() else ""
    vals = [v.strip() for v in line.split(",")]
    return dict(zip(fields, vals)) if len(vals) == len(fields) else {}


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


READING = """
## Reading (the committed run, h200_run.tar.gz, 2026-11-29, driver 580.159.04)

- Equal to nvidia-smi at the same instant: memory total, clocks.mem, clocks.max.sm and .memory,
  enforced power limit, pstate, the load's per-process memory (5316 MiB, exact), utilisation
  within 1 point, temperature within 1 C.
- Memory used / free / reserved differ by under 1 MiB: nvidia-smi prints whole MiB, we export
  bytes (reserved 615.06 MiB here, 616 there). used + free + reserved = total to the byte.
- Power: ours is NVML's power usage, which on Hopper is the 1 s average; it matches
  power.draw (= power.draw.average) within 0.5 % under load and 0.06 W idle, not
  power.draw.instant (up to 55 W apart under load, as expected).
- clocks.sm under load: medians equal, single samples up to 90 MHz apart: the clock moves
  every few ms while the board sits at its 700 W cap (our sw_power_cap reason reads 1).
- GPM: SM active 0.96, tensor active 0.93, SM occupancy 0.14, DRAM 0.17 under the matmul;
  0 idle. nvidia-smi dmon's own GPM readings agree to the two decimals it prints.
- PCIe (from GPM): during the host-to-device copy loop ours reads 59.2 GB/s rx, dmon's rxpci
  59.6 GB/s; the copy's payload rate was 55.0 GB/s. Both counters include PCIe protocol
  overhead (~7 %), so the payload rate is a lower bound, not an equal. dmon's PCIe column reads 0
  in some 1 s lines during steady copies, so only its non-zero lines are comparable.
- The exporter's scrape took 1-2.5 ms (curl), the nvml collector's render 39-63 us in the fixtures; each
  background NVML reading of the GPU took 5-8 ms at a 200 ms poll interval.
"""


def parse_dmon(text):
    """nvidia-smi dmon -o T lines as dicts keyed by its column names; the time
    column becomes seconds of the UTC day."""
    rows, names = [], None
    for line in text.splitlines():
        if line.startswith("#"):
            if "gpu" in line.split() or "Idx" not in line:
                cols = line[1:].split()
                if "gpu" in cols:
                    names = cols
            continue
        vals = line.split()
        if names and len(vals) == len(names):
            row = dict(zip(names, vals))
            try:
                h, m, sec = (int(x) for x in row["Time"].split(":"))
            except (KeyError, ValueError):
                continue
            row["_sod"] = h * 3600 + m * 60 + sec
            rows.append(row)
    return rows


def nearest(rows, epoch):
    """The dmon line(s) nearest the instant, merged (GPM and non-GPM logs may
    be separate)."""
    sod = epoch % 86400
    best = {}
    for r in sorted(rows, key=lambda r: abs(r["_sod"] - sod)):
        if abs(r["_sod"] - sod) > 1.5:
            break
        for k, v in r.items():
            best.setdefault(k, v)
    return best


def main(tgz, outdir):
    tf = tarfile.open(tgz)
    files = {m.name.lstrip("./"): tf.extractfile(m).read().decode(errors="replace")
             for m in tf.getmembers() if m.isfile()}
    load_pid = files.get("load.ready", "").strip()
    order = {"idle0": 0, "load": 1, "idle": 2, "h2d": 3, "d2h": 4}
    tags = sorted({n.rsplit(".", 1)[0] for n in files if n.endswith(".prom")},
                  key=lambda t: (order[t.split("_")[0]], t))
    dmon = parse_dmon(files.get("dmon.log", "") + "\n" + files.get("dmon_gpm.log", ""))
    rows = []  # (tag, gauge, ours, smi, unit)
    gpm = []
    for t in tags:
        p = prom(files[t + ".prom"])
        s = csvline(files.get(t + ".smi", ""), SMI_FIELDS)
        s2 = csvline(files.get(t + ".smi2", ""), SMI2_FIELDS)
        ours = {
            "memory.used [MiB]": (one(p, "infer_gpu_memory_used_bytes"), MIB, s.get("memory.used")),
            "memory.total [MiB]": (one(p, "infer_gpu_memory_total_bytes"), MIB, s.get("memory.total")),
            "memory.free [MiB]": (one(p, "infer_gpu_memory_free_bytes"), MIB, s2.get("memory.free")),
            "memory.reserved [MiB]": (one(p, "infer_gpu_memory_reserved_bytes"), MIB, s2.get("memory.reserved")),
            "power.draw [W]": (one(p, "infer_gpu_power_watts"), 1, s.get("power.draw")),
            "power.draw.average [W]": (one(p, "infer_gpu_power_watts"), 1, s2.get("power.draw.average")),
            "power.draw.instant [W]": (one(p, "infer_gpu_power_watts"), 1, s2.get("power.draw.instant")),
            "enforced.power.limit [W]": (one(p, "infer_gpu_power_limit_watts"), 1, s.get("enforced.power.limit")),
            "temperature.gpu [C]": (one(p, "infer_gpu_temperature_celsius"), 1, s.get("temperature.gpu")),
            "clocks.sm [MHz]": (one(p, "infer_gpu_clock_hertz", clock="sm"), 1e6, s.get("clocks.sm")),
            "clocks.mem [MHz]": (one(p, "infer_gpu_clock_hertz", clock="memory"), 1e6, s.get("clocks.mem")),
            "clocks.max.sm [MHz]": (one(p, "infer_gpu_clock_max_hertz", clock="sm"), 1e6, s.get("clocks.max.sm")),
            "clocks.max.memory [MHz]": (one(p, "infer_gpu_clock_max_hertz", clock="memory"), 1e6, s2.get("clocks.max.memory")),
            "utilization.gpu [%]": (one(p, "infer_gpu_utilization_ratio"), 0.01, s.get("utilization.gpu")),
            "utilization.memory [%]": (one(p, "infer_gpu_memory_utilization_ratio"), 0.01, s2.get("utilization.memory")),
            "pstate": (one(p, "infer_gpu_performance_state"), 1, (s.get("pstate") or "P?")[1:]),
        }
        apps = [l.split(",") for l in files.get(t + ".apps", "").strip().splitlines() if l.count(",") == 2]
        for pid, _name, mem in apps:
            pid = pid.strip()
            v = one(p, "infer_gpu_process_memory_used_bytes", pid=pid)
            ours[f"process {pid}{' (load)' if pid == load_pid else ''} memory [MiB]"] = (v, MIB, mem.strip())
        for gauge, (v, scale, smi) in ours.items():
            rows.append((t, gauge, None if v is None else v / scale, num(smi)))
        start = float(files[t + ".time"].split()[0])
        dm = nearest(dmon, start)
        gpm.append((t, {k: one(p, "infer_gpu_" + k) for k in
                        ["sm_active_ratio", "sm_occupancy_ratio", "tensor_active_ratio",
                         "dram_bandwidth_utilization_ratio", "gpm_window_seconds", "gpm_sample_age_seconds",
                         "sample_age_seconds", "poll_duration_seconds"]},
                    dm, files.get(t + ".curl", "").strip(),
                    (one(p, "infer_gpu_pcie_bytes_per_second", direction="rx"),
                     one(p, "infer_gpu_pcie_bytes_per_second", direction="tx"))))

    md = io.StringIO()
    w = md.write
    w("# NVML collector vs nvidia-smi on a real H200\n\n")
    w(f"Captured by `run_device.sh` (exporter polling every 200 ms, GPM window 1 s). "
      f"Each sample starts one `/metrics` scrape and the `nvidia-smi` queries at the same instant. "
      f"Phases: `idle0` before the load, `load` while `matmul_load.py` (pid {load_pid}) runs 8192^3 bf16 matmuls, "
      f"`idle` 4 s after it stopped. Ours is converted to nvidia-smi's units (MiB, W, C, MHz, %).\n\n")
    for k in ("host.txt", "torch.txt", "version.txt", "load.log"):
        w(f"- `{k}`: " + " / ".join(files.get(k, "").strip().splitlines()[:3]) + "\n")
    w("\n## Per gauge, each phase: ours / nvidia-smi (max |difference| over the phase's samples)\n\n")
    phases = ["idle0", "load", "idle"]
    gauges = list(dict.fromkeys(g for _, g, _, _ in rows))
    w("| gauge | " + " | ".join(phases) + " |\n|---|" + "---|" * len(phases) + "\n")
    summary = {}
    for g in gauges:
        cells = []
        for ph in phases:
            rs = [(o, s) for t, gg, o, s in rows if gg == g and t.split("_")[0] == ph]
            if not rs:
                cells.append("")
                continue
            os_ = [o for o, _ in rs if o is not None]
            ss = [s for _, s in rs if s is not None]
            diffs = [abs(o - s) for o, s in rs if o is not None and s is not None]
            fmt = lambda xs: "–" if not xs else f"{statistics.median(xs):.6g}"
            cells.append(f"{fmt(os_)} / {fmt(ss)} ({'–' if not diffs else f'{max(diffs):.4g}'})")
            summary[(g, ph)] = (os_, ss, diffs)
        if any(cells):
            w(f"| {g} | " + " | ".join(cells) + " |\n")
    w("\nMedians over the phase's samples; an en dash means absent (ours) or N/A (nvidia-smi).\n")
    w("\n## Every sample\n\n| sample | gauge | ours | nvidia-smi | ours − smi |\n|---|---|---|---|---|\n")
    for t, g, o, s in rows:
        d = "" if o is None or s is None else f"{o - s:+.4g}"
        w(f"| {t} | {g} | {'–' if o is None else f'{o:.6g}'} | {'–' if s is None else f'{s:.6g}'} | {d} |\n")
    w("\n## GPM ratios: ours / `nvidia-smi dmon --gpm-metrics 2,3,5,10` (its 1 s line nearest the sample, % / 100)\n\n")
    w("| sample | dmon time | sm_active | sm_occupancy | tensor_active | dram_bw | gpm window s | gpm age s | sample age s | poll s | scrape s |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    f = lambda x: "–" if x is None else f"{x:.4g}"
    for t, v, dm, curl, _ in gpm:
        pair = lambda k, col: f"{f(v[k])} / {f(num(dm.get(col)) / 100 if dm and num(dm.get(col)) is not None else None)}"
        w(f"| {t} | {dm.get('Time', '–') if dm else '–'} | {pair('sm_active_ratio', 'smutil')} | {pair('sm_occupancy_ratio', 'smocc')} | "
          f"{pair('tensor_active_ratio', 'mmaact')} | {pair('dram_bandwidth_utilization_ratio', 'dram')} | "
          + " | ".join(f(v[k]) for k in list(v)[4:]) + f" | {curl} |\n")
    w("\n## PCIe: ours (GPM, MiB/s converted to B/s) vs `nvidia-smi dmon -s t` (MB/s) vs the copy loop's payload rate\n\n")
    for line in files.get("copy.log", "").strip().splitlines():
        w(f"- `{line}`\n")
    w("\n| sample | ours rx MB/s | ours tx MB/s | dmon rxpci MB/s | dmon txpci MB/s |\n|---|---|---|---|---|\n")
    for t, v, dm, curl, (rx, tx) in gpm:
        mb = lambda x: "–" if x is None else f"{x / 1e6:.0f}"
        w(f"| {t} | {mb(rx)} | {mb(tx)} | {dm.get('rxpci', '–') if dm else '–'} | {dm.get('txpci', '–') if dm else '–'} |\n")
    w(READING)
    open(f"{outdir}/COMPARISON.md", "w").write(md.getvalue())
    # The fixtures: the third load sample and the last idle one.
    open(f"{outdir}/metrics_under_load.prom", "w").write(files["load_3.prom"])
    open(f"{outdir}/metrics_idle.prom", "w").write(files["idle_3.prom"])
    print(md.getvalue())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
