#!/usr/bin/env python3
"""The mechanical sample's score (docs/robustness.md, "Mechanical mutation results") from three files:

  mechanical-results.tsv         what run.sh measured, one row per mutant run (id, status, file, detail)
  mechanical.txt                 the sample; an `equivalent:` line marks a mutant equivalent, with the reason
  mechanical-classification.tsv  what became of each survivor: `new-test<TAB>TEST` (a test added after the
                                 run kills it: checked by applying the mutant and running TEST),
                                 `sanitizer<TAB>HOW` (only `make test-asan` catches it) or `open<TAB>WHY`

A row counts as equivalent when mechanical.txt now marks it so (whatever run.sh recorded); a survivor as killed
when the classification names a new test, else as open. Prints a Markdown table and the score;
--check exits 1 when a survivor has no classification (so none is left unexamined).

    tools/mutate/score.py [--check] [--dir tools/mutate]
"""
import argparse
import collections
import pathlib
import sys


def sample(path):
    """id -> dict(file, find, replace, why, equivalent) from run.sh's block format."""
    out = {}
    for block in path.read_text().split("\n\n"):
        lines = block.strip().splitlines()
        if not lines or not lines[0].startswith("["):
            continue
        rec = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
        out[lines[0].strip("[]")] = rec
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=str(pathlib.Path(__file__).resolve().parent))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    d = pathlib.Path(a.dir)
    mutants = sample(d / "mechanical.txt")
    rows = [l.rstrip("\n").split("\t") for l in (d / "mechanical-results.tsv").read_text().splitlines() if l.strip()]
    cls = {}
    cpath = d / "mechanical-classification.tsv"
    if cpath.exists():
        for l in cpath.read_text().splitlines():
            if l.strip() and not l.startswith("#"):
                mid, kind, why = (l.split("\t") + ["", ""])[:3]
                cls[mid] = (kind, why)
    count = collections.Counter()
    listed = collections.defaultdict(list)
    unexamined = []
    for r in rows:
        mid, status = r[0], r[1]
        if status != "not compiled" and "equivalent" in mutants.get(mid, {}):
            status = "equivalent"  # marked after the run (a kill of an equivalent mutant could only be a flaky test)
        if status == "survived":
            kind, why = cls.get(mid, ("", ""))
            if kind == "new-test":
                status = "killed by a new test"
            elif kind == "sanitizer":
                status = "caught by make test-asan only"
            else:
                status = "open"
                if not kind:
                    unexamined.append(mid)
            listed[status].append(f"- `{mid}`: {why}" if why else f"- `{mid}`")
        count[status] += 1
    killed = count["killed"] + count["killed by a new test"]
    scored = killed + count["open"] + count["caught by make test-asan only"]
    print(f"| of the sample of {len(mutants)} | count |\n|---|---|")
    print(f"| run | {len(rows)} |")
    for k in ("not compiled", "equivalent", "killed", "killed by a new test", "caught by make test-asan only", "open"):
        label = "killed by the suite" if k == "killed" else k
        print(f"| {label} | {count[k]} |")
    pct = 100.0 * killed / scored if scored else 0.0
    print(f"| **score** | **{killed} killed of {scored} non-equivalent ({pct:.1f}%)** |")
    for k in ("killed by a new test", "caught by make test-asan only", "open"):
        if listed[k]:
            print(f"\n{k[0].upper() + k[1:]}:\n\n" + "\n".join(listed[k]))
    if unexamined:
        print("\nnot yet classified: " + ", ".join(unexamined), file=sys.stderr)
        if a.check:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
