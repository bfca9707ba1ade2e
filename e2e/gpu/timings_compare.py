#!/usr/bin/env python3
"""Join the bench's request records with the engine's log by X-Request-Id.

Usage: timings_compare.py REQUESTS.jsonl SERVER-REQUESTS.jsonl

For every measured streamed request that succeeded: was it decomposed (the
record's server_timings), and does the exporter's client_overhead (the
client's TTFT less the engine's queue and TTFT, as the engine reported
them in its answer) equal the client's TTFT less the engine's TTFT taken
from the engine's own log (engine_first_ns less scheduled_ns, or less
submit_ns where the engine knows no scheduling instant, as the answer's
metrics object says)? Prints a Markdown summary. Standard library only.
"""

import json
import sys


def quantile(xs, q):
    if not xs:
        return float("nan")
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    recs = [r for r in read_jsonl(sys.argv[1]) if r.get("measured") and r.get("outcome") == "success"]
    log = {r["request_id"]: r for r in read_jsonl(sys.argv[2]) if r.get("request_id")}
    joined, decomposed, diffs, overheads, queues, ttfts, client_ttft = 0, 0, [], [], [], [], []
    results = {}
    for r in recs:
        srv = log.get(r.get("id"))
        if srv is None or srv.get("status") != "success":
            continue
        joined += 1
        res = r.get("server_timings", "absent")
        results[res] = results.get(res, 0) + 1
        if res != "decomposed" or r.get("client_overhead") is None or r.get("ttft") is None:
            continue
        decomposed += 1
        origin = srv.get("scheduled_ns") or srv.get("submit_ns")
        engine_share = (srv["engine_first_ns"] - srv["submit_ns"]) / 1e9  # queue (if any) and TTFT
        joined_overhead = r["ttft"] - engine_share
        overheads.append(r["client_overhead"])
        diffs.append(r["client_overhead"] - joined_overhead)
        client_ttft.append(r["ttft"])
        ttfts.append((srv["engine_first_ns"] - origin) / 1e9)
        if srv.get("scheduled_ns"):
            queues.append((srv["scheduled_ns"] - srv["submit_ns"]) / 1e9)
    ms = lambda x: "%.3f" % (1000 * x)
    print("| figure | value |")
    print("| --- | --- |")
    print("| measured successful requests (records) | %d |" % len(recs))
    print("| joined with the engine's log by X-Request-Id | %d |" % joined)
    print("| decomposed (the record's server_timings) | %d (%.2f%%) |" % (decomposed, 100.0 * decomposed / max(joined, 1)))
    print("| server_timings results | %s |" % ", ".join("%s %d" % kv for kv in sorted(results.items())))
    print("| client TTFT p50 / p99 (ms) | %s / %s |" % (ms(quantile(client_ttft, 0.5)), ms(quantile(client_ttft, 0.99))))
    print("| engine TTFT from the log p50 / p99 (ms) | %s / %s |" % (ms(quantile(ttfts, 0.5)), ms(quantile(ttfts, 0.99))))
    if queues:
        print("| engine queue from the log p50 / p99 (ms) | %s / %s |" % (ms(quantile(queues, 0.5)), ms(quantile(queues, 0.99))))
    print("| exporter's client overhead p50 / p99 (ms) | %s / %s |" % (ms(quantile(overheads, 0.5)), ms(quantile(overheads, 0.99))))
    print("| client TTFT less the log's engine share, p50 (ms) | %s |" % ms(quantile([o - d for o, d in zip(overheads, diffs)], 0.5)))
    print("| per request, exporter's overhead less the joined one: p50 / max abs (ms) | %s / %s |"
          % (ms(quantile(diffs, 0.5)), ms(max((abs(d) for d in diffs), default=float("nan")))))


if __name__ == "__main__":
    main()
