#!/usr/bin/env python3
"""The kernel time model's predictions beside a GPU kit run, without re-running the emulator.

The emulator's counts do not depend on the GPU, so `kvsim validate --device emu --predict GPU --format
json` is run once, on any machine, and committed (docs/validation/runs/<date>-time-model/<gpu>.json).
On the day a GPU is lent, tools/dev/gpu-session.sh runs the kit, which writes a measured calibration;
this script sets each predicted point beside the kit's time for it, the way `--predict` does:
measured seconds = the point's work at the datasheet ceilings (`bound_s`) / the kit's efficiency.

Usage: compare_predictions.py PREDICTIONS.json MEASURED.yaml [OUT.md]
Standard library only (the lent machine has none of kvsim's Python dependencies). It reads the
calibration files kvsim writes (one `- kind:` block per curve, `points: [[x, e], ...]` on one line).
"""
import json
import re
import sys


def read_curves(path):
    curves, cur = [], None
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*- kind: (\S+)", line)
            if m:
                cur = {"kind": m.group(1), "phase": None, "ceiling": None, "points": []}
                curves.append(cur)
                continue
            if cur is None:
                continue
            m = re.match(r"\s+(phase|ceiling): (\S+)", line)
            if m:
                cur[m.group(1)] = m.group(2)
                continue
            m = re.match(r"\s+points: (\[\[.*\]\])", line)
            if m:
                cur["points"] = json.loads(m.group(1))
    return curves


def efficiency_at(curves, p):
    for c in curves:
        if c["kind"] != p["kind"] or c["ceiling"] != p["ceiling"]:
            continue
        if (c["phase"] is None) != bool(p["kind_wide"]):
            continue
        if c["phase"] is not None and c["phase"] != p["phase"]:
            continue
        for x, e in c["points"]:
            if abs(x - p["x"]) <= 1e-6 * max(1.0, abs(p["x"])):
                return e
    return None


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    pred = json.load(open(sys.argv[1]))
    curves = read_curves(sys.argv[2])
    rows, errs = [], []
    for p in pred["points"]:
        e = efficiency_at(curves, p)
        meas = p["bound_s"] / e if e else None
        err = p["predicted_s"] / meas - 1 if meas else None
        if err is not None:
            errs.append(err)
        rows.append(f"| {p['case']} | {p['size']:g} | {p['bound']} | {1e6 * p['predicted_s']:.4g} | "
                    f"{p['fraction_of_bound']:.3g} | {'-' if meas is None else f'{1e6 * meas:.4g}'} | "
                    f"{'-' if err is None else f'{100 * err:+.3g}%'} |")
    w30 = sum(abs(x) <= 0.30 for x in errs)
    w2 = sum(0.5 <= 1 + x <= 2 for x in errs)
    out = [f"Predictions `{sys.argv[1]}` ({pred['gpu']}) against the kit's `{sys.argv[2]}`: {len(errs)} points, "
           f"{w30} within 30%, {w2} within 2x.", "",
           "| case | size | bound | predicted us | of bound | measured us | error |", "|---|---|---|---|---|---|---|"]
    text = "\n".join(out + rows) + "\n"
    if len(sys.argv) == 4:
        with open(sys.argv[3], "w") as f:
            f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
