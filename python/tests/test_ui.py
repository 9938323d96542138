"""The UI's server (python/kvsim/ui.py) through Flask's test client, without a browser: the plan it
returns is kvsim.plan's, a bad value comes back as the CLI's message with its parts, paths are refused,
and a budget sweep and a serving run finish with their progress counted. Skips without Flask or plotly.
The browser side is python/browser_tests/test_ui_browser.py."""
import os
import subprocess
import time
import unittest

import kvsim
from support import CLI, SRC, have


@unittest.skipUnless(have("flask") and have("plotly"), "needs python3-flask and python3-plotly")
class Server(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from kvsim import ui
        cls.client = ui.create_app().test_client()

    def post(self, path, body):
        return self.client.post(path, json=body)

    def finish(self, job):
        for _ in range(600):
            j = self.client.get("/api/job/" + job).get_json()
            if j["finished"]:
                return j
            time.sleep(0.1)
        self.fail("the job did not finish")

    def test_the_plan_is_kvsim_plan(self):
        r = self.post("/api/plan", {"hardware": "h200", "context": [8192, 32768], "batch": 4,
                                    "policies": ["full", "quest"], "knobs": {"quest": {"budget_tokens": "1024"}}})
        self.assertEqual(r.status_code, 200)
        want = kvsim.plan(None,
                          policies=["full", "quest"], set=["quest.budget_tokens=1024"], hardware="h200",
                          context=[8192, 32768], batch=4)
        self.assertEqual(r.get_json()["results"], want["results"])
        self.assertIn("kvsim report", self.client.get("/api/report").get_data(as_text=True))

    def test_a_bad_value_is_the_cli_message_with_its_parts(self):
        r = self.post("/api/plan", {"output": -5})
        self.assertEqual(r.status_code, 400)
        e = r.get_json()["error"]
        cli = subprocess.run([CLI, "plan", "--output", "-5"], capture_output=True, text=True, cwd=SRC)
        # The CLI's message, its source named as the Python module names it (the UI calls kvsim.plan).
        self.assertEqual(e["text"], "kvsim.plan" + cli.stderr.strip().removeprefix("kvsim: error: command line"))
        self.assertEqual((e["field"], e["value"], e["allowed"]), ("workload.output_tokens", "-5", ["1 .. 4294967296"]))

    def test_only_json_from_this_machine(self):
        self.assertEqual(self.client.get("/", headers={"Host": "evil.example:8765"}).status_code, 403)
        self.assertEqual(self.client.get("/", headers={"Host": "localhost:8765"}).status_code, 200)
        # A form post (what another site's page can send without a preflight) is not a request here.
        r = self.client.post("/api/plan", data='{"batch": 0}', content_type="text/plain")
        self.assertEqual(r.status_code, 200)
        self.assertNotIn("error", r.get_json())  # the body was ignored: the default plan

    def test_paths_are_refused(self):
        for kind in ("hardware", "host", "model", "calibration"):
            r = self.post("/api/plan", {kind: os.path.join(SRC, "scenarios", "hardware", "h200.yaml")})
            self.assertEqual(r.status_code, 400)
            e = r.get_json()["error"]
            self.assertEqual(e["field"], kind)
            self.assertIn("reads no paths", e["text"])
            self.assertIn("h200.yaml", e["value"])

    def test_a_budget_sweep_and_a_serving_run(self):
        job = self.post("/api/sweep", {"context": [8192], "batch": 1, "policies": ["full", "quest", "chess"],
                                       "knobs": {"chess": {"page_size": "16"}}}).get_json()["job"]
        j = self.finish(job)
        self.assertIsNone(j["error"])
        self.assertEqual(j["done"], j["total"])
        rows = j["result"]
        self.assertEqual(sum(r["policy"] == "full" for r in rows), 1)
        budgets = sorted(int(kv.split("=")[1]) for r in rows if r["policy"] == "quest"
                         for kv in r["params"].split(";") if kv.startswith("budget_tokens="))
        self.assertEqual(budgets, [512, 1024, 2048, 4096, 8192])  # 1/4x .. 4x quest's default 2048
        self.assertTrue(all("page_size=16" in r["params"] for r in rows if r["policy"] == "chess"))
        job = self.post("/api/serve", {"context": [8192], "policies": ["full", "quest"], "requests": 50,
                                       "rate": 1}).get_json()["job"]
        j = self.finish(job)
        self.assertIsNone(j["error"])
        self.assertEqual([p["policy"] for p in j["result"]], ["full", "quest"])
        self.assertEqual(j["done"], 2)


if __name__ == "__main__":
    unittest.main()
