"""bf16 matmul loop that loads one GPU for the NVML collector's validation.

Writes READY once the first batch has run and stops when STOP exists, then
prints the achieved rate. It also holds a 4 GiB buffer so that its own
per-process memory is easy to tell apart.
"""
import os
import sys
import time

import torch

ready, stop = sys.argv[1], sys.argv[2]
n = 8192
torch.manual_seed(0)
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
pad = torch.ones(4 << 30, dtype=torch.uint8, device="cuda")
iters, batch = 0, 50
t0 = time.time()
while not os.path.exists(stop):
    for _ in range(batch):
        c = a @ b
    torch.cuda.synchronize()
    iters += batch
    if iters == batch:
        with open(ready, "w") as f:
            f.write(str(os.getpid()))
el = time.time() - t0
print(f"pid {os.getpid()}: {iters} matmuls {n}^3 bf16 in {el:.1f} s: "
      f"{2 * n**3 * iters / el / 1e12:.0f} TFLOP/s, checksum {float(c[0, 0]):.3f}", flush=True)
