#!/usr/bin/env python3
"""Per-case summary of `kvsim validate --device emu --predict GPU --format json` outputs, one column per
file: the errors (predicted / measured - 1) of each case's points, and the share within 30% and 2x.
Usage: python3 summarize.py h200-rule1.json h200.json"""
import json
import sys
from collections import OrderedDict

runs = [json.load(open(f)) for f in sys.argv[1:]]
print("| case | " + " | ".join(sys.argv[1:]) + " |")
print("|---|" + "---|" * len(runs))
cases = OrderedDict()
for r in runs:
    for p in r["points"]:
        cases.setdefault(p["case"], None)
for c in cases:
    cells = []
    for r in runs:
        errs = [p["error"] for p in r["points"] if p["case"] == c and "error" in p]
        cells.append(" ".join(f"{100 * e:+.0f}%" for e in errs) if errs else "-")
    print(f"| {c} | " + " | ".join(cells) + " |")
for f, r in zip(sys.argv[1:], runs):
    e = [abs(p["error"]) for p in r["points"] if "error" in p]
    w30 = sum(x <= 0.30 for x in e)
    w2 = sum(1 for p in r["points"] if "error" in p and 0.5 <= p["predicted_s"] / p["measured_s"] <= 2)
    e.sort()
    med = (e[len(e) // 2] if len(e) % 2 else 0.5 * (e[len(e) // 2 - 1] + e[len(e) // 2])) if e else 0
    print(f"\n{f}: {len(e)} points, {w30} within 30% ({100 * w30 / len(e):.0f}%), {w2} within 2x, median |error| {100 * med:.1f}%")
