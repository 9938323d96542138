#!/usr/bin/env python3
"""Regenerates the measured parts of docs/reproductions.md from `kvsim reproduce --format json`: the
per-paper summary table, the summary line, and each paper's "Published against predicted" tables.
The prose around them is written by hand; only the blocks between the markers below are replaced.

    tools/dev/update-reproductions.py [--kvsim build/kvsim] [--doc docs/reproductions.md]

Markers: `<!-- reproduce:summary -->` ... `<!-- /reproduce:summary -->`, and
`<!-- reproduce:PAPER -->` ... `<!-- /reproduce:PAPER -->` for each paper. Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def fmt_value(v, decimals=None):
    if v == "OOM":
        return "OOM"
    if decimals is not None:
        return f"{v:.{decimals}f}"
    return f"{v:.5g}"


def error_text(r):
    if r["published"] == "OOM" or r["predicted"] == "OOM":
        return "both OOM" if r["matches_exactly"] else "OOM mismatch"
    s = f"{100 * r['relative_error']:+.1f}%"
    if r["exact"]:
        s += " exact" if r["matches_exactly"] else " NOT EXACT"
    if r.get("approximate"):
        s += f" (printed '{r['printed']}')"
    if not r.get("comparable", True):
        s += " (not comparable)"
    return s


def paper_tables(rows):
    out, current = [], None
    for r in rows:
        if r["file"] != current:
            current = r["file"]
            rel = current[current.find("scenarios/"):] if "scenarios/" in current else current
            out += ["", f"`{rel}`", "", "| source | row | metric | context | output | published | predicted | error |",
                    "|---|---|---|---:|---:|---:|---:|---:|"]
        metric = r["metric"] + (" " + ", ".join(r["phases"]) if r["metric"] == "phase" else "")
        pred = "OOM" if r["predicted"] == "OOM" else fmt_value(r["predicted"])
        out.append(f"| {r['source']} | {r['row']} | {metric} [{r['unit']}] | {r['context_tokens']} | "
                   f"{r['output_tokens']} | {fmt_value(r['published'], r['published_decimals'])} | {pred} | "
                   f"{error_text(r)} |")
    return out[1:]


def summary_table(rows):
    out = ["| paper | figures | exact memory figures matched | approximate memory figures ('around N'): median abs. error | "
           "OOM rows agreeing | time rows: median abs. error (range) | peak-memory rows: median abs. error (range) |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for paper in sorted({r["paper"] for r in rows}):
        rs = [r for r in rows if r["paper"] == paper]
        exact = [r for r in rs if r["exact"]]
        oom = [r for r in rs if "OOM" in (r["published"], r["predicted"])]
        approx = [r for r in rs if r.get("approximate") and r not in oom]
        # Approximate figures are memory sizes the paper rounds ("around 5 GB"): their error is the
        # paper's rounding, so they are neither time rows nor peak-memory rows.
        rest = [r for r in rs if not r["exact"] and r not in oom and r not in approx and r.get("comparable", True)]

        def cell(sel, among=rest):
            e = [abs(r["relative_error"]) * 100 for r in among if sel(r)]
            return f"{statistics.median(e):.0f}% ({min(e):.0f}-{max(e):.0f}%)" if e else "-"

        out.append(f"| {paper} | {len(rs)} | {sum(r['matches_exactly'] for r in exact)}/{len(exact)} | "
                   f"{cell(lambda r: True, approx)} | {sum(r['matches_exactly'] for r in oom)}/{len(oom)} | "
                   f"{cell(lambda r: r['metric'] not in ('hbm_peak',))} | {cell(lambda r: r['metric'] == 'hbm_peak')} |")
    return out


def replace_block(doc, name, lines):
    start, end = f"<!-- reproduce:{name} -->", f"<!-- /reproduce:{name} -->"
    pat = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pat.search(doc):
        sys.exit(f"update-reproductions: {name}: markers {start} ... {end} not found in the document")
    return pat.sub(lambda _: start + "\n" + "\n".join(lines) + "\n" + end, doc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvsim", default="build/kvsim")
    ap.add_argument("--doc", default="docs/reproductions.md")
    a = ap.parse_args()
    rows = json.loads(subprocess.run([a.kvsim, "reproduce", "--format", "json"], check=True, capture_output=True,
                                     text=True).stdout)
    table = subprocess.run([a.kvsim, "reproduce"], check=True, capture_output=True, text=True).stdout
    summary = [l for l in table.splitlines() if l.startswith("summary:")][0]
    doc = open(a.doc).read()
    doc = replace_block(doc, "summary", summary_table(rows) + ["", f"`kvsim reproduce` ends with: `{summary}`"])
    for paper in sorted({r["paper"] for r in rows}):
        doc = replace_block(doc, paper, paper_tables([r for r in rows if r["paper"] == paper]))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.doc)))
    with os.fdopen(fd, "w") as f:
        f.write(doc)
    os.replace(tmp, a.doc)


if __name__ == "__main__":
    main()
