"""kvsim.report against `kvsim report` (run by ctest as python.kvsim with the other tests): the same page
from paths, from loaded objects (dicts, DataFrames, CSV text) and from kvsim.serve's own result; written
atomically to `out`; bad input raises kvsim.InputError and writes nothing.
"""
import json
import os
import tempfile
import unittest

import kvsim
from support import cli

OPEN = '<script type="application/json" id="kvsim-data">'


def data_block(html):
    a = html.index(OPEN) + len(OPEN)
    return json.loads(html[a:html.index("</script>", a)])


class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.plan_path = os.path.join(d, "plan.json")
        cli("plan", "--context", "16384", "--policy", "full", "--policy", "quest", "--format", "json", "-o", cls.plan_path)
        cls.serve_path, cls.req_path = os.path.join(d, "s.json"), os.path.join(d, "r.csv")
        cli("serve", "--policy", "full", "--policy", "quest", "--requests", "60", "--format", "json", "-o", cls.serve_path,
            "--requests-csv", cls.req_path)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_paths_match_the_cli_page(self):
        out = os.path.join(self.tmp.name, "cli.html")
        cli("report", "--plan", self.plan_path, "--serve", self.serve_path, "--requests", self.req_path, "-o", out)
        with open(out, encoding="utf-8") as f:
            page = f.read()
        html = kvsim.report(plan=self.plan_path, serve=self.serve_path, requests=self.req_path)
        self.assertEqual(data_block(html), data_block(page))
        self.assertIn("Plotly.newPlot", html)

    def test_loaded_objects_give_the_same_data(self):
        import pandas
        with open(self.plan_path) as f:
            plan = json.load(f)
        with open(self.serve_path) as f:
            summary = json.load(f)
        requests = pandas.read_csv(self.req_path)
        out = os.path.join(self.tmp.name, "py.html")
        html = kvsim.report(plan=plan, serve=summary, requests=requests, out=out)
        with open(out, encoding="utf-8", newline="") as f:  # Plotly has CRLF lines: read them as written
            self.assertEqual(f.read(), html)
        d = data_block(html)
        self.assertEqual(d["plan"], plan)
        self.assertEqual(d["serve"], summary)
        self.assertEqual(d["sources"]["plan"], "<plan dict>")
        self.assertEqual(len(d["requests"]["rows"]), len(requests))
        ttft = d["requests"]["columns"].index("ttft_s")
        self.assertEqual([r[ttft] for r in d["requests"]["rows"]], list(requests["ttft_s"]))

    def test_serve_result_and_scenario(self):
        result = kvsim.serve({"hardware": "h100-sxm", "model": "llama-3.1-8b",
                              "workload": {"context_tokens": 8192, "output_tokens": 256}, "policies": ["full"],
                              "serving": {"rate": 2, "requests": 30, "prompt_tokens": 4096, "output_tokens": 64}})
        d = data_block(kvsim.report(serve=result))
        self.assertEqual(d["serve"], result["summary"])
        self.assertEqual(len(d["requests"]["rows"]), 30)
        d = data_block(kvsim.report(scenario={"hardware": "h100-sxm", "model": "llama-3.1-8b",
                                              "workload": {"context_tokens": 8192, "output_tokens": 256},
                                              "policies": ["full", "quest"]}))
        self.assertEqual([r["policy"] for r in d["plan"]["results"]], ["full", "quest"])
        self.assertIsNone(d["serve"])

    def test_bad_input(self):
        out = os.path.join(self.tmp.name, "bad.html")
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.report(plan={"schema": "kvsim.plan/0"}, out=out)
        self.assertEqual(e.exception.field, "schema")
        self.assertEqual(e.exception.allowed, ['"kvsim.plan/1"'])
        with self.assertRaises(kvsim.InputError) as e:
            kvsim.report(serve=self.serve_path, requests="policy,tpot_s\nfull,0.1\n", out=out)
        self.assertEqual(e.exception.field, "ttft_s")
        with self.assertRaises(kvsim.InputError):
            kvsim.report(plan=os.path.join(self.tmp.name, "missing.json"))
        with self.assertRaises(TypeError):
            kvsim.report(plan=42)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
