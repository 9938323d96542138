#!/usr/bin/env python3
"""Mechanical mutants for tools/mutate/run.sh (issue #31, docs/robustness.md "Mutation testing").

    tools/mutate/generate.py [--sample 240] [--seed 31] [-o tools/mutate/mechanical.txt] [--mutate PATH]

Runs universalmutator (PyPI `universalmutator`, installed into build/mutate-venv on first use unless
--mutate names its `mutate` program) with only the rules of tools/mutate/operators.rules — arithmetic
and comparison operator swaps, constants +1 / -1 / x2, a dropped term of a sum or factor of a product,
floor/ceil and min/max swapped — over every .cpp file of sim/, model/, policies/ and kernels/reference/.
Each mutant changes one line; a line that occurs more than once in its file is left out (run.sh finds
the line by its text). A seeded random sample of them is written in run.sh's format, nobody picking:

    MUTANTS_FILE=tools/mutate/mechanical.txt bash tools/mutate/run.sh

The same tree, seed and sample size give the same file. Exit 2 on a usage error.
"""
import argparse
import difflib
import glob
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(ROOT, "tools", "mutate", "operators.rules")
FOLDERS = ["sim/*.cpp", "model/*.cpp", "policies/*.cpp", "policies/*/*.cpp", "kernels/reference/*.cpp"]
VERSION = "1.14.1"


def mutate_program(given):
    if given:
        return given
    venv = os.path.join(ROOT, "build", "mutate-venv")
    prog = os.path.join(venv, "bin", "mutate")
    if not os.path.exists(prog):
        print("installing universalmutator %s into %s ..." % (VERSION, venv), file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "universalmutator==" + VERSION], check=True)
    return prog


def kind(old, new):
    """Which operator class a one-line change belongs to."""
    if ("std::min(" in old and "std::max(" in new) or ("std::max(" in old and "std::min(" in new):
        return "min-max swap"
    if ("std::floor(" in old and "std::ceil(" in new) or ("std::ceil(" in old and "std::floor(" in new):
        return "floor-ceil swap"
    if len(new) < len(old):
        return "dropped term"
    if re.search(r"\(\d[\d.e+-]* [+*-] [12]\)", new) and len(new) > len(old):
        return "constant"
    if re.search(r" (<|<=|>|>=|==|!=) ", old) and len(new) in (len(old), len(old) + 1, len(old) - 1) and \
            re.sub(r" (<=|<|>=|>|==|!=) ", " ? ", old) == re.sub(r" (<=|<|>=|>|==|!=) ", " ? ", new):
        return "comparison swap"
    return "arithmetic swap"


def mutants_of(prog, path, work):
    """(line number, old line, new line, kind) of every mutant universalmutator makes of one file."""
    out = os.path.join(work, os.path.relpath(path, ROOT).replace("/", "_") + ".d")
    os.makedirs(out)
    subprocess.run([prog, path, "--only", RULES, "--mutantDir", out, "--noCheck"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    orig = text.splitlines()
    found = []
    for name in sorted(os.listdir(out), key=lambda n: int(re.search(r"mutant\.(\d+)\.", n).group(1))):
        with open(os.path.join(out, name), encoding="utf-8") as f:
            new = f.read().splitlines()
        if len(new) != len(orig):
            continue
        diff = [i for i, (a, b) in enumerate(zip(orig, new)) if a != b]
        if len(diff) != 1:
            continue
        i = diff[0]
        old_line, new_line = orig[i], new[i]
        # run.sh finds the line by its text anywhere in the file: it must occur exactly once.
        if old_line.lstrip().startswith(("//", "#", "*")) or text.count(old_line) != 1:
            continue
        found.append((i + 1, old_line, new_line, kind(old_line, new_line)))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=240, help="mutants in the random sample (default 240)")
    ap.add_argument("--seed", type=int, default=31, help="seed of the sample (default 31)")
    ap.add_argument("-o", "--out", default=os.path.join(ROOT, "tools", "mutate", "mechanical.txt"))
    ap.add_argument("--mutate", help="universalmutator's mutate program (default: build/mutate-venv)")
    o = ap.parse_args()
    if o.sample < 1:
        ap.error("--sample: value %d; allowed: at least 1" % o.sample)
    prog = mutate_program(o.mutate)
    files = sorted({p for g in FOLDERS for p in glob.glob(os.path.join(ROOT, g))})
    population = []
    with tempfile.TemporaryDirectory(prefix="kvsim-mutants.") as work:
        for path in files:
            rel = os.path.relpath(path, ROOT)
            for line, old, new, k in mutants_of(prog, path, work):
                population.append((rel, line, old, new, k))
    rng = random.Random(o.seed)
    sample = sorted(rng.sample(population, min(o.sample, len(population))), key=lambda m: (m[0], m[1], m[3]))
    by_kind = {}
    for m in population:
        by_kind[m[4]] = by_kind.get(m[4], 0) + 1
    lines = ["# Mechanical mutants: tools/mutate/generate.py --sample %d --seed %d (universalmutator %s with"
             % (o.sample, o.seed, VERSION),
             "# tools/mutate/operators.rules). Population %d mutants over %d files (%s); this is a seeded random"
             % (len(population), len(files), ", ".join("%s %d" % kv for kv in sorted(by_kind.items()))),
             "# sample of %d. Run: MUTANTS_FILE=tools/mutate/mechanical.txt bash tools/mutate/run.sh" % len(sample), ""]
    seen = {}
    for rel, line, old, new, k in sample:
        base = "%s-%d" % (os.path.splitext(os.path.basename(rel))[0], line)
        seen[base] = seen.get(base, 0) + 1
        lines += ["[%s-%d]" % (base, seen[base]), "file: " + rel, "find: " + old, "replace: " + new,
                  "why: mechanical %s, line %d" % (k, line), ""]
    tmp = o.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    os.replace(tmp, o.out)
    print("%d mutants in the population (%s); wrote a sample of %d to %s" % (
        len(population), ", ".join("%s %d" % kv for kv in sorted(by_kind.items())), len(sample), o.out))


if __name__ == "__main__":
    main()
