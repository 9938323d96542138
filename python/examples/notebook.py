"""A notebook-style tour of kvsim from Python (docs/python.md): plan a model on two GPUs, sweep a
policy's budget, plot its Pareto front, and run a capacity search. Run it as a script or paste the cells
into a notebook; `python3 python/examples/notebook.py OUTDIR` writes its files to OUTDIR (the tests run
it). The plot needs matplotlib; without it the front is still written as CSV.
"""
import os
import sys

import kvsim

out = sys.argv[1] if len(sys.argv) > 1 else "."

# %% 1. Plan Llama 3.1 8B at 32K context on two H100s (tensor parallel), every batch that fits.
scenario = {
    "hardware": "h100-sxm",
    "model": "llama-3.1-8b",
    "workload": {"context_tokens": 32768, "output_tokens": 512, "batch": "max", "tensor_parallel": 2},
    "policies": ["full", "quest", {"name": "snapkv", "budget_tokens": 2048}],
}
plan = kvsim.plan_frame(scenario)
print(plan[["policy", "batch", "tpot_ms", "ttft_ms", "throughput_tok_s"]].to_string(index=False))

# %% 2. Sweep Quest's token budget and the batch at 32K on one GPU.
spec = {
    "scenario": os.path.join(kvsim.library_dir(), "default.yaml"),
    "policies": ["quest"],
    "axes": [{"workload.context_tokens": [32768]},
             {"workload.batch": [1, 4, 16, 64]},
             {"quest.budget_tokens": {"from": 256, "to": 16384, "factor": 2}}],
}
rows = kvsim.sweep(spec)
feasible = rows[rows["feasible"] == 1]

# %% 3. Its Pareto front: the lowest TPOT for each throughput (a point no other beats on both).
front = []
for _, r in feasible.sort_values(["tpot_s", "throughput_tok_s"], ascending=[True, False]).iterrows():
    if not front or r["throughput_tok_s"] > front[-1]["throughput_tok_s"]:
        front.append(r)
print(f"pareto front: {len(front)} of {len(feasible)} feasible points")
import pandas  # noqa: E402 (kvsim's tabular results are pandas DataFrames)
pandas.DataFrame(front)[["workload.batch", "quest.budget_tokens", "tpot_s", "throughput_tok_s"]].to_csv(
    os.path.join(out, "pareto.csv"), index=False)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.scatter(feasible["tpot_s"] * 1e3, feasible["throughput_tok_s"], s=8, alpha=0.4, label="points")
    ax.plot([r["tpot_s"] * 1e3 for r in front], [r["throughput_tok_s"] for r in front], "-o", label="front")
    ax.set_xlabel("TPOT (ms)")
    ax.set_ylabel("throughput (tokens/s per GPU)")
    ax.legend()
    fig.savefig(os.path.join(out, "pareto.png"), dpi=100)
except ImportError:
    print("(matplotlib not installed: pareto.png skipped)")

# %% 4. How many GPUs does each policy need for 4 requests/s of 8K-token prompts at p99 TPOT <= 50 ms?
serving = {
    "hardware": "h100-sxm", "model": "llama-3.1-8b",
    "workload": {"context_tokens": 8192, "output_tokens": 256},
    "policies": ["full", "snapkv", "ctkvr"],
    "serving": {"arrival": "poisson", "rate": 4, "requests": 500, "prompt_tokens": 8192, "output_tokens": 256},
}
gpus = kvsim.capacity(serving, rate=4, slo_ttft_p99=2.0, slo_tpot_p99=0.05, tensor_parallel=[1])
print(gpus[["policy", "gpus", "replicas", "ttft_p99_s", "tpot_p99_s"]].to_string(index=False))
