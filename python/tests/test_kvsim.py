"""Tests of the kvsim Python package (run by ctest as python.kvsim, and by `make python-test` in a fresh
virtual environment). Each compares with the CLI on the same inputs or asserts a behavior that could
fail. KVSIM_BINARY names the CLI; KVSIM_SOURCE_DIR the checkout (both set by ctest and the make target).
"""
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

import kvsim
from support import CLI, SRC, cli, have


SMALL_SERVING = {
    "hardware": "h100-sxm", "model": "llama-3.1-8b",
    "workload": {"context_tokens": 8192, "output_tokens": 256},
    "policies": ["full", "snapkv", "ctkvr"],
    "serving": {"arrival": "poisson", "rate": 2, "requests": 300, "prompt_tokens": 8192, "output_tokens": 256,
                "slo_ttft_s": 2, "slo_tpot_s": 0.05},
}


class Plan(unittest.TestCase):
    def test_plan_equals_the_cli(self):
        path = os.path.join(SRC, "scenarios", "example.yaml")
        self.assertEqual(kvsim.plan(path), json.loads(cli("plan", path, "--format", "json")))

    @unittest.skipUnless(have("pandas"), "pandas is not installed")
    def test_plan_frame_has_the_csv_columns_and_rows(self):
        import pandas
        path = os.path.join(SRC, "scenarios", "example.yaml")
        expected = pandas.read_csv(io.StringIO(cli("plan", path, "--format", "csv")))
        got = kvsim.plan_frame(path)
        self.assertEqual(list(got.columns), list(expected.columns))
        pandas.testing.assert_frame_equal(got, expected)

    def test_a_dict_and_yaml_text_are_scenarios_too(self):
        d = {"hardware": "h100-sxm", "model": "llama-3.1-8b",
             "workload": {"context_tokens": 32768, "output_tokens": 512, "batch": 4}, "policies": ["full", "quest"]}
        a = kvsim.plan(d)
        b = kvsim.plan("hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload:\n  context_tokens: 32768\n"
                       "  output_tokens: 512\n  batch: 4\npolicies: [full, quest]\n")
        self.assertEqual([r["tpot_ms"] for r in a["results"]], [r["tpot_ms"] for r in b["results"]])
        self.assertEqual([r["policy"] for r in a["results"]], ["full", "quest"])

    def test_target_plan_meets_its_target(self):
        rows = kvsim.target_plan(os.path.join(SRC, "scenarios", "example.yaml"), tpot_ms=30)
        self.assertTrue(any(r["feasible"] for r in rows))
        for r in rows:
            if r["feasible"]:
                self.assertLessEqual(r["tpot_s"], 0.030)


class Gil(unittest.TestCase):
    def test_library_calls_run_without_the_gil(self):
        # Every function is registered with the same release guard as this probe.
        self.assertFalse(kvsim._kvsim._gil_held_inside())


class Errors(unittest.TestCase):
    def test_input_errors_carry_file_line_field_value_and_allowed(self):
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan("hardware: h100-sxm\nmodel: llama-3.1-8b\nworkload:\n  context_tokens: 8192\n"
                       "  hbm_utilization: 1.5\n")
        err = e.exception
        self.assertIsInstance(err, ValueError)
        self.assertEqual(err.file, "<text>")
        self.assertEqual(err.line, 5)
        self.assertEqual(err.field, "workload.hbm_utilization")
        self.assertEqual(err.value, "1.5")
        self.assertIsNotNone(err.allowed)

    def test_a_misspelled_policy_in_a_dict(self):
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan({"hardware": "h100-sxm", "model": "llama-3.1-8b", "workload": {"context_tokens": 8192},
                        "policies": ["snapvk"]})
        self.assertEqual(e.exception.file, "<dict>")
        self.assertIn("snapkv", str(e.exception))  # the suggestion

    def test_a_missing_file(self):
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan("no/such/scenario.yaml")
        self.assertEqual(e.exception.file, "no/such/scenario.yaml")


@unittest.skipUnless(have("pandas"), "pandas is not installed")
class ServeAndSweep(unittest.TestCase):
    def test_serve_equals_the_cli(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.yaml")
            with open(path, "w") as f:
                json.dump(SMALL_SERVING, f)
            got = kvsim.serve(path)
            want = json.loads(cli("serve", path, "--format", "json", "--requests-csv", os.path.join(d, "r.csv")))
            import pandas
            requests = pandas.read_csv(os.path.join(d, "r.csv"))
        self.assertEqual(got["summary"]["policies"], want["policies"])
        pandas.testing.assert_frame_equal(got["requests"], requests)

    def test_sweep_equals_the_cli(self):
        import pandas
        spec = os.path.join(SRC, "python", "tests", "small_sweep.yaml")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.csv")
            cli("sweep", spec, "-o", out)
            want = pandas.read_csv(out)
        pandas.testing.assert_frame_equal(kvsim.sweep(spec), want)

    def test_capacity_finds_a_count_that_meets_the_slo(self):
        rows = kvsim.capacity(SMALL_SERVING, rate=6, slo_ttft_p99=2, slo_tpot_p99=0.05, policies=["full"],
                              tensor_parallel=[1])
        self.assertTrue(bool(rows["found"][0]))
        self.assertGreater(int(rows["replicas"][0]), 1)
        self.assertLessEqual(float(rows["tpot_p99_s"][0]), 0.05)

    def test_reproduce_has_every_paper(self):
        rows = kvsim.reproduce()
        self.assertGreater(len(rows), 100)
        self.assertTrue({"paper", "published", "predicted", "relative_error"} <= set(rows.columns))


@unittest.skipUnless(have("pandas"), "pandas is not installed")
class ReplayAndTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.trace = os.path.join(cls.dir.name, "tiny.safetensors")
        cli("trace", "gen", "--preset", "tiny", "-o", cls.trace)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_trace_info_equals_the_cli(self):
        self.assertEqual(kvsim.trace_info(self.trace), json.loads(cli("trace", "info", self.trace, "--format", "json")))

    def test_capacity_under_a_quality_floor_equals_the_cli(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.yaml")
            with open(path, "w") as f:
                json.dump(SMALL_SERVING, f)
            want = json.loads(cli("capacity", path, "--policy", "snapkv", "--rate", "4", "--slo-ttft-p99", "2s",
                                  "--slo-tpot-p99", "50ms", "--tp", "1", "--trace", self.trace, "--min-recall", "0.8",
                                  "--format", "json"))["policies"]
            got = kvsim.capacity(path, rate=4, slo_ttft_p99=2, slo_tpot_p99=0.05, policies="snapkv",
                                 tensor_parallel=[1], trace=self.trace, min_recall=0.8)
        self.assertEqual(got.to_dict("records"), want)
        self.assertIn("budget_tokens=", want[0]["budget"])
        self.assertGreaterEqual(want[0]["quality"]["recall"], 0.8)

    def test_replay_equals_the_cli(self):
        import pandas
        args = ["--policy", "snapkv", "--policy", "quest", "--max-steps", "16", "--threads", "1"]
        got = kvsim.replay(self.trace, policies=["snapkv", "quest"], max_steps=16, threads=1)
        want_rows = pandas.read_csv(io.StringIO(cli("replay", self.trace, *args, "--format", "csv")))
        pandas.testing.assert_frame_equal(got["rows"], want_rows)
        want = json.loads(cli("replay", self.trace, *args, "--format", "json"))
        for p, q in zip(got["report"]["policies"], want["policies"]):
            self.assertEqual(p["quality"], q["quality"])


@unittest.skipUnless(have("ray") and have("pandas"), "ray is not installed (make python-test installs it)")
class Ray(unittest.TestCase):
    def test_ray_sweep_and_capacity_equal_the_local_runs(self):
        import pandas
        import ray
        ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
        try:
            spec = os.path.join(SRC, "python", "tests", "small_sweep.yaml")
            pandas.testing.assert_frame_equal(kvsim.sweep(spec, executor="ray", shards=3), kvsim.sweep(spec))
            kw = dict(rate=6, slo_ttft_p99=2, slo_tpot_p99=0.05, tensor_parallel=[1], requests=200)
            pandas.testing.assert_frame_equal(kvsim.capacity(SMALL_SERVING, executor="ray", **kw),
                                              kvsim.capacity(SMALL_SERVING, **kw))
        finally:
            ray.shutdown()


class Example(unittest.TestCase):
    @unittest.skipUnless(have("pandas"), "pandas is not installed")
    def test_the_example_runs(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, os.path.join(SRC, "python", "examples", "notebook.py"), d],
                               cwd=SRC, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("pareto front", r.stdout)
            self.assertTrue(os.path.exists(os.path.join(d, "pareto.csv")))


if __name__ == "__main__":
    unittest.main()
