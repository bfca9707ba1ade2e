#!/usr/bin/env python3
"""Compares the bench's efficiency figures with figures computed by hand.

For each repeat of report.json: its measured span is [started + warmup,
started + warmup + window_seconds] (the repeat's wall-clock start, its
warm-up and its windows). Over that span:
  - nvidia-smi's instantaneous power (power.csv: unix_ms, W, every 100 ms)
    integrated by trapezoids, the samples interpolated at the span's ends;
  - the output tokens the server's own request log (server.py --request-log)
    put in the span: each successful request's completion tokens spread
    evenly between its first and last token written to the socket.
Prints a Markdown table: the bench's energy, joules per output token and
cost per million tokens beside the hand's, and their differences.

  efficiency_compare.py report.json power.csv server-requests.jsonl
"""
import bisect
import datetime
import json
import sys


def parse_time(s):
    # RFC 3339 with nanoseconds: Python takes microseconds at most.
    s = s.replace("Z", "+00:00")
    head, _, tz = s.partition("+")
    if "." in head:
        base, frac = head.split(".")
        head = base + "." + frac[:6]
    return datetime.datetime.fromisoformat(head + "+" + (tz or "00:00")).timestamp()


def integrate(ts, ws, a, b):
    """Trapezoids over [a, b] of the samples (ts in s), interpolated at a, b."""
    def at(t):
        i = bisect.bisect_left(ts, t)
        if i == 0 or i == len(ts):
            raise ValueError("the power samples do not cover %.3f" % t)
        t0, t1, w0, w1 = ts[i - 1], ts[i], ws[i - 1], ws[i]
        return w0 + (w1 - w0) * (t - t0) / (t1 - t0)
    pts = [(a, at(a))] + [(t, w) for t, w in zip(ts, ws) if a < t < b] + [(b, at(b))]
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(pts, pts[1:]))


def tokens_in(reqs, a, b):
    n = 0.0
    for first, last, k in reqs:
        if k <= 0:
            continue
        if k == 1 or last <= first:
            n += k if a <= first < b else 0
            continue
        step = (last - first) / (k - 1)
        # tokens i = 0..k-1 at first + i*step within [a, b)
        lo = max(0, int(-(-(a - first) // step)))  # ceil
        hi = min(k - 1, int((b - first) // step) if b > first else -1)
        if first + hi * step >= b:
            hi -= 1
        if hi >= lo:
            n += hi - lo + 1
    return n


def main():
    report, power, log = sys.argv[1:4]
    rep = json.load(open(report))
    ts, ws = [], []
    for line in open(power).read().splitlines()[1:]:
        ms, w = line.split(",")
        ts.append(int(ms) / 1000)
        ws.append(float(w))
    reqs = []
    for line in open(log):
        r = json.loads(line)
        if r.get("status") == "success" and r.get("first_token_ns") and r.get("last_token_ns"):
            reqs.append((r["first_token_ns"] / 1e9, r["last_token_ns"] / 1e9, r.get("completion_tokens", 0)))
    print("| cell | span (s) | bench energy (J), NVML counter | nvidia-smi power integrated (J) | diff | bench output tokens | server-log tokens in span | diff | bench J/token | hand J/token | diff | bench USD per M tokens | hand USD per M tokens |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in rep["cells"]:
        for r in c["repeats"]:
            s = r["stats"]
            e = s.get("efficiency") or {}
            a = parse_time(r["started"]) + r["warmup_seconds"]
            b = a + s["window_seconds"]
            hand_j = integrate(ts, ws, a, b)
            hand_tok = tokens_in(reqs, a, b)
            bj, btok, bjt = e.get("energy_joules"), s.get("output_tokens"), e.get("joules_per_output_token")
            hour = e.get("gpu_hour_usd")
            hand_cost = (hour * (b - a) / 3600 / hand_tok * 1e6) if hour and hand_tok else None
            def pct(x, y):
                return "%+.2f%%" % (100 * (x / y - 1)) if x is not None and y else "n/a"
            hand_jt = hand_j / hand_tok if hand_tok else None
            print("| %s | %.1f | %s | %.1f | %s | %s | %.0f | %s | %s | %s | %s | %s | %s |" % (
                c["key"], b - a, "%.1f" % bj if bj is not None else "null", hand_j, pct(bj, hand_j),
                "%.0f" % btok if btok is not None else "null", hand_tok, pct(btok, hand_tok),
                "%.4f" % bjt if bjt is not None else "null", "%.4f" % hand_jt if hand_jt else "n/a", pct(bjt, hand_jt),
                "%.4f" % e["cost_per_million_output_tokens_usd"] if e.get("cost_per_million_output_tokens_usd") is not None else "null",
                "%.4f" % hand_cost if hand_cost else "n/a"))


if __name__ == "__main__":
    main()
