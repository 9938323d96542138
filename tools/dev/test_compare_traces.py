#!/usr/bin/env python3
"""Smoke test of tools/dev/compare-traces.py on tiny synthetic traces (ctest tools.compare_traces).

    tools/dev/test_compare_traces.py PATH/TO/kvsim

The "real" trace is itself synthetic (the `tiny` preset, shorter, another seed), so the test needs no
model and runs in seconds. A config that regenerates exactly that trace must give Δ = 0 everywhere;
the `tiny` preset (another seed) must differ somewhere; bad input must fail with status 2 and leave
no output file.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "compare-traces.py")
TINY = os.path.join(HERE, "..", "..", "scenarios", "traces", "tiny.yaml")
KVSIM = None
# The stand-in for a real trace: tiny at another seed and length (the tool sets these on every
# synthetic trace from the real one, except the seed).
REAL_SETS = ["prompt_tokens=640", "generated_tokens=16", "seed=11"]


def run(args):
    return subprocess.run([sys.executable, TOOL, "--kvsim", KVSIM] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def stand_in(d, extra_sets=()):
    """The stand-in real trace (tiny at REAL_SETS, plus extra_sets) and a config that regenerates it (the
    preset's text with the real seed). Returns (trace path, config path, trace gen's stderr)."""
    real = os.path.join(d, "real.safetensors")
    gen = [KVSIM, "trace", "gen", "--preset", "tiny", "-o", real]
    for s in REAL_SETS + list(extra_sets):
        gen += ["--set", s]
    p = subprocess.run(gen, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    same = os.path.join(d, "same.yaml")
    with open(TINY) as src, open(same, "w") as dst:
        dst.write("".join(l for l in src if not l.startswith("seed:")) + "seed: 11\n")
    return real, same, p.stderr


def compared(d, name, args):
    """Runs the tool on ARGS with its Markdown and JSON reports written to d/NAME.md and d/NAME.json;
    returns (the JSON report, the Markdown text)."""
    md, js = os.path.join(d, name + ".md"), os.path.join(d, name + ".json")
    p = run(args + ["-o", md, "--json", js])
    assert p.returncode == 0, p.stderr
    with open(js) as f, open(md) as g:
        return json.load(f), g.read()


class CompareTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="test-compare-traces.")
        d = cls.tmp.name
        cls.real, cls.same, _ = stand_in(d)
        cls.js = os.path.join(d, "report.json")
        cls.report, cls.text = compared(d, "report", [cls.real, cls.same, "tiny", "--budgets", "64,128,100000",
                                                      "--max-steps", "4", "--policy", "quest", "--policy", "streaming"])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_synthetic_traces_take_the_real_shape(self):
        real = self.report["real"]["trace"]
        for s in self.report["synthetic"]:
            for key in ("tokens", "prompt_tokens", "decode_rows", "layers", "kv_heads", "query_heads", "head_dim"):
                self.assertEqual(s["trace"][key], real[key], key)
        self.assertEqual(real["prompt_tokens"], 640)

    def test_one_row_per_policy_and_budget(self):
        keys = [(r["policy"], r["budget"]) for r in self.report["rows"]]
        self.assertEqual(keys, [(p, b) for p in ("quest", "streaming") for b in (64, 128, 100000)])  # --policy order

    def test_the_generator_of_the_real_trace_gives_no_difference(self):
        for row in self.report["rows"]:
            same = row["synthetic"][0]
            if row["budget"] == 100000:
                self.assertIsNone(row["real"])  # not a sweep budget of a 640-token prompt
                self.assertIsNone(same["values"])
                continue
            for metric in ("attention_recall", "topk_recall", "output_error"):
                self.assertEqual(same["diff"][metric], 0.0, (row["policy"], row["budget"], metric))
        for metric in ("attention_recall", "topk_recall", "output_error"):
            self.assertEqual(self.report["mean_abs_diff"][metric][0], 0.0, metric)
        self.assertEqual(self.report["synthetic"][0]["profile"], self.report["real"]["profile"])

    def test_another_seed_differs_and_differences_are_synthetic_minus_real(self):
        diffs = []
        for row in self.report["rows"]:
            s = row["synthetic"][1]
            if s["values"] is None:
                continue
            d = s["values"]["attention_recall"] - row["real"]["attention_recall"]
            self.assertAlmostEqual(s["diff"]["attention_recall"], d, places=12)
            diffs.append(abs(d))
        self.assertGreater(max(diffs), 0.0)
        self.assertAlmostEqual(self.report["mean_abs_diff"]["attention_recall"][1], sum(diffs) / len(diffs), places=12)
        worst = self.report["worst"][1]
        self.assertAlmostEqual(max(abs(w["recall_diff"]) for w in worst.values()), max(diffs), places=12)

    def test_markdown_has_every_table(self):
        for title in ("**recall**", "**top-k recall**", "**output error**", "**worst recall gap**",
                      "**structural profile**"):
            self.assertIn(title, self.text)
        self.assertIn("| quest | 64 |", self.text)
        self.assertIn("| same (Δ) | tiny (Δ) |", self.text)

    def test_combining_two_runs_equals_one_run_with_both(self):
        parts = []
        for i, spec in enumerate((self.same, "tiny")):
            js = os.path.join(self.tmp.name, "part%d.json" % i)
            p = run([self.real, spec, "--budgets", "64,128,100000", "--max-steps", "4", "--policy", "quest",
                     "--policy", "streaming", "--format", "json", "-o", js])
            self.assertEqual(p.returncode, 0, p.stderr)
            parts.append(js)
        out = os.path.join(self.tmp.name, "combined.json")
        p = run(["--combine", parts[0], parts[1], "--format", "json", "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            combined = json.load(f)
        for key in ("rows", "worst", "mean_abs_diff"):
            self.assertEqual(combined[key], self.report[key], key)
        self.assertEqual([s["name"] for s in combined["synthetic"]], ["same", "tiny"])

    def test_combining_reports_on_different_real_traces_fails(self):
        other = dict(self.report, real=dict(self.report["real"], path="elsewhere.safetensors"))
        path = os.path.join(self.tmp.name, "other.json")
        with open(path, "w") as f:
            json.dump(other, f)
        out = os.path.join(self.tmp.name, "bad-combined.md")
        p = run(["--combine", self.js, path, "-o", out])
        self.assertEqual(p.returncode, 2)
        self.assertIn("differs", p.stderr)
        self.assertFalse(os.path.exists(out))

    def test_bad_input_fails_without_output(self):
        out = os.path.join(self.tmp.name, "bad.md")
        for args in ([self.real, os.path.join(self.tmp.name, "missing.yaml")],
                     [self.real, "no-such-preset"],
                     [self.real, "tiny", "--budgets", "0"],
                     [os.path.join(self.tmp.name, "missing.safetensors"), "tiny"]):
            p = run(args + ["--max-steps", "2", "--policy", "quest", "-o", out])
            self.assertEqual(p.returncode, 2, args)
            self.assertIn("compare-traces: error:", p.stderr)
            self.assertFalse(os.path.exists(out), args)


class SyntheticNeedle(unittest.TestCase):
    """--synthetic-needle: the "real" trace is tiny with a needle (its span given as --needle-tokens); the
    config that regenerated it, given a needle at that span's depth and length, must land it on the same
    tokens and match its needle recall exactly; the tiny preset (another seed) gets a needle too."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="test-compare-traces-needle.")
        d = cls.tmp.name
        cls.real, cls.same, log = stand_in(d, ["needles=[{depth: 0.45, length: 20}]"])
        first, end = log.split("needle 0: tokens ", 1)[1].split()[0].split(":")
        cls.span = [int(first), int(end)]
        cls.report, cls.text = compared(d, "needle", [cls.real, cls.same, "tiny", "--budgets", "64,128", "--max-steps",
                                                      "4", "--policy", "quest", "--policy", "streaming",
                                                      "--needle-tokens", "%d:%d" % tuple(cls.span),
                                                      "--synthetic-needle", "--compact"])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_regenerated_needle_matches_the_real_one(self):
        self.assertEqual(self.span[1] - self.span[0], 20)
        self.assertEqual(self.report["real"]["needle_tokens"], self.span)
        for row in self.report["rows"]:
            real = row["real"]["needle_recall"]
            self.assertIsNotNone(real)
            self.assertEqual(row["synthetic"][0]["values"]["needle_recall"], real, (row["policy"], row["budget"]))
            self.assertIsNotNone(row["synthetic"][1]["values"]["needle_recall"])
        self.assertIn("mean abs. Δ needle recall, all cells | 0.000 |", self.text)

    def test_synthetic_needle_needs_a_real_needle(self):
        out = os.path.join(self.tmp.name, "bad.md")
        for args in (["--synthetic-needle"], ["--needle-tokens", "9-3"], ["--needle-tokens", "5:5"]):
            p = run([self.real, "tiny", "--max-steps", "2", "--policy", "quest", "-o", out] + args)
            self.assertEqual(p.returncode, 2, args)
            self.assertFalse(os.path.exists(out), args)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_compare_traces.py PATH/TO/kvsim")
    KVSIM = os.path.abspath(sys.argv.pop(1))
    unittest.main()
