#!/usr/bin/env python3
"""Tests of compare_numeric.py (ctest tools.compare_numeric): the tolerance mode of compare-outputs.sh.

Each test writes two small fixture files into a temporary directory, runs the script on them as
compare-outputs.sh does, and checks its exit status and what it reports.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parent / "compare_numeric.py"

TABLE = """policy        TTFT p50  TTFT p99   E2E p99      tok/s   batch
full             288.5    1069.2         9        489     9.4
chess            262.6     974.7       5.1   1.29e+03     5.8
"""

PLAN = {
    "context_tokens": 131072,
    "results": [
        {"policy": "full", "batch": 3, "tpot_ms": 27.08613737459355, "feasible": True},
        {"policy": "quest", "batch": 3, "tpot_ms": 7.808123456789012, "note": "x0.80 estimate"},
    ],
}


class CompareNumeric(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def run_on(self, a, b, *args, ext="txt"):
        pa = os.path.join(self.dir.name, "a." + ext)
        pb = os.path.join(self.dir.name, "b." + ext)
        pathlib.Path(pa).write_text(a)
        pathlib.Path(pb).write_text(b)
        r = subprocess.run([sys.executable, str(SCRIPT), pa, pb, *args], capture_output=True, text=True)
        return r.returncode, r.stdout

    def summary(self, out):
        lines = [line for line in out.splitlines() if line.startswith("summary: ")]
        self.assertEqual(len(lines), 1, out)
        return lines[0]

    def test_identical_files_pass(self):
        for text, ext in ((TABLE, "txt"), (json.dumps(PLAN), "json")):
            rc, out = self.run_on(text, text, "--rel", "1e-9", ext=ext)
            self.assertEqual(rc, 0, out)
            self.assertIn("0 outside the tolerance, 0 text differences", self.summary(out))

    def test_tiny_relative_change_passes_and_reports_its_size(self):
        csv_a = "policy,tpot_ms,throughput\nfull,27.0861374594,110.757763594\n"
        csv_b = "policy,tpot_ms,throughput\nfull,27.0861374597,110.757763594\n"  # 1.1e-11 relative
        rc, out = self.run_on(csv_a, csv_b, "--rel", "1e-9", ext="csv")
        self.assertEqual(rc, 0, out)
        self.assertIn("2 numbers compared, 1 differ within the tolerance (max relative difference 1.11e-11)",
                      self.summary(out))
        b = json.loads(json.dumps(PLAN))
        b["results"][0]["tpot_ms"] *= 1 + 1e-12
        b["results"][1]["tpot_ms"] *= 1 - 1e-12
        # whitespace and indentation are no part of a JSON comparison
        rc, out = self.run_on(json.dumps(PLAN), json.dumps(b, indent=2), "--rel", "1e-9", ext="json")
        self.assertEqual(rc, 0, out)
        self.assertRegex(self.summary(out), r"2 differ within the tolerance \(max relative difference 1e-12\)")

    def test_change_beyond_the_tolerance_fails_with_its_location(self):
        b = json.loads(json.dumps(PLAN))
        b["results"][1]["tpot_ms"] *= 1 + 1e-6
        rc, out = self.run_on(json.dumps(PLAN, indent=1), json.dumps(b, indent=1), "--rel", "1e-9", ext="json")
        self.assertEqual(rc, 1, out)
        line = next(x for x in out.splitlines() if "number differs" in x)
        # line 13 of the indent=1 dump, the value's column, the JSON path, both values, the difference
        self.assertRegex(line, r"a\.json:13:\d+: \$\.results\[1\]\.tpot_ms: number differs: 7\.808123456789012 vs ")
        self.assertIn("(relative difference 1e-06)", line)
        self.assertIn("1 outside the tolerance", self.summary(out))
        # the same change passes under a looser tolerance, and under an absolute one
        self.assertEqual(self.run_on(json.dumps(PLAN), json.dumps(b), "--rel", "1e-5", ext="json")[0], 0)
        self.assertEqual(self.run_on(json.dumps(PLAN), json.dumps(b), "--rel", "0", "--abs", "1e-4", ext="json")[0], 0)
        # in text: a 1e-6 change far above the last printed digit is no flip
        rc, out = self.run_on("tpot 27.0861374594 ms\n", "tpot 27.0861645 ms\n", "--rel", "1e-9")
        self.assertEqual(rc, 1, out)
        self.assertIn("1:6: number differs: 27.0861374594 vs 27.0861645", out)

    def test_changed_text_fails(self):
        rc, out = self.run_on(TABLE, TABLE.replace("chess", "chesz"), "--rel", "1e-9")
        self.assertEqual(rc, 1, out)
        self.assertIn("1 text differences", self.summary(out))
        self.assertIn(":3:1: text differs", out)
        # an extra line, and a number turned into text
        self.assertEqual(self.run_on(TABLE, TABLE + "extra\n", "--rel", "1e-9")[0], 1)
        rc, out = self.run_on(TABLE, TABLE + "\n", "--rel", "1e-9")
        self.assertEqual(rc, 1, out)
        self.assertIn("line count differs: 3 vs 4", out)
        rc, out = self.run_on("x 1\n", "x 1", "--rel", "1e-9")
        self.assertEqual(rc, 1, out)
        self.assertIn("final newline differs", out)
        self.assertEqual(self.run_on("rc=0\n", "rc=x\n", "--rel", "1e-9")[0], 1)

    def test_json_structure_must_match(self):
        b = json.loads(json.dumps(PLAN))
        b["results"][0]["tpot"] = b["results"][0].pop("tpot_ms")  # a renamed key, same number
        rc, out = self.run_on(json.dumps(PLAN), json.dumps(b), "--rel", "1e-9", ext="json")
        self.assertEqual(rc, 1, out)
        self.assertIn("$.results[0]: keys differ: only in A ['tpot_ms'], only in B ['tpot']", out)
        # a changed string, a boolean for a number, a shorter list
        for change in (lambda d: d["results"][1].update(note="x0.81 estimate"),
                       lambda d: d["results"][0].update(feasible=1),
                       lambda d: d["results"].pop()):
            b = json.loads(json.dumps(PLAN))
            change(b)
            self.assertEqual(self.run_on(json.dumps(PLAN), json.dumps(b), "--rel", "1", ext="json")[0], 1, b)

    def test_table_last_digit_flip_passes_and_is_reported_as_a_flip(self):
        # 288.55 computed twice a hair apart prints as 288.5 and 288.6; a %.3g cell as 1.29e+03 and
        # 1.3e+03 (trailing zero dropped) and 9 and 9.01; the padding widens where the cell narrows
        b = (TABLE.replace("288.5", "288.6").replace("   1.29e+03", "    1.3e+03")
             .replace("         9 ", "      9.01 "))
        rc, out = self.run_on(TABLE, b, "--rel", "1e-9")
        self.assertEqual(rc, 0, out)
        self.assertIn("2:18: last-digit flip: 288.5 vs 288.6 (relative difference 0.000347)", out)
        self.assertIn("last-digit flip: 1.29e+03 vs 1.3e+03", out)
        self.assertIn("last-digit flip: 9 vs 9.01", out)
        self.assertRegex(self.summary(out), r"0 differ within the tolerance .* 3 last-digit flips .* within tolerance$")

    def test_no_flip_beyond_one_unit_nor_between_integers_nor_in_json(self):
        # two units in the last digit
        self.assertEqual(self.run_on(TABLE, TABLE.replace("288.5", "288.7"), "--rel", "1e-9")[0], 1)
        # one unit of the less precise "288.5" but nine of the more precise "288.41"
        rc, out = self.run_on(TABLE, TABLE.replace("288.5 ", "288.41"), "--rel", "1e-9")
        self.assertEqual(rc, 1, out)
        self.assertIn("number differs: 288.5 vs 288.41", out)
        # integers are counts: batch 3 -> 4 is a real change
        rc, out = self.run_on("batch 3 of 3\n", "batch 4 of 3\n", "--rel", "1e-9")
        self.assertEqual(rc, 1, out)
        self.assertIn("number differs: 3 vs 4", out)
        # JSON prints full precision: a change in its last digit is judged by the tolerance alone
        rc, out = self.run_on('{"x": 288.5}', '{"x": 288.6}', "--rel", "1e-9", ext="json")
        self.assertEqual(rc, 1, out)
        self.assertIn("0 last-digit flips", self.summary(out))

    def test_identifiers_with_digits_are_text(self):
        # "h100" and "llama-3.1-8b" are names: a change there is a text difference, not a number
        rc, out = self.run_on("gpu h100-sxm\n", "gpu h200-sxm\n", "--rel", "1")
        self.assertEqual(rc, 1, out)
        self.assertIn("text differs", out)
        rc, out = self.run_on("t=-1.5e-3 s\n", "t=-1.5000000000001e-3 s\n", "--rel", "1e-9")
        self.assertEqual(rc, 0, out)
        self.assertIn("1 differ within the tolerance", self.summary(out))

    def test_missing_file_is_a_usage_error(self):
        r = subprocess.run([sys.executable, str(SCRIPT), "/nonexistent/a", "/nonexistent/b", "--rel", "1e-9"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)


if __name__ == "__main__":
    unittest.main()
