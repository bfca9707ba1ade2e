#!/usr/bin/env python3
"""Compare what infer_exporter measured with what the server and nvidia-smi saw.

Reads the raw directory that e2e/gpu/run.sh fills and writes summary.md,
comparison.json and gauges.csv (and server_requests.csv) beside it (or into
--out). Standard library only.

Three comparisons, each stated as what it is:

1. Live workload (serve mode): the exporter's view of the workload's requests
   is its /metrics after the workload finished: every TTFT, TPOT and E2E as a
   histogram. Its mean is exact (_sum/_count); p50/p99 are read from the
   native histogram (protobuf scrape; schema 3, buckets 2^(1/8) wide: the
   estimate lies in the true value's bucket, so it is within about 9%). The server's view is its per-request log, for the
   same requests (X-Request-Id gpu-chat-N): TTFT = arrival to first token
   written to the socket, TPOT = (last - first token written) / (tokens - 1),
   E2E = arrival to last token. This is a distribution comparison over the
   same request set, not a per-request join: the exporter exposes no
   per-request records.
2. NVML: the exporter's infer_gpu_* gauges against nvidia-smi queried at the
   same instants (the exporter polls NVML in the background; its reading is up
   to one poll interval old, infer_gpu_sample_age_seconds).
3. Bench: report.json's cell figures (exact order-statistic quantiles over the
   measured requests) against the server log's requests that arrived in each
   cell's measured window.

The client's clock starts at the request's scheduled instant, the server's at
its arrival, so client minus server TTFT is schedule lag + connection + the
request's transfer and parse on the server's side before its handler ran +
the first chunk's way back and the client's parse.
"""

import argparse
import csv
import datetime as dt
import json
import math
import os
import re
import struct
import sys

# ------------------------------------------------------------ statistics


def quantile(xs, q):
    """numpy's default (linear between order statistics), as bench uses."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def dist(xs):
    if not xs:
        return {"count": 0}
    return {"count": len(xs), "mean": sum(xs) / len(xs), "p50": quantile(xs, 0.5), "p90": quantile(xs, 0.9),
            "p99": quantile(xs, 0.99), "min": min(xs), "max": max(xs)}


# ------------------------------------------------------------ Prometheus text


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_text(text):
    out = []
    for ln in text.splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = LINE.match(ln)
        if not m:
            continue
        labels = dict(LABEL.findall(m.group(3) or ""))
        try:
            v = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), labels, v))
    return out


def pick(series, name, **want):
    for n, labels, v in series:
        if n == name and all(labels.get(k) == w for k, w in want.items()):
            return v
    return None


def classic_hist(series, name, **want):
    """The classic buckets of one histogram: [(le, cumulative)], count, sum."""
    b = []
    for n, labels, v in series:
        if n == name + "_bucket" and all(labels.get(k) == w for k, w in want.items()):
            b.append((float(labels["le"]), v))
    b.sort()
    return b, pick(series, name + "_count", **want), pick(series, name + "_sum", **want)


def classic_quantile(buckets, q):
    """histogram_quantile over classic buckets: linear within the bucket."""
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if math.isinf(le):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


# ------------------------------------------------------------ protobuf (native histograms)


def varint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << s
        if c < 0x80:
            return x, i
        s += 7


def zigzag(x):
    return (x >> 1) ^ -(x & 1)


def fields(b):
    """Yield (field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v = b[i:i + 8]
            i += 8
        elif wt == 2:
            n, i = varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 5:
            v = b[i:i + 4]
            i += 4
        else:
            raise ValueError(f"wire type {wt}")
        yield fn, wt, v


def dbl(v):
    return struct.unpack("<d", v)[0]


def packed_sint(wt, v):
    if wt == 0:
        return [zigzag(v)]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(zigzag(x))
    return out


def parse_histogram(b):
    h = {"count": 0, "sum": 0.0, "schema": None, "zero_threshold": 0.0, "zero_count": 0,
         "pos_spans": [], "pos_deltas": [], "neg_spans": [], "neg_deltas": [], "pos_counts": []}
    for fn, wt, v in fields(b):
        if fn == 1:
            h["count"] = v
        elif fn == 4:
            h["count"] = dbl(v)
        elif fn == 2:
            h["sum"] = dbl(v)
        elif fn == 5:
            h["schema"] = zigzag(v)
        elif fn == 6:
            h["zero_threshold"] = dbl(v)
        elif fn == 7:
            h["zero_count"] = v
        elif fn in (9, 12):
            off = ln = 0
            for f2, _, v2 in fields(v):
                if f2 == 1:
                    off = zigzag(v2)
                elif f2 == 2:
                    ln = v2
            h["neg_spans" if fn == 9 else "pos_spans"].append((off, ln))
        elif fn in (10, 13):
            h["neg_deltas" if fn == 10 else "pos_deltas"] += packed_sint(wt, v)
        elif fn == 14:
            h["pos_counts"].append(dbl(v))
    return h


def parse_delimited(b):
    """MetricFamily messages -> {name: [(labels, histogram)]} for histograms."""
    out = {}
    i = 0
    while i < len(b):
        n, i = varint(b, i)
        msg = b[i:i + n]
        i += n
        name, metrics = "", []
        for fn, _, v in fields(msg):
            if fn == 1:
                name = v.decode()
            elif fn == 4:
                labels, hist = {}, None
                for f2, _, v2 in fields(v):
                    if f2 == 1:
                        k = val = ""
                        for f3, _, v3 in fields(v2):
                            if f3 == 1:
                                k = v3.decode()
                            elif f3 == 2:
                                val = v3.decode()
                        labels[k] = val
                    elif f2 == 7:
                        hist = parse_histogram(v2)
                if hist is not None:
                    metrics.append((labels, hist))
        if metrics:
            out[name] = metrics
    return out


def native_buckets(h):
    """[(lower, upper, count)] of the positive native buckets, ascending."""
    s = h["schema"]
    if s is None:
        return []
    base = 2 ** (2.0 ** -s)
    out = []
    idx = None
    counts = []
    c = 0
    for d in h["pos_deltas"]:
        c += d
        counts.append(c)
    if not counts and h["pos_counts"]:
        counts = h["pos_counts"]
    k = 0
    for off, ln in h["pos_spans"]:
        idx = off if idx is None else idx + off
        for _ in range(ln):
            if k < len(counts):
                out.append((base ** (idx - 1), base ** idx, counts[k]))
            k += 1
            idx += 1
    return out


def native_from_values(xs, schema=3):
    """A native histogram (positive buckets) of exact values, to read the
    server's values with the same buckets and estimator as the exporter's."""
    idx = {}
    zero = 0
    for x in xs:
        if x <= 0:
            zero += 1
            continue
        i = math.ceil(math.log2(x) * 2 ** schema - 1e-9)
        idx[i] = idx.get(i, 0) + 1
    h = {"count": len(xs), "schema": schema, "zero_count": zero, "pos_spans": [], "pos_deltas": [],
         "pos_counts": []}
    if idx:
        lo, hi = min(idx), max(idx)
        h["pos_spans"] = [(lo, hi - lo + 1)]
        prev = 0
        for i in range(lo, hi + 1):
            h["pos_deltas"].append(idx.get(i, 0) - prev)
            prev = idx.get(i, 0)
    return h


def native_quantile(h, q):
    """Quantile of a native histogram: exponential interpolation within the
    bucket, as Prometheus does for standard schemas."""
    total = h["count"]
    if not total:
        return None
    rank = q * total
    acc = h["zero_count"]
    if acc >= rank:
        return 0.0
    for lo, hi, c in native_buckets(h):
        if acc + c >= rank:
            frac = (rank - acc) / c if c else 1.0
            return lo * (hi / lo) ** frac
        acc += c
    bs = native_buckets(h)
    return bs[-1][1] if bs else None


# ------------------------------------------------------------ inputs


def read_jsonl(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for ln in f:
                ln = ln.strip()
                if ln:
                    try:
                        out.append(json.loads(ln))
                    except json.JSONDecodeError:
                        pass
    return out


def server_figures(r):
    """Server-side TTFT, TPOT, E2E (seconds) of one logged request."""
    a, f, l, n = r.get("arrival_ns", 0), r.get("first_token_ns", 0), r.get("last_token_ns", 0), \
        r.get("completion_tokens", 0)
    out = {}
    if f:
        out["ttft"] = (f - a) / 1e9
    if r.get("status") == "success" and l:
        out["e2e"] = (l - a) / 1e9
        if n >= 2 and l > f:
            out["tpot"] = (l - f) / 1e9 / (n - 1)
    ef, el = r.get("engine_first_ns", 0), r.get("engine_last_ns", 0)
    if ef:
        out["engine_ttft"] = (ef - a) / 1e9
    if ef and el and n >= 2 and el > ef:
        out["engine_tpot"] = (el - ef) / 1e9 / (n - 1)
    return out


def parse_time(s):
    """RFC 3339 with up to 9 fractional digits -> unix seconds (float)."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", s)
    if not m:
        raise ValueError(s)
    base = dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    tz = m.group(3)
    off = 0 if tz == "Z" else (int(tz[1:3]) * 60 + int(tz[4:6])) * 60 * (1 if tz[0] == "+" else -1)
    base = base.replace(tzinfo=dt.timezone.utc)
    return base.timestamp() - off + (float(m.group(2)) if m.group(2) else 0.0)


def dur_seconds(s):
    m = re.match(r"^([\d.]+)(ms|s|m|h)$", s.strip())
    if not m:
        return None
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600}[m.group(2)]


# ------------------------------------------------------------ formatting


def ms(x):
    return "–" if x is None else f"{x * 1000:.1f}"


def ms2(x):
    return "–" if x is None else f"{x * 1000:.2f}"


def num(x, d=1):
    return "–" if x is None else f"{x:.{d}f}"


def signed(x, d=1, scale=1000):
    return "–" if x is None else f"{x * scale:+.{d}f}"


# ------------------------------------------------------------ main


def live(raw, reqs, wl):
    """Comparison 1."""
    text_path = os.path.join(raw, "final.prom")
    if not os.path.exists(text_path):
        return None
    with open(text_path) as f:
        series = parse_text(f.read())
    native = {}
    pb = os.path.join(raw, "final.pb")
    if os.path.exists(pb):
        with open(pb, "rb") as f:
            try:
                native = parse_delimited(f.read())
            except Exception as e:  # noqa: BLE001
                print("compare.py: protobuf parse failed:", repr(e), file=sys.stderr)
    names = {"ttft": "infer_probe_time_to_first_token_seconds",
             "tpot": "infer_probe_time_per_output_token_seconds",
             "e2e": "infer_probe_request_duration_seconds",
             "itl": "infer_probe_inter_token_latency_seconds",
             "schedule_lag": "infer_probe_schedule_lag_seconds"}
    client = {}
    for k, n in names.items():
        b, c, s = classic_hist(series, n, workload=wl)
        e = {"count": c, "mean": (s / c) if c else None,
             "p50_classic": classic_quantile(b, 0.5), "p99_classic": classic_quantile(b, 0.99)}
        for labels, h in native.get(n, []):
            if labels.get("workload") == wl:
                e["p50"] = native_quantile(h, 0.5)
                e["p99"] = native_quantile(h, 0.99)
                e["native_schema"] = h["schema"]
        client[k] = e
    mine = [r for r in reqs if str(r.get("request_id", "")).startswith(wl + "-")]
    figs = [server_figures(r) for r in mine]
    server = {k: dist([f[k] for f in figs if k in f]) for k in ("ttft", "tpot", "e2e", "engine_ttft", "engine_tpot")}
    for k in ("ttft", "tpot", "e2e"):
        vals = [f[k] for f in figs if k in f]
        schema = client.get(k, {}).get("native_schema", 3)
        if vals:
            h = native_from_values(vals, schema)
            server[k]["p50_binned"] = native_quantile(h, 0.5)
            server[k]["p99_binned"] = native_quantile(h, 0.99)
    outcomes = {}
    for n, labels, v in series:
        if n == "infer_probe_requests_total" and labels.get("workload") == wl:
            outcomes[labels.get("outcome", "?")] = v
    srv_status = {}
    for r in mine:
        srv_status[r.get("status")] = srv_status.get(r.get("status"), 0) + 1
    return {"what": "distribution comparison over the same requests (exporter histograms vs server log)",
            "workload": wl, "client": client, "server": server, "client_outcomes": outcomes,
            "server_statuses": srv_status, "server_requests": len(mine),
            "completion_tokens_client": pick(series, "infer_probe_completion_tokens_total", workload=wl),
            "completion_tokens_server": sum(r.get("completion_tokens", 0) for r in mine if r.get("status") == "success"),
            "degraded": pick(series, "infer_probe_measurement_degraded", workload=wl),
            "native_histograms": bool(native)}


GAUGES = [  # (label, exporter metric, labels, factor to nvidia-smi's unit, nvidia-smi column)
    ("memory.used [MiB]", "infer_gpu_memory_used_bytes", {}, 1 / 2 ** 20, 1),
    ("power.draw [W]", "infer_gpu_power_watts", {}, 1, 2),
    ("temperature.gpu [C]", "infer_gpu_temperature_celsius", {}, 1, 3),
    ("utilization.gpu [%]", "infer_gpu_utilization_ratio", {}, 100, 4),
    ("clocks.sm [MHz]", "infer_gpu_clock_hertz", {"clock": "sm"}, 1e-6, 5),
]


def nvml(raw):
    """Comparison 2."""
    path = os.path.join(raw, "samples.csv")
    if not os.path.exists(path):
        return None, []
    rows = []
    with open(path) as f:
        for s in csv.DictReader(f):
            mf = s["metrics_file"]
            if mf.startswith("error") or not os.path.exists(os.path.join(raw, mf)):
                continue
            with open(os.path.join(raw, mf)) as g:
                series = parse_text(g.read())
            smi = [x.strip() for x in s["smi"].split(",")]
            age = pick(series, "infer_gpu_sample_age_seconds", gpu="0")
            for label, metric, want, factor, col in GAUGES:
                ours = pick(series, metric, gpu="0", **want)
                try:
                    theirs = float(smi[col]) if len(smi) > col else None
                except ValueError:
                    theirs = None
                rows.append({"sample": int(s["i"]), "phase": s["phase"], "t_ns": int(s["t_ns"]),
                             "gauge": label, "exporter": None if ours is None else ours * factor,
                             "nvidia_smi": theirs, "smi_timestamp": smi[0] if smi else "",
                             "sample_age_s": age})
    per = {}
    for label, *_ in GAUGES:
        rs = [r for r in rows if r["gauge"] == label and r["exporter"] is not None and r["nvidia_smi"] is not None]
        d = [abs(r["exporter"] - r["nvidia_smi"]) for r in rs]
        per[label] = {"samples": len(rs),
                      "exporter_median": quantile([r["exporter"] for r in rs], 0.5),
                      "nvidia_smi_median": quantile([r["nvidia_smi"] for r in rs], 0.5),
                      "exporter_max": max((r["exporter"] for r in rs), default=None),
                      "nvidia_smi_max": max((r["nvidia_smi"] for r in rs), default=None),
                      "abs_diff_median": quantile(d, 0.5), "abs_diff_max": max(d, default=None)}
    return per, rows


def bench(raw, reqs, live_wl):
    """Comparison 3."""
    path = os.path.join(raw, "bench", "report.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rep = json.load(f)
    env = rep.get("environment", {})
    cfg = env.get("config", "")
    m = re.search(r"^\s*warmup:\s*(\S+)", cfg, re.M)
    warm = dur_seconds(m.group(1)) if m else 10.0
    m = re.search(r"^\s*duration:\s*(\S+)", cfg, re.M)
    duration = dur_seconds(m.group(1)) if m else 30.0
    started = parse_time(env["started"]) if env.get("started") else None
    spans = {s["cell"]: s for s in rep.get("timeline", [])}
    cells = []
    for c in rep.get("cells", []):
        s = c.get("summary", {})
        e = {"cell": c.get("key"), "load": c.get("load"), "shape": c.get("shape"),
             "requests": s.get("requests"), "successes": s.get("successes"),
             "requests_per_second": s.get("requests_per_second"),
             "output_tokens_per_second": s.get("output_tokens_per_second"),
             "goodput_ratio": s.get("goodput_ratio"), "degraded": c.get("degraded"),
             "ttft": s.get("ttft_seconds", {}), "tpot": s.get("tpot_seconds", {}),
             "e2e": s.get("e2e_seconds", {}), "itl": s.get("itl_seconds", {}),
             "schedule_lag": s.get("schedule_lag_seconds", {})}
        sp = spans.get(c.get("key"))
        reps = c.get("repeats") or [{}]
        # The warm-up the repeat used (it lasts until the pipeline is full),
        # and its measured windows, from the report itself.
        cell_warm = reps[0].get("warmup_seconds", warm)
        cell_dur = s.get("window_seconds") or duration
        e["warmup_s"], e["window_s"] = cell_warm, cell_dur
        e["in_flight_at_start"], e["in_flight_at_end"] = s.get("in_flight_at_start"), s.get("in_flight_at_end")
        e["offered_per_second"], e["sent_per_second"] = s.get("offered_per_second"), s.get("sent_per_second")
        e["overloaded"], e["draining"] = s.get("overloaded"), s.get("draining")
        if sp and started is not None:
            lo = (started + sp["start"] + cell_warm) * 1e9
            hi = lo + cell_dur * 1e9
            mine = [r for r in reqs if lo <= r.get("arrival_ns", 0) < hi
                    and not str(r.get("request_id", "")).startswith(live_wl + "-")]
            figs = [server_figures(r) for r in mine]
            e["server"] = {k: dist([f[k] for f in figs if k in f]) for k in ("ttft", "tpot", "e2e")}
            e["server"]["requests"] = len(mine)
            e["server_window_unix"] = [lo / 1e9, hi / 1e9]
        cells.append(e)
    gpu = rep.get("gpu", {})
    return {"what": "bench report.json cells vs the server log's requests that arrived in each cell's measured window",
            "cells": cells, "gpu_available": gpu.get("available"), "gpu_note": gpu.get("note"),
            "peak_memory_bytes": gpu.get("peak_memory_bytes"),
            "gpus": env.get("gpus"), "covariates": env.get("covariates") or gpu.get("covariates"),
            "warmup_s": warm, "duration_s": duration}


def join(raw, reqs):
    """Comparison 4: the bench's per-request records (--output.requests)
    joined with the server's log by X-Request-Id, request by request."""
    path = os.path.join(raw, "bench", "requests.jsonl")
    recs = read_jsonl(path)
    if not recs:
        return None
    by_id = {str(r.get("request_id", "")): r for r in reqs if r.get("request_id")}
    diffs = {"ttft": [], "tpot": [], "e2e": [], "arrival_minus_sent": []}
    matched = unmatched = measured = tokens_equal = tokens_compared = 0
    for rec in recs:
        if not rec.get("id") or rec.get("outcome") != "success":
            continue
        srv = by_id.get(rec["id"])
        if srv is None:
            unmatched += 1
            continue
        matched += 1
        measured += 1 if rec.get("measured") else 0
        g = server_figures(srv)
        # The client's clock starts at the scheduled instant, the server's
        # at the request's arrival: the difference is what lies between.
        for k in ("ttft", "tpot", "e2e"):
            if rec.get(k) is not None and k in g:
                diffs[k].append(rec[k] - g[k])
        if rec.get("sent") is not None and srv.get("arrival_ns"):
            diffs["arrival_minus_sent"].append(srv["arrival_ns"] / 1e9 - rec["sent"])
        if srv.get("completion_tokens"):
            tokens_compared += 1
            tokens_equal += 1 if srv["completion_tokens"] == rec.get("output_tokens") else 0
    out = {"what": "bench request records joined with the server log by X-Request-Id: client minus server, seconds",
           "records": len(recs), "matched": matched, "unmatched_successes": unmatched, "measured_matched": measured,
           "output_tokens_equal": tokens_equal, "output_tokens_compared": tokens_compared}
    for k, xs in diffs.items():
        xs = sorted(xs)
        out[k] = {"count": len(xs), "p50": quantile(xs, 0.5) if xs else None,
                  "p99": quantile(xs, 0.99) if xs else None, "max": xs[-1] if xs else None,
                  "min": xs[0] if xs else None}
    return out


def write_summary(out, info, lv, per, bn, meta, jn=None):
    L = []
    L.append("# infer_exporter against a real GPU engine")
    L.append("")
    if meta:
        L.append(f"Run: {meta}")
        L.append("")
    if info:
        L.append(f"Engine: `server.py` engine `{info.get('engine')}` (transformers {info.get('transformers', '?')}, "
                 f"torch {info.get('torch', '?')}), a random-initialised Llama of "
                 f"{(info.get('parameters') or 0) / 1e9:.2f}B parameters in bf16 on {info.get('gpu', '?')}; "
                 f"start-up {info.get('startup_seconds')} s.")
        L.append("")
    if lv:
        c, s = lv["client"], lv["server"]
        L.append("## 1. Live workload: exporter (client) vs server, same requests")
        L.append("")
        L.append(f"Workload `{lv['workload']}`: constant 2 req/s, 512 prompt / 128 output tokens, 60 s. "
                 f"Exporter outcomes {json.dumps(lv['client_outcomes'])}; server log "
                 f"{json.dumps(lv['server_statuses'])} ({lv['server_requests']} requests); completion tokens "
                 f"exporter {num(lv['completion_tokens_client'], 0)}, server {lv['completion_tokens_server']}; "
                 f"measurement degraded: {num(lv['degraded'], 0)}.")
        L.append("")
        L.append("This is a distribution comparison, not a per-request join (the exporter has no per-request "
                 "records): exporter = its histograms on /metrics after the workload ended (mean exact from "
                 "_sum/_count; p50/p99 estimated from its native histogram, buckets 2^(1/8) wide"
                 + ("" if lv["native_histograms"] else "; NOT AVAILABLE here, classic buckets used") +
                 "), clock from the scheduled instant; server = its per-request log, clock from the request's "
                 "arrival, tokens as written to the socket; its p50/p99 are shown read the same way (its values put in "
                 "the same buckets, the same estimator, so the difference is not the estimator's) and exact.")
        L.append("")
        L.append("| figure [ms] | exporter mean | server mean | diff | exporter p50 | server p50 | diff | "
                 "exporter p99 | server p99 | diff | server p50 / p99, exact | n (exp/srv) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for k, lab in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")):
            ce, se = c.get(k, {}), s.get(k, {})
            p50 = ce.get("p50", ce.get("p50_classic"))
            p99 = ce.get("p99", ce.get("p99_classic"))
            s50, s99 = se.get("p50_binned"), se.get("p99_binned")
            f = ms2 if k == "tpot" else ms

            def d(a, b):
                return "–" if a is None or b is None else signed(a - b, 2 if k == "tpot" else 1)
            L.append(f"| {lab} | {f(ce.get('mean'))} | {f(se.get('mean'))} | {d(ce.get('mean'), se.get('mean'))} | "
                     f"{f(p50)} | {f(s50)} | {d(p50, s50)} | {f(p99)} | {f(s99)} | {d(p99, s99)} | "
                     f"{f(se.get('p50'))} / {f(se.get('p99'))} | {num(ce.get('count'), 0)}/{se.get('count', 0)} |")
        sl = c.get("schedule_lag", {})
        et, ep = s.get("engine_ttft", {}), s.get("engine_tpot", {})
        L.append("")
        L.append(f"Exporter schedule lag (scheduled → sent): mean {ms2(sl.get('mean'))} ms. Server, engine side "
                 f"(when the router thread got the token, before the socket write): TTFT p50 {ms(et.get('p50'))} / "
                 f"p99 {ms(et.get('p99'))} ms, TPOT p50 {ms2(ep.get('p50'))} / p99 {ms2(ep.get('p99'))} ms.")
        L.append("")
        L.append("Reading it: the means are exact on both sides, so their difference is what the client adds "
                 "(schedule lag, connection, the server's request parse before its handler's clock starts, the "
                 "chunk's way back). A histogram's p50/p99 is an estimate (Prometheus' rank q·N, interpolated "
                 "inside a bucket about 9% wide), so compare it with the server's binned figure; the exact "
                 "figures differ from both by the estimator (with 119 requests a p99 lies between the two largest "
                 "values). Section 3 compares exact quantiles.")
        L.append("")
    if per:
        L.append("## 2. NVML gauges (exporter /metrics) vs nvidia-smi at the same instants")
        L.append("")
        L.append("Each sample started the /metrics scrape and the nvidia-smi query together (every 5 s during the "
                 "live workload); the exporter polled NVML every 200 ms. Exporter values in nvidia-smi's units.")
        L.append("")
        L.append("| gauge | samples | exporter median | nvidia-smi median | exporter max | nvidia-smi max | "
                 "median abs diff | max abs diff |")
        L.append("|---|---|---|---|---|---|---|---|")
        for label, g in per.items():
            L.append(f"| {label} | {g['samples']} | {num(g['exporter_median'])} | {num(g['nvidia_smi_median'])} | "
                     f"{num(g['exporter_max'])} | {num(g['nvidia_smi_max'])} | {num(g['abs_diff_median'], 2)} | "
                     f"{num(g['abs_diff_max'], 2)} |")
        L.append("")
        L.append("The exporter's reading is up to one poll old (infer_gpu_sample_age_seconds, in gauges.csv); "
                 "utilization.gpu is NVML's share of the last sample period with a kernel running, so under a "
                 "bursty load two readings a few hundred ms apart can differ by many points.")
        L.append("")
    if bn:
        L.append("## 3. Bench (report.json) and the server's view of each cell")
        L.append("")
        L.append(f"Open loop, constant arrivals, 512/128 tokens, configured warm-up {num(bn['warmup_s'], 0)} s "
                 "(each cell's warm-up lasts until its pipeline is full: the column below), measured "
                 f"{num(bn['duration_s'], 0)} s, 1 repeat. Bench quantiles are exact order statistics over the "
                 "measured requests (clock from the scheduled instant); server = its log's requests that arrived "
                 "inside the cell's measured window (clock from arrival). GPU: "
                 + ("sampled through NVML" if bn.get("gpu_available") else f"not sampled ({bn.get('gpu_note')})")
                 + (f", peak memory {', '.join(f'{k} {v / 2**30:.1f} GiB' for k, v in bn['peak_memory_bytes'].items())}"
                    if bn.get("peak_memory_bytes") else "") + ".")
        L.append("")
        L.append("| cell | req/s | output tok/s | goodput | TTFT p50 bench / server | TTFT p99 bench / server | "
                 "TPOT p50 bench / server | TPOT p99 bench / server | E2E p50 | n bench / server |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for c in bn["cells"]:
            sv = c.get("server", {})
            st, sp = sv.get("ttft", {}), sv.get("tpot", {})
            L.append(f"| {c['cell']} | {num(c['requests_per_second'], 2)} | {num(c['output_tokens_per_second'], 1)} | "
                     f"{num(c['goodput_ratio'], 3)} | {ms(c['ttft'].get('p50'))} / {ms(st.get('p50'))} | "
                     f"{ms(c['ttft'].get('p99'))} / {ms(st.get('p99'))} | {ms2(c['tpot'].get('p50'))} / "
                     f"{ms2(sp.get('p50'))} | {ms2(c['tpot'].get('p99'))} / {ms2(sp.get('p99'))} | "
                     f"{ms(c['e2e'].get('p50'))} | {c.get('requests')} / {sv.get('requests', '–')} |")
        L.append("")
        L.append("Latencies in ms. Degraded cells (client late or CPU-starved): "
                 + (", ".join(c["cell"] for c in bn["cells"] if c.get("degraded")) or "none") + ".")
        L.append("")
        L.append("The load side by side (per second over the measured windows; in flight at their start and end):")
        L.append("")
        L.append("| cell | warm-up used [s] | offered | sent | completed | in flight start / end | overloaded | draining |")
        L.append("|---|---|---|---|---|---|---|---|")
        for c in bn["cells"]:
            L.append(f"| {c['cell']} | {num(c.get('warmup_s'), 1)} | {num(c.get('offered_per_second'), 2)} | "
                     f"{num(c.get('sent_per_second'), 2)} | {num(c['requests_per_second'], 2)} | "
                     f"{c.get('in_flight_at_start')} / {c.get('in_flight_at_end')} | {c.get('overloaded')} | {c.get('draining')} |")
        L.append("")
    if jn:
        L.append("## 4. Bench, request by request: its records joined with the server's log")
        L.append("")
        L.append(f"`--output.requests` wrote {jn['records']} records; {jn['matched']} successes matched a server log "
                 f"entry by `X-Request-Id` ({jn['unmatched_successes']} did not); output tokens equal on "
                 f"{jn['output_tokens_equal']} of {jn['output_tokens_compared']}. Client minus server, per request "
                 "(the client's clock starts at the scheduled instant, the server's at the request's arrival):")
        L.append("")
        L.append("| figure [ms] | n | min | p50 | p99 | max |")
        L.append("|---|---|---|---|---|---|")
        for k, lab in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"), ("arrival_minus_sent", "server arrival − client send")):
            d = jn.get(k, {})
            f = ms2 if k in ("tpot", "arrival_minus_sent") else ms
            L.append(f"| {lab} | {d.get('count', 0)} | {f(d.get('min'))} | {f(d.get('p50'))} | {f(d.get('p99'))} | {f(d.get('max'))} |")
        L.append("")
    with open(out, "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", help="the raw directory run.sh filled")
    ap.add_argument("--out", default="", help="where to write summary.md etc. (default: the raw directory's parent)")
    ap.add_argument("--workload", default="gpu-chat")
    ap.add_argument("--meta", default="", help="one line about the run for the summary's head")
    a = ap.parse_args()
    out = a.out or os.path.dirname(os.path.abspath(a.raw))
    os.makedirs(out, exist_ok=True)
    reqs = read_jsonl(os.path.join(a.raw, "server-requests.jsonl"))
    info = None
    ip = os.path.join(a.raw, "server-info.json")
    if os.path.exists(ip):
        with open(ip) as f:
            info = json.load(f)
    lv = live(a.raw, reqs, a.workload)
    per, rows = nvml(a.raw)
    bn = bench(a.raw, reqs, a.workload)
    jn = join(a.raw, reqs)
    with open(os.path.join(out, "comparison.json"), "w") as f:
        json.dump({"server": info, "live": lv, "nvml": per, "bench": bn, "join": jn, "meta": a.meta}, f, indent=1)
    with open(os.path.join(out, "gauges.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["sample", "phase", "t_ns", "smi_timestamp", "sample_age_s", "gauge",
                                          "exporter", "nvidia_smi"])
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(out, "server_requests.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["request_id", "status", "arrival_ns", "prompt_tokens", "completion_tokens", "ttft_s", "tpot_s",
                    "e2e_s", "engine_ttft_s", "engine_tpot_s"])
        for r in reqs:
            g = server_figures(r)
            w.writerow([r.get("request_id", ""), r.get("status"), r.get("arrival_ns"), r.get("prompt_tokens"),
                        r.get("completion_tokens")] +
                       [("%.6f" % g[k]) if k in g else "" for k in ("ttft", "tpot", "e2e", "engine_ttft",
                                                                   "engine_tpot")])
    write_summary(os.path.join(out, "summary.md"), info, lv, per, bn, a.meta, jn)
    print("compare.py: wrote", os.path.join(out, "summary.md"))


if __name__ == "__main__":
    main()
