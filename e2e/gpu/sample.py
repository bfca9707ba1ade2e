#!/usr/bin/env python3
"""Sample the exporter's /metrics and nvidia-smi at the same instants.

Every --interval seconds, one instant is taken, then the /metrics scrape and
the nvidia-smi query are started together (two threads). Each sample's
/metrics text goes to OUT/samples/NNN.prom, its nvidia-smi line and timings
to OUT/samples.csv. When --stop-file appears (or --max-seconds pass), a final
scrape is taken in the text format (OUT/final.prom) and in the protobuf format
(OUT/final.pb, which holds the native histograms that compare.py reads), with
one last nvidia-smi line. Standard library only.
"""

import argparse
import csv
import os
import subprocess
import threading
import time
import urllib.request

SMI_FIELDS = "timestamp,memory.used,power.draw,temperature.gpu,utilization.gpu,clocks.sm"
PROTO_ACCEPT = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"


def scrape(url, accept=None, timeout=10):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read(), r.headers.get("Content-Type", "")


def smi():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=" + SMI_FIELDS, "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        return (p.stdout.strip().splitlines() or [""])[0] if p.returncode == 0 else "error: " + p.stderr.strip()[:200]
    except FileNotFoundError:
        return "absent"
    except subprocess.TimeoutExpired:
        return "timeout"


def sample(url, out_dir, i, phase, accept=None):
    res = {}

    def run_smi():
        res["smi_start_ns"] = time.time_ns()
        res["smi"] = smi()
        res["smi_end_ns"] = time.time_ns()

    t_ns = time.time_ns()
    th = threading.Thread(target=run_smi)
    th.start()
    m_start = time.time_ns()
    try:
        body, _ = scrape(url)
        name = f"samples/{i:03d}.prom"
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(body)
    except Exception as e:  # noqa: BLE001
        name = "error: " + repr(e)[:200]
    m_end = time.time_ns()
    th.join()
    return {"i": i, "phase": phase, "t_ns": t_ns, "metrics_start_ns": m_start, "metrics_end_ns": m_end,
            "metrics_file": name, "smi_start_ns": res["smi_start_ns"], "smi_end_ns": res["smi_end_ns"],
            "smi": res["smi"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metrics-url", default="http://127.0.0.1:9750/metrics")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--max-seconds", type=float, default=300)
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out_dir, "samples"), exist_ok=True)
    cols = ["i", "phase", "t_ns", "metrics_start_ns", "metrics_end_ns", "metrics_file", "smi_start_ns",
            "smi_end_ns", "smi"]
    with open(os.path.join(a.out_dir, "samples.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        start = time.monotonic()
        i = 0
        while not os.path.exists(a.stop_file) and time.monotonic() - start < a.max_seconds:
            w.writerow(sample(a.metrics_url, a.out_dir, i, "live"))
            f.flush()
            i += 1
            nxt = start + i * a.interval
            while time.monotonic() < nxt and not os.path.exists(a.stop_file):
                time.sleep(0.05)
        w.writerow(sample(a.metrics_url, a.out_dir, i, "final"))
    try:
        body, ctype = scrape(a.metrics_url)
        with open(os.path.join(a.out_dir, "final.prom"), "wb") as f:
            f.write(body)
        body, ctype = scrape(a.metrics_url, PROTO_ACCEPT)
        if "protobuf" in ctype:
            with open(os.path.join(a.out_dir, "final.pb"), "wb") as f:
                f.write(body)
        else:
            print("sample.py: the exporter did not answer in protobuf:", ctype)
    except Exception as e:  # noqa: BLE001
        print("sample.py: final scrape failed:", repr(e))


if __name__ == "__main__":
    main()
