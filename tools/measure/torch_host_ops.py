#!/usr/bin/env python3
"""Measures a policy's host phases run as framework operators (PyTorch on the CPU) on this machine, for
kvsim's host implementation profiles (`implementation: {host_ops: framework, host_profile: FILE}`,
docs/scenarios.md, "Host phases as framework operators").

The policy's folder says how its implementation runs each host phase with PyTorch operators
(policies/<name>/torch_cpu.py: the operator sequence of one layer, batched over sequences and KV heads,
and the bytes kvsim's cost model charges the phase). For each phase this script measures, with
PyTorch's default intra-op threads:

1. ops_per_layer: the top-level aten operators one layer issues (PyTorch profiler), for the record.
2. fixed_us: the time of one layer's operator sequence at tiny shapes (a few tokens: the data movement
   is negligible), median of many runs: what each layer pays however little it moves -- Python and
   ATen dispatch, allocation, the intra-op parallel regions.
3. points: at the phase's real shapes (several sizes), the data rate per thread of the rest:
   bytes charged / (time - fixed_us) / threads. For scale, DRAM bandwidth is measured in the same run
   with a PyTorch triad (a = b + s * c over 256 MiB arrays) on the same threads, and each point's
   fraction of it is printed: far below 1, the operators are bound by the cores' work, not by DRAM,
   which is why kvsim scales the rate with the target's cores and clock (capped by its DRAM).

kvsim scales the profile to a target host by a stated rule (docs/cost-model.md, "Host phases as
framework operators"): fixed_us by the ratio of single-core clocks (the `measured_on` host's clock_ghz
over the target's), the data rate by the target's cores and clock, capped by its DRAM bandwidth.

Needs torch (PyPI). Prints YAML (or writes it with --out, atomically).
Usage: python3 tools/measure/torch_host_ops.py --policy ctkvr --measured-on ci-2core [--out FILE]
         [--repeats 21] [--context 98304 --resident 6528 --kv-heads 8 --group 4 --head-dim 128]
"""
import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_policy(name):
    path = os.path.join(ROOT, "policies", name, "torch_cpu.py")
    if not os.path.exists(path):
        sys.exit(f"torch_host_ops.py: --policy {name}: {path} does not exist (a policy with host phases "
                 "says there how its implementation runs them with PyTorch operators)")
    spec = importlib.util.spec_from_file_location(f"{name}_torch_cpu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def median_time(fn, repeats, inner=1):
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t) / inner)
    return statistics.median(samples)


def dram_bandwidth(repeats):
    n = 64 << 20  # 64 Mi fp32 = 256 MiB per array
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    t = median_time(lambda: torch.add(b, c, alpha=3.0, out=a), repeats)
    return 3 * n * 4 / t


def count_ops(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    # Top-level aten operators: the ones the Python code calls (nested ones run inside them).
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    top = [e for e in events if not any(o is not e and o.time_range.start <= e.time_range.start and
                                        e.time_range.end <= o.time_range.end and o.name.startswith("aten::")
                                        for o in events)]
    return len(top)


def measure(args):
    """The median over --runs whole runs of every figure (a shared machine varies by tens of percent
    between runs, and a run's figures vary together)."""
    runs = [measure_once(args) for _ in range(args.runs)]
    dram = statistics.median(r[0] for r in runs)
    out = runs[0][1]
    for name, m in out.items():
        m["fixed_us"] = statistics.median(r[1][name]["fixed_us"] for r in runs)
        m["points"] = [tuple(statistics.median(r[1][name]["points"][i][j] for r in runs) if j else p[0]
                             for j in range(len(p)))
                       for i, p in enumerate(m["points"])]
    return dram, out


def measure_once(args):
    pol = load_policy(args.policy)
    n = args.context - args.resident
    recalls = [int(x) for x in args.recall.split(",")]
    rho_primes = [int(x) for x in args.rho_prime.split(",")]
    dram = dram_bandwidth(args.repeats)
    tiny = pol.phases(1, args.kv_heads, args.group, args.head_dim, 64, 16, 8)
    out = {}
    for name, (fn, _) in tiny.items():
        out[name] = {"ops_per_layer": count_ops(fn), "fixed_us": median_time(fn, args.repeats, 20) * 1e6,
                     "points": []}
    # The rerank scales with the recalled ids (rho C' alpha: C' = 2..14 at rho = 1280, alpha = 0.5),
    # the attention with rho'.
    shapes = [(lr, rho_primes[0]) for lr in recalls] + [(recalls[0], rp) for rp in rho_primes[1:]]
    for lr, rp in shapes:
        ph = pol.phases(1, args.kv_heads, args.group, args.head_dim, n, lr, rp)
        for name, (fn, bytes_) in ph.items():
            if any(p[0] == bytes_ for p in out[name]["points"]):
                continue
            t = median_time(fn, args.repeats)
            rest = max(t - out[name]["fixed_us"] * 1e-6, 1e-9)
            out[name]["points"].append((bytes_, bytes_ / rest / torch.get_num_threads() / 1e9, bytes_ / (dram * rest),
                                        t * 1e6))
    return dram, out


def to_yaml(args, dram, out):
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [
        f"# Measured by tools/measure/torch_host_ops.py --policy {args.policy} --measured-on {args.measured_on}"
        f" --repeats {args.repeats} --runs {args.runs} (every figure the median of the runs)",
        f"# on {cpu}, torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, Python "
        f"{sys.version.split()[0]}; one layer of policies/{args.policy}/torch_cpu.py at batch 1,"
        f" {args.kv_heads} KV heads x {args.group} queries, head_dim {args.head_dim}, {args.context - args.resident}"
        " offloaded tokens.",
        f"# DRAM ceiling measured in the same run (torch triad, 3 x 256 MiB): {dram / 1e9:.1f} GB/s.",
        "schema: kvsim.host_profile/1",
        f"name: {args.policy}-torch-cpu",
        f"framework: \"torch {torch.__version__} CPU operators\"",
        f"measured_on: {args.measured_on}   # the host whose clock_ghz the fixed costs scale from",
        f"threads: {torch.get_num_threads()}",
        f"dram_gbs: {dram / 1e9:.2f}       # measured: the ceiling the efficiencies are fractions of",
        "phases:",
    ]
    for name, m in out.items():
        lines.append(f"  {name}:")
        lines.append(f"    ops_per_layer: {m['ops_per_layer']}   # measured: top-level aten operators of one layer")
        lines.append(f"    fixed_us: {m['fixed_us']:.1f}   # measured: one layer at tiny shapes (16 ids, 8 chosen)")
        pts = ", ".join(f"[{b}, {r:.4g}]" for b, r, _, _ in sorted(out[name]["points"]))
        lines.append(f"    points: [{pts}]   # measured: [bytes charged per layer, GB/s per thread]")
        times = ", ".join(f"{t:.0f}" for _, _, _, t in sorted(out[name]["points"]))
        effs = ", ".join(f"{e:.3f}" for _, _, e, _ in sorted(out[name]["points"]))
        lines.append(f"    # layer time at those points, us: {times}; fraction of the DRAM ceiling: {effs}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True)
    ap.add_argument("--measured-on", required=True, help="kvsim host name of this machine (scenarios/hosts/)")
    ap.add_argument("--out")
    ap.add_argument("--repeats", type=int, default=21, help="timed repeats per figure (median)")
    ap.add_argument("--runs", type=int, default=3, help="whole runs; every figure is the median over them")
    ap.add_argument("--context", type=int, default=98304)
    ap.add_argument("--resident", type=int, default=6528, help="tokens kept on the GPU (init + local)")
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--recall", default="2560,1280,5120,8960", help="recalled ids per KV head (first: the default)")
    ap.add_argument("--rho-prime", default="512,128,1024,2048", help="chosen tokens per KV head (first: the default)")
    args = ap.parse_args()
    if args.repeats < 3:
        sys.exit(f"torch_host_ops.py: --repeats {args.repeats}: at least 3")
    if args.runs < 1:
        sys.exit(f"torch_host_ops.py: --runs {args.runs}: at least 1")
    text = to_yaml(args, *measure(args))
    if not args.out:
        sys.stdout.write(text)
        return
    d = os.path.dirname(os.path.abspath(args.out))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".torch_host_ops.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
