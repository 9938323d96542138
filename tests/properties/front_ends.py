#!/usr/bin/env python3
"""The same answer through every front end (docs/robustness.md, "Properties"): on random scenarios drawn
from the library, `kvsim plan --format json`, the Python module's kvsim.plan, a one-point `kvsim sweep`
and `kvsim serve` with one request (no other request to interfere) give each policy the same TPOT, TTFT
and batch.

  plan (CLI) == kvsim.plan               exactly: the same JSON
  sweep, one point                       the plan's numbers to 1e-12 (the CSV prints doubles in full)
  serve, one request                     TTFT and TPOT within 1 % of the plan at batch 1 (serve reads its
                                         steps from tables interpolated between exact steps,
                                         docs/serving.md); CHESS and SEKV within 15 %, whose steps jump
                                         with the prompt where an interpolated table cannot follow

Usage: front_ends.py KVSIM_BINARY [CASES [SEED]]  (PYTHONPATH must hold build/python; ctest sets it).
A failure prints the scenario and the seed; rerun with that seed to reproduce it.
"""
import csv
import json
import os
import random
import subprocess
import sys
import tempfile

import kvsim

SLOW_STEPS = {"chess": 0.15, "sekv": 0.15}  # serve's tolerance where a policy's step jumps (docs/serving.md)


def library(kind):
    d = os.path.join(kvsim.library_dir(), kind)
    return sorted(f[:-5] for f in os.listdir(d) if f.endswith(".yaml"))


def draw(rng):
    """One scenario's text, or None when the draw is not a valid scenario (the CLI says why)."""
    prompt = rng.choice([1024, 2048, 4096, 8192, 16384]) + rng.randrange(0, 1024)
    output = rng.randrange(2, 129)
    weight = rng.choice(["native", "native", "fp8", "fp32"])
    return {
        "hardware": rng.choice(library("hardware")),
        "host": rng.choice(library("hosts")),
        "model": rng.choice(library("models")),
        "workload": dict({"context_tokens": prompt, "output_tokens": output, "batch": rng.randrange(1, 9),
                          "tensor_parallel": rng.choice([1, 1, 2])},
                         **({} if weight == "native" else {"weight_dtype": weight})),
        "serving": {"arrival": "poisson", "rate": 1, "requests": 1, "seed": 1,
                    "prompt_tokens": prompt, "output_tokens": output},
    }


def run(kvsim_bin, *args):
    return subprocess.run([kvsim_bin, *args], capture_output=True, text=True)


def near(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b))


COMPARED = {"sweep": 0, "serve": 0}  # feasible policy results compared, for the summary line


def check(kvsim_bin, scenario, tmp):
    """Returns a list of disagreements (empty: every front end agrees)."""
    path = os.path.join(tmp, "scenario.yaml")
    with open(path, "w") as f:
        json.dump(scenario, f)  # JSON is YAML
    cli = run(kvsim_bin, "plan", path, "--format", "json")
    if cli.returncode != 0:
        return None  # not a valid scenario (tensor parallelism, dtype or context): draw again
    plan = json.loads(cli.stdout)
    bad = []
    if kvsim.plan(path) != plan:
        bad.append("kvsim.plan differs from `kvsim plan --format json`")
    results = {r["policy"]: r for r in plan["results"]}

    spec = os.path.join(tmp, "sweep.yaml")
    with open(spec, "w") as f:
        json.dump({"scenario": path, "axes": [{"workload.batch": [scenario["workload"]["batch"]]}]}, f)
    out = os.path.join(tmp, "sweep.csv")
    if os.path.exists(out):
        os.remove(out)
    sw = run(kvsim_bin, "sweep", spec, "-o", out)
    if sw.returncode != 0:
        bad.append("sweep failed: " + sw.stderr.strip())
    else:
        with open(out) as f:
            for row in csv.DictReader(f):
                r = results[row["policy"]]
                if (row["feasible"] == "1") != r["feasible"]:
                    bad.append(f"{row['policy']}: sweep feasible {row['feasible']}, plan {r['feasible']}")
                elif r["feasible"]:
                    COMPARED["sweep"] += 1
                    for col, key, scale in (("tpot_s", "tpot_ms", 1e-3), ("ttft_s", "ttft_ms", 1e-3),
                                            ("throughput_tok_s", "throughput_tok_s", 1)):
                        if not near(float(row[col]), r[key] * scale, 1e-12):
                            bad.append(f"{row['policy']}: sweep {col} {row[col]}, plan {r[key] * scale}")

    # serve: one request, against the plan at batch 1 (the request decodes alone).
    one = dict(scenario, workload=dict(scenario["workload"], batch=1))
    with open(path, "w") as f:
        json.dump(one, f)
    at1 = {r["policy"]: r for r in json.loads(run(kvsim_bin, "plan", path, "--format", "json").stdout)["results"]}
    sv = run(kvsim_bin, "serve", path, "--format", "json")
    if sv.returncode != 0:
        return bad + ["serve failed: " + sv.stderr.strip()]
    for p in json.loads(sv.stdout)["policies"]:
        r = at1[p["policy"]]
        if not r["feasible"]:
            continue
        COMPARED["serve"] += 1
        rel = SLOW_STEPS.get(p["policy"], 0.01)
        if p["finished"] != 1:
            bad.append(f"{p['policy']}: serve finished {p['finished']} of 1 request")
            continue
        for name, got, want in (("ttft", p["ttft_s"]["mean"], r["ttft_ms"] / 1e3),
                                ("tpot", p["tpot_s"]["mean"], r["tpot_ms"] / 1e3)):
            if not near(got, want, rel):
                bad.append(f"{p['policy']}: serve {name} {got:.6g} s, plan at batch 1 {want:.6g} s "
                           f"({abs(got / want - 1):.2%} apart, allowed {rel:.0%})")
    return bad


def main():
    kvsim_bin = sys.argv[1]
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20261125
    rng = random.Random(seed)
    done, failed = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        while done < cases:
            scenario = draw(rng)
            bad = check(kvsim_bin, scenario, tmp)
            if bad is None:
                continue
            done += 1
            if bad:
                failed += 1
                print(f"case {done} (seed {seed}):\n{json.dumps(scenario, indent=2)}\n  " + "\n  ".join(bad))
    print(f"front ends: {cases} scenarios x every policy ({COMPARED['sweep']} feasible results through the "
          f"sweep, {COMPARED['serve']} through serve), {failed} disagreeing (seed {seed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
