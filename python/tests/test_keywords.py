"""The CLI's options as keyword arguments (issue #32, item 3): each keyword call equals the kvsim binary
run with the same options, and every InputError carries the value and the allowed values wherever its
message names them. Run by ctest as python.kvsim (KVSIM_BINARY, KVSIM_SOURCE_DIR as in test_kvsim.py)."""
import json
import os
import tempfile
import unittest

import kvsim
from support import CLI, cli, cli_error


SERVING = {
    "hardware": "h100-sxm", "model": "llama-3.1-8b",
    "workload": {"context_tokens": 8192, "output_tokens": 256},
    "policies": ["full", "snapkv"],
    "serving": {"arrival": "poisson", "rate": 2, "requests": 200, "prompt_tokens": 8192, "output_tokens": 256,
                "slo_ttft_s": 2, "slo_tpot_s": 0.05},
}


class KeywordsEqualTheCli(unittest.TestCase):
    def test_the_readme_question(self):
        got = kvsim.plan(hardware="h200", model="qwen2.5-14b", context=[32768, 131072])
        want = json.loads(cli("plan", "--hardware", "h200", "--model", "qwen2.5-14b", "--context", "32768,131072",
                              "--format", "json"))
        self.assertEqual(got, want)
        self.assertEqual(sorted({r["context_tokens"] for r in got["results"]}), [32768, 131072])

    def test_every_plan_override(self):
        kw = dict(hardware="a6000", host="ci-2core", model="llama-3.2-3b", calibration="roofline", context=65536,
                  output=128, batch=4, policies=["full", "quest"], set=["quest.page_size=32"])
        args = ["--hardware", "a6000", "--host", "ci-2core", "--model", "llama-3.2-3b", "--calibration", "roofline",
                "--context", "65536", "--output", "128", "--batch", "4", "--policy", "full", "--policy", "quest",
                "--set", "quest.page_size=32"]
        self.assertEqual(kvsim.plan(**kw), json.loads(cli("plan", *args, "--format", "json")))

    def test_batch_max_and_a_target(self):
        self.assertEqual(kvsim.plan(batch="max", context=8192),
                         json.loads(cli("plan", "--batch", "max", "--context", "8192", "--format", "json")))
        rows = kvsim.target_plan(tpot_ms=40, hardware="h200", context=32768, policies=["full", "snapkv"])
        want = json.loads(cli("plan", "--target-tpot", "40", "--hardware", "h200", "--context", "32768",
                              "--policy", "full", "--policy", "snapkv", "--format", "json"))
        self.assertEqual([r["policy"] for r in rows], ["full", "snapkv"])
        text = json.dumps(want)
        for r in rows:
            if r["feasible"]:
                self.assertIn(str(r["batch"]), text)
                self.assertLessEqual(r["tpot_s"], 0.040)

    def test_a_target_with_knobs_and_a_quality_floor(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "tiny.safetensors")
            cli("trace", "gen", "--preset", "tiny", "-o", trace)
            args = dict(tpot_ms=40, context=8192, policies="quest", knob=["quest.budget_tokens=512,1024,4096"],
                        trace=trace, min_recall=0.5, trace_max_steps=8)
            got = kvsim.target_plan(**args)
            want = json.loads(cli("plan", "--target-tpot", "40", "--context", "8192", "--policy", "quest", "--knob",
                                  "quest.budget_tokens=512,1024,4096", "--trace", trace, "--min-recall", "0.5",
                                  "--trace-max-steps", "8", "--format", "json"))["answers"]
        self.assertEqual([(r["policy"], r["batch"], r["params"]) for r in got],
                         [(r["policy"], r["batch"], r["params"]) for r in want])
        self.assertEqual(got[0]["params"]["budget_tokens"], 512)  # the knob's values, not quest's default grid
        self.assertEqual(got[0]["quality"]["recall"], want[0]["quality"]["recall"])

    def test_serve_and_capacity_overrides(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.yaml")
            with open(path, "w") as f:
                json.dump(SERVING, f)
            got = kvsim.serve(path, rate=3, requests=150, router="least_loaded", preemption="swap",
                              hardware="h200")["summary"]
            want = json.loads(cli("serve", path, "--rate", "3", "--requests", "150", "--router", "least_loaded",
                                  "--preemption", "swap", "--hardware", "h200", "--format", "json"))
            self.assertEqual(got["policies"], want["policies"])
            cap = kvsim.capacity(path, rate=4, slo_ttft_p99=2, slo_tpot_p99=0.05, policies="full", tensor_parallel=[1],
                                 max_gpus=8, model="llama-3.2-3b", requests=150)
            want = json.loads(cli("capacity", path, "--rate", "4", "--slo-ttft-p99", "2s", "--slo-tpot-p99", "50ms",
                                  "--policy", "full", "--tp", "1", "--max-gpus", "8", "--model", "llama-3.2-3b",
                                  "--requests", "150", "--format", "json"))["policies"]
            self.assertEqual(cap.to_dict("records") if hasattr(cap, "to_dict") else cap, want)

    def test_docstrings_list_the_keywords(self):
        for fn, words in [(kvsim.plan, ["hardware", "host", "model", "calibration", "context", "output", "batch"]),
                          (kvsim.target_plan, ["tpot_ms", "throughput", "min_recall", "hardware", "batch"]),
                          (kvsim.serve, ["rate", "requests", "router", "preemption", "replicas", "concurrency"]),
                          (kvsim.capacity, ["slo_ttft_p99", "slo_tpot_p99", "max_gpus", "tensor_parallel", "rate"])]:
            for w in words:
                self.assertIn(w, fn.__doc__, f"{fn.__name__} does not document {w}")


# Bad inputs: (function, keyword arguments, the CLI arguments that give the same message or None).
BAD = [
    (kvsim.plan, dict(hardware="h2000"), ["plan", "--hardware", "h2000"]),
    (kvsim.plan, dict(host="nohost"), ["plan", "--host", "nohost"]),
    (kvsim.plan, dict(model="qwen2.5-14"), ["plan", "--model", "qwen2.5-14"]),
    (kvsim.plan, dict(calibration="nope"), ["plan", "--calibration", "nope"]),
    (kvsim.plan, dict(context="abc"), ["plan", "--context", "abc"]),
    (kvsim.plan, dict(context=[8192, 0]), ["plan", "--context", "8192,0"]),
    (kvsim.plan, dict(context=10 ** 9), ["plan", "--context", str(10 ** 9)]),
    (kvsim.plan, dict(output=-5), ["plan", "--output", "-5"]),
    (kvsim.plan, dict(batch=0), ["plan", "--batch", "0"]),
    (kvsim.plan, dict(batch="most"), ["plan", "--batch", "most"]),
    (kvsim.plan, dict(hardware="no/such.yaml"), ["plan", "--hardware", "no/such.yaml"]),
    (kvsim.plan, dict(policies=["nope"]), ["plan", "--policy", "nope"]),
    (kvsim.plan, dict(set=["chess.budget=3"]), ["plan", "--set", "chess.budget=3"]),
    (kvsim.plan, dict(set=["quest.page_size=abc"]), ["plan", "--set", "quest.page_size=abc"]),
    (kvsim.plan, dict(set=["quest.page_size=0"]), ["plan", "--set", "quest.page_size=0"]),
    (kvsim.plan, dict(set=["nonsense"]), ["plan", "--set", "nonsense"]),
    (kvsim.plan, dict(hardware="v100-32g", model="llama-3.1-8b", context=131072 * 4), None),
    (kvsim.plan, dict(hardware="h100-sxm", model="llama-3.1-8b", context=10 ** 6),
     ["plan", "--hardware", "h100-sxm", "--model", "llama-3.1-8b", "--context", str(10 ** 6)]),
    (kvsim.plan, dict(scenario={"hardware": "h100-sxm", "model": "llama-3.1-8b",
                                "workload": {"context_tokens": 8192, "weight_dtype": "fp4"}}), None),
    (kvsim.plan, dict(scenario={"hardware": "h100-sxm", "model": "llama-3.1-8b",
                                "workload": {"context_tokens": 8192, "tensor_parallel": 3}}), None),
    (kvsim.plan, dict(scenario={"hardware": "h100-sxm", "model": "llama-3.1-8b", "workloud": {}}), None),
    (kvsim.target_plan, dict(tpot_ms=-1), None),
    (kvsim.target_plan, dict(tpot_ms=30, min_recall=1.5, trace="x"), None),
    (kvsim.target_plan, dict(tpot_ms=30, trace="no/such.safetensors"), None),
    (kvsim.target_plan, dict(tpot_ms=30, knob=["quest.budget_tokens=abc"]), None),
    (kvsim.target_plan, dict(tpot_ms=30, knob=["quest.nope=1,2"]), None),
    (kvsim.target_plan, dict(tpot_ms=30, trace_memory_limit=0), None),
    (kvsim.sweep, dict(threads=-1), None),
    (kvsim.sweep, dict(executor="dask"), None),
    (kvsim.serve, dict(rate=-1), None),
    (kvsim.serve, dict(requests=0), None),
    (kvsim.serve, dict(router="random"), None),
    (kvsim.serve, dict(preemption="drop"), None),
    (kvsim.serve, dict(hardware="h2000"), ["serve", "--hardware", "h2000"]),
    (kvsim.capacity, dict(rate=4, slo_ttft_p99=2, max_gpus=0), None),
    (kvsim.capacity, dict(rate=4, slo_ttft_p99=2, tensor_parallel=[3]), None),
    (kvsim.capacity, dict(rate=4, slo_ttft_p99=-2), None),
]


class ErrorsCarryTheirParts(unittest.TestCase):
    def test_every_field_is_filled_where_the_message_names_it(self):
        for fn, kw, args in BAD:
            with self.subTest(fn=fn.__name__, kw=kw):
                kw = dict(kw)
                scenario = kw.pop("scenario", None)
                with self.assertRaises(kvsim.InputError) as e:
                    fn(scenario, **kw)
                err = e.exception
                msg = err.message
                self.assertTrue(err.file, msg)
                self.assertTrue(err.field, msg)
                if "value" in msg or "unknown " in msg or "no parameter" in msg or "file '" in msg or \
                        "is not of the form" in msg:
                    self.assertIsNotNone(err.value, msg)
                    self.assertIn(err.value, msg)
                if "allowed" in msg or "available" in msg or "its parameters" in msg:
                    self.assertIsInstance(err.allowed, list, msg)
                    self.assertTrue(err.allowed, msg)
                    for item in err.allowed:
                        self.assertIn(item, msg)
                        self.assertNotIn("did you mean", item)
                if args is not None:  # the same message as the CLI's
                    self.assertEqual(str(err), cli_error(*args, origin="kvsim." + fn.__name__))

    def test_the_structured_fields(self):
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan(hardware="h2000")
        self.assertEqual((e.exception.field, e.exception.value), ("hardware", "h2000"))
        self.assertIn("h200", e.exception.allowed)
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan(set=["chess.budgte=3"])
        self.assertEqual(e.exception.value, "budgte")
        self.assertIn("page_size", e.exception.allowed)
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.serve(router="random")
        self.assertEqual((e.exception.field, e.exception.value, e.exception.allowed),
                         ("router", "random", ["round_robin", "least_loaded"]))

    def test_plan_takes_tensor_parallel_and_dtypes(self):
        # Issue 43 item 5: the workload's TP and dtypes as keywords, checked as the file's fields.
        base = kvsim.plan(policies=["full"], context=32768, batch=1)
        tp2 = kvsim.plan(policies=["full"], context=32768, batch=1, tensor_parallel=2, weight_dtype="fp8", kv_dtype="fp8")
        self.assertEqual(tp2["workload"]["tensor_parallel"], 2)
        self.assertEqual((tp2["workload"]["weight_dtype"], tp2["workload"]["kv_dtype"]), ("fp8", "fp8"))
        self.assertEqual(base["workload"]["tensor_parallel"], 1)
        self.assertLess(tp2["results"][0]["tpot_ms"], base["results"][0]["tpot_ms"])
        frame = kvsim.plan_frame(policies=["full"], context=32768, tensor_parallel=2)
        self.assertEqual(list(frame["tensor_parallel"]), [2])
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan(tensor_parallel=3)  # does not divide llama-3.1-8b's heads
        self.assertEqual((e.exception.file, e.exception.field), ("kvsim.plan", "workload.tensor_parallel"))
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan(tensor_parallel=[1, 2])  # one value, as the CLI's option
        self.assertEqual((e.exception.file, e.exception.field, e.exception.allowed), ("kvsim.plan", "tensor_parallel", ["one value"]))
        self.assertIn("is a list", str(e.exception))
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.plan(kv_dtype="int3")
        self.assertEqual((e.exception.file, e.exception.field, e.exception.value), ("kvsim.plan", "workload.kv_dtype", "int3"))
        self.assertIn("fp8", e.exception.allowed)

    def test_errors_name_their_function_alike(self):
        # Every keyword's error names the function that took it, never the CLI's "command line".
        for fn, kw in ((kvsim.plan, {"context": 0}), (kvsim.plan, {"set": ["chess.budgte=3"]}),
                       (kvsim.plan, {"policies": ["nosuch"]}), (kvsim.target_plan, {"tpot_ms": 50, "context": 0}),
                       (kvsim.serve, {"router": "random"}), (kvsim.serve, {"set": ["quest.nope=1"]})):
            with self.subTest(fn=fn.__name__, kw=kw):
                with self.assertRaises(kvsim.InputError) as e:
                    fn(**kw)
                self.assertEqual(e.exception.file, "kvsim." + fn.__name__, str(e.exception))
                self.assertNotIn("command line", str(e.exception))

    def test_allowed_is_a_list_of_items(self):
        self.assertEqual(kvsim._kvsim.error_parts("value 'x' is not allowed; allowed: a, b, or c")[1], ["a", "b", "c"])
        self.assertEqual(kvsim._kvsim.error_parts("value 2 is outside; allowed: a number in [0, 1]")[1],
                         ["a number in [0, 1]"])
        self.assertIsNone(kvsim._kvsim.error_parts("nothing named")[1])

    def test_an_unknown_keyword_is_a_type_error(self):
        with self.assertRaises(TypeError):
            kvsim.plan(hardwear="h200")


class Catalog(unittest.TestCase):
    def test_the_catalog_lists_the_library(self):
        c = kvsim.catalog()
        self.assertEqual(c["hardware"], cli("hardware", "list").split())
        self.assertEqual(c["model"], cli("model", "list").split())
        self.assertEqual([p["name"] for p in c["policies"]], [l.split()[0] for l in cli("policy", "list").splitlines()])
        chess = next(p for p in c["policies"] if p["name"] == "chess")
        page = next(q for q in chess["params"] if q["name"] == "page_size")
        self.assertEqual((page["min"], page["max"], page["integer"]), (1, 65536, True))
        self.assertIn("fp8", c["dtypes"])


if __name__ == "__main__":
    unittest.main()
