#!/usr/bin/env python3
"""Measured ceilings of the GPU at hand, through PyTorch: what the GPU kit's kernels are fractions of.

The kit (`kvsim validate --device cuda --kit`) divides by the datasheet's ceilings (the library's
scenarios/hardware/<gpu>.yaml). This script measures the same limits on the card in the same session,
so a report can say both "x% of the datasheet" and "x% of what this card did today":
  - HBM: a device-to-device copy of 2 GiB (bytes read + written, per second);
  - fp32 CUDA-core and bf16 tensor GEMM (8192^3; TF32 off for the fp32 one);
  - pinned host-to-device and device-to-host copies of 1 GiB.
Each figure is the median of 10 timed repetitions after 3 warm-ups, timed with CUDA events.
Usage: gpu_ceilings.py [OUT.json]   (JSON on stdout too)
"""
import json
import statistics
import sys

import torch


def timed(fn, reps=10, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return statistics.median(out)


def main():
    dev = torch.device("cuda")
    p = torch.cuda.get_device_properties(dev)
    res = {"device": p.name, "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory,
           "torch": torch.__version__, "cuda": torch.version.cuda, "method": __doc__.split("\n")[0]}
    n = 2 << 30
    src = torch.empty(n, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    res["hbm_copy_gbs"] = 2 * n / timed(lambda: dst.copy_(src)) / 1e9
    del src, dst
    m = 8192
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dt in (("fp32_gemm_tflops", torch.float32), ("bf16_gemm_tflops", torch.bfloat16)):
        a = torch.randn(m, m, device=dev, dtype=dt)
        b = torch.randn(m, m, device=dev, dtype=dt)
        res[name] = 2 * m**3 / timed(lambda: torch.mm(a, b)) / 1e12
        del a, b
    h = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    d = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    res["h2d_pinned_gbs"] = (1 << 30) / timed(lambda: d.copy_(h, non_blocking=True)) / 1e9
    res["d2h_pinned_gbs"] = (1 << 30) / timed(lambda: h.copy_(d, non_blocking=True)) / 1e9
    text = json.dumps(res, indent=1)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
