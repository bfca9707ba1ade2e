"""Copies a pinned 1 GiB buffer over PCIe in a loop (h2d: host to GPU, the
GPU's PCIe rx; d2h: GPU to host, its tx) and prints the payload rate it
achieved, the truth for infer_gpu_pcie_bytes_per_second.

Writes READY after two warm-up copies and stops when STOP exists."""
import os
import sys
import time

import torch

ready, stop, direction = sys.argv[1], sys.argv[2], sys.argv[3]
n = 1 << 30
host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
host.fill_(7)
dev = torch.empty(n, dtype=torch.uint8, device="cuda")
copies, t0, c0 = 0, None, 0
while not os.path.exists(stop):
    if direction == "h2d":
        dev.copy_(host, non_blocking=True)
    else:
        host.copy_(dev, non_blocking=True)
    torch.cuda.synchronize()
    copies += 1
    if copies == 2:
        t0, c0 = time.time(), copies
        with open(ready, "w") as f:
            f.write(str(os.getpid()))
el = time.time() - t0
rate = (copies - c0) * n / el
print(f"{direction} pid {os.getpid()}: {copies - c0} copies of 1 GiB in {el:.2f} s: "
      f"{rate:.4g} B/s = {rate / 1e6:.0f} MB/s = {rate / 2**20:.0f} MiB/s", flush=True)
