"""Browser test of `python -m kvsim.ui` and of a generated `kvsim report` page (issue #32): headless
Chromium (Debian chromium, chromium-driver) driven by Selenium (python3-selenium). It opens a report,
then the running UI: changes a control and sees the table and a chart update, gives a bad value and sees
the CLI's message next to the control, and downloads the report. It saves screenshots of both pages to
docs/img/, or to KVSIM_SCREENSHOT_DIR (`make ui-screenshots` refreshes docs/img/). ctest runs it as
python.ui_browser; it skips (exit 77) when Chromium, chromedriver, Selenium or Flask is missing.
"""
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from support import CLI, SRC, cli_error, have  # noqa: E402 (after the path)

import kvsim  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


READY = CHROMIUM and DRIVER and have("selenium") and have("flask")


def screenshot(driver, name):
    """A PNG of the page in KVSIM_SCREENSHOT_DIR (default docs/img/; ctest points it into the build tree),
    palette-quantized when Pillow is there to keep it small."""
    folder = os.environ.get("KVSIM_SCREENSHOT_DIR") or os.path.join(SRC, "docs", "img")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    driver.save_screenshot(path)
    try:
        from PIL import Image
        Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)
    except ImportError:
        pass


@unittest.skipUnless(READY, "needs chromium, chromedriver, python3-selenium and python3-flask")
class Browser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from werkzeug.serving import make_server
        from kvsim import ui

        import logging
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log in the test output
        cls.dir = tempfile.TemporaryDirectory()
        cls.server = make_server("127.0.0.1", 0, ui.create_app(), threaded=True)
        cls.url = f"http://127.0.0.1:{cls.server.server_port}/"
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1400,900"):
            opts.add_argument(a)
        opts.add_experimental_option("prefs", {"download.default_directory": cls.dir.name,
                                               "download.prompt_for_download": False})
        for attempt in (1, 2):  # a Chromium start can fail on a loaded machine (DevToolsActivePort); once more
            try:
                cls.driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
                break
            except Exception as e:  # selenium's WebDriverException, or the driver process not answering
                if attempt == 2:
                    cls.server.shutdown()
                    raise
                print(f"Chromium did not start ({e!r}); trying once more")
        cls.driver.set_script_timeout(60)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.server.shutdown()
        cls.dir.cleanup()

    def wait(self, condition, what, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            v = condition()
            if v:
                return v
            time.sleep(0.1)
        page = self.js("return [document.body.dataset.state, document.body.dataset.updates,"
                       " (document.getElementById('status') || {}).textContent,"
                       " (document.getElementById('error') || {}).textContent]")
        self.fail(f"timed out waiting for {what}; page state, updates, status, error: {page}")

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def set_value(self, element_id, value):
        """Types a value into a control as a user would, and fires its change event."""
        self.js("const e = document.getElementById(arguments[0]); e.value = arguments[1];"
                "e.dispatchEvent(new Event('change', {bubbles: true}));", element_id, value)

    def test_1_a_generated_report(self):
        path = os.path.join(self.dir.name, "report.html")
        kvsim.report(plan=kvsim.plan(context=[32768, 131072], policies=["full", "quest", "snapkv", "chunkkv"]),
                     out=path)
        self.driver.get("file://" + path)
        self.wait(lambda: self.js("return document.querySelectorAll('.js-plotly-plot .main-svg').length") > 0,
                  "the report's charts")
        self.assertIn("quest", self.driver.page_source)
        self.js("document.querySelector('.js-plotly-plot').scrollIntoView()")
        screenshot(self.driver, "report.png")

    def test_2_the_ui(self):
        d = self.driver
        d.get(self.url)
        self.wait(lambda: self.js("return document.body.dataset.state") == "ok", "the first plan")
        # Controls come from the catalog: every GPU and policy the library lists.
        options = self.js("return [...document.getElementById('hardware').options].map(o => o.value)")
        self.assertEqual(options, kvsim.catalog()["hardware"])
        first_table = d.find_element("id", "plan").text
        first_chart = self.js("return JSON.stringify(document.getElementById('chart-xput').data.map(t => t.y))")
        self.assertIn("quest", first_table)
        # Each row carries its TPOT's 80% range, and the charts its error bars (docs/uncertainty.md).
        self.assertIn("TPOT 80% range", first_table)
        self.assertTrue(self.js("return document.querySelectorAll('#plan td.range').length") > 0)
        self.assertTrue(self.js("return document.getElementById('chart-tpot').data[0].error_y.array.some(v => v > 0)"))

        # A control changes: the table and a chart follow.
        updates = int(self.js("return document.body.dataset.updates"))
        self.set_value("context", "8192")
        self.wait(lambda: int(self.js("return document.body.dataset.updates")) > updates, "the plan to update")
        self.assertNotEqual(d.find_element("id", "plan").text, first_table)
        self.assertIn("8192", d.find_element("id", "plan").text)
        chart = self.js("return JSON.stringify(document.getElementById('chart-xput').data.map(t => t.y))")
        self.assertNotEqual(chart, first_chart)
        self.assertEqual(self.js("return document.getElementById('chart-xput').data[0].name"), "8192 tokens")

        # A bad value: the CLI's message, next to its control.
        self.set_value("batch", "0")
        slot = lambda: self.js("return document.querySelector('.err[data-for=\"workload.batch\"]').textContent")
        self.wait(slot, "the error next to the batch control")
        self.assertEqual(slot(), cli_error("plan", "--context", "8192", "--batch", "0", origin="kvsim.plan"))
        self.set_value("batch", "max")
        self.wait(lambda: self.js("return document.body.dataset.state") == "ok" and not slot(), "the error to clear")
        screenshot(d, "ui.png")

        # The report downloads: kvsim.report of the current plan.
        for name in os.listdir(self.dir.name):
            if name.startswith("kvsim-report"):
                os.remove(os.path.join(self.dir.name, name))
        d.find_element("id", "download").click()
        target = os.path.join(self.dir.name, "kvsim-report.html")
        self.wait(lambda: os.path.exists(target) and os.path.getsize(target) > 0, "the downloaded report")
        with open(target, encoding="utf-8") as f:
            page = f.read()
        self.assertIn("<title>kvsim report</title>", page)
        self.assertIn("8192", page)

    def test_3_a_serving_run_shows_its_progress_and_result(self):
        d = self.driver
        d.get(self.url)
        self.wait(lambda: self.js("return document.body.dataset.state") == "ok", "the first plan")
        self.set_value("context", "8192")
        self.js("for (const c of document.querySelectorAll('#policies input[type=checkbox]')) "
                "c.checked = ['full', 'quest'].includes(c.id.slice(4));")
        self.set_value("requests", "100")
        d.find_element("id", "serve").click()
        self.wait(lambda: "serve done" in d.find_element("id", "run-status").text, "the serving run", timeout=120)
        rows = d.find_element("id", "run").text
        self.assertIn("full", rows)
        self.assertIn("quest", rows)


if __name__ == "__main__":
    if not READY:
        print("skipped: needs chromium, chromedriver, python3-selenium and python3-flask")
        raise SystemExit(77)
    unittest.main()
