"""kvsim ui: a local interactive planner over the kvsim module (docs/ui.md).

    python -m kvsim.ui [--host 127.0.0.1] [--port 8765]

One page: pick the GPU, host, model, context lengths, batch, dtypes, tensor parallelism and the policies
with their knobs (all listed by kvsim.catalog(), each knob with its range); the plan table and charts
update on every change; a budget sweep or a serving run goes with a progress bar; the report downloads
as HTML. Every computation is the same library call the CLI makes, and a bad value shows the CLI's
message (file, field, value, allowed) next to its control.

Flask (Debian python3-flask) serves it: a small, long-maintained WSGI framework whose development server
is enough for one local user, with no build step and no JavaScript toolchain (docs/ui.md, "Why Flask").
It listens on 127.0.0.1 unless --host says otherwise, and it reads only the library's own files: a
hardware, host, model or calibration value must be a name kvsim.catalog() lists, never a path.
"""
import argparse
import json
import os
import threading
import uuid

import kvsim

_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ui_page.html")
_NAME_KINDS = ("hardware", "host", "model", "calibration")


def _error_json(e):
    """An InputError as the page shows it: the CLI's line, and its parts for the control it names."""
    return {"error": {"text": str(e), "file": e.file, "line": e.line, "field": e.field, "value": e.value,
                      "allowed": e.allowed, "message": e.message}}


def _library_only(form, catalog):
    """Refuses anything but a library name for the file-backed fields: the UI never reads a path."""
    for kind in _NAME_KINDS:
        v = form.get(kind)
        if v not in (None, "") and v not in catalog[kind]:
            raise kvsim.InputError(
                f"ui: {kind}: value '{v}' is not a library name (the UI reads no paths; use the CLI or the "
                f"Python module for files); allowed: {', '.join(catalog[kind])}", "ui", 0, kind,
                f"value '{v}' is not a library name; allowed: {', '.join(catalog[kind])}")


_OVERRIDES = ("hardware", "host", "model", "calibration", "context", "output", "batch")


def request_of(form, catalog):
    """What the page's controls ask for: (a base scenario dict, the CLI overrides as kvsim.plan's keyword
    arguments, the policies, the --set list). The overrides go in as keywords, not into the dict, so a bad
    value gets exactly the message `kvsim plan --OPTION VALUE` prints; dtypes and TP have no CLI option
    and are scenario fields."""
    _library_only(form, catalog)
    workload = {"context_tokens": 131072, "output_tokens": 1024, "batch": "max"}  # scenarios/default.yaml's
    for key in ("weight_dtype", "kv_dtype", "tensor_parallel"):
        if form.get(key) not in (None, ""):
            workload[key] = form[key]
    base = {"hardware": "h100-sxm", "model": "llama-3.1-8b", "workload": workload}
    kw = {k: form[k] for k in _OVERRIDES if form.get(k) not in (None, "", [])}
    policies = form.get("policies") or [p["name"] for p in catalog["policies"]]
    sets = [f"{p}.{k}={v}" for p, knobs in (form.get("knobs") or {}).items() if p in policies
            for k, v in knobs.items() if v not in (None, "")]
    return base, kw, policies, sets


def scenario_of(form, catalog):
    """The whole scenario dict (overrides in place) for a sweep or serving run, checked by planning it
    first, so its errors read as the plan's do."""
    base, kw, policies, sets = request_of(form, catalog)
    kvsim.plan(base, policies=policies, set=sets, **kw)
    s = dict(base, workload=dict(base["workload"]))
    for k in ("hardware", "host", "model", "calibration"):
        if k in kw:
            s[k] = kw[k]
    for k, field in (("context", "context_tokens"), ("output", "output_tokens"), ("batch", "batch")):
        if k in kw:
            s["workload"][field] = kw[k]
    return s, policies, sets


class Jobs:
    """Budget sweeps and serving runs in background threads, each with its progress (steps done of total)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs = {}

    def start(self, steps, run):
        """run(advance) -> result; advance() marks one of `steps` done."""
        jid = uuid.uuid4().hex
        job = {"done": 0, "total": steps, "result": None, "error": None, "finished": False}
        with self._lock:
            self._jobs[jid] = job

        def advance():
            with self._lock:
                job["done"] += 1

        def work():
            try:
                result = run(advance)
                with self._lock:
                    job["result"] = result
            except kvsim.InputError as e:
                with self._lock:
                    job["error"] = _error_json(e)["error"]
            except Exception as e:  # a bug, not bad input: shown as such instead of a job that never ends
                with self._lock:
                    job["error"] = {"text": f"internal error: {e!r} (please report it)"}
            finally:
                with self._lock:
                    job["finished"] = True
        threading.Thread(target=work, daemon=True).start()
        return jid

    def get(self, jid):
        with self._lock:
            job = self._jobs.get(jid)
            return None if job is None else dict(job)


def budget_sweep(scenario, policies, sets, advance, shards=8):
    """A sweep over each chosen policy's budget knob (the first parameter whose name says budget) at the
    page's other settings; shards run one after another so the page can show progress."""
    catalog = {p["name"]: p for p in kvsim.catalog()["policies"]}
    axes = []
    for name in policies:
        knob = next((q for q in catalog[name]["params"] if q["default"] > 0 and
                     ("budget" in q["name"] or q["name"] == "rho_page")),
                    None)
        if knob is None:
            continue
        lo, hi, d = knob["min"], knob["max"], knob["default"]
        values = sorted({v for v in ([d / 4, d / 2, d, d * 2, d * 4] if knob["integer"] else
                                     [d / 4, d / 2, d, min(hi, d * 2), min(hi, d * 4)])
                         if (v > lo or (v == lo and not knob["min_exclusive"])) and v <= hi})
        if knob["integer"]:
            values = sorted({int(round(v)) for v in values if round(v) >= lo})
        axes.append({f"{name}.{knob['name']}": values})
    # The page's other knob settings are the base scenario's policy parameters (a sweep's policies are names).
    params = {}
    for text in sets:
        name, rest = text.split(".", 1)
        key, value = rest.split("=", 1)
        params.setdefault(name, {})[key] = value
    scenario = dict(scenario, policies=[dict({"name": p}, **params.get(p, {})) for p in policies])
    spec = {"scenario": scenario, "policies": policies, "axes": axes or [{"workload.batch": [1]}]}
    text = json.dumps(spec)
    parts = []
    for i in range(shards):
        parts.append(kvsim._sweep_shard(text, "<ui sweep>", i, shards))
        advance()
    frame = kvsim._frame(kvsim._call(kvsim._kvsim.sweep_merge, parts, ""))
    return json.loads(frame.to_json(orient="records"))


def serving_run(scenario, policies, sets, rate, requests, advance):
    """`kvsim serve` per policy, one after another (progress: policies done)."""
    scenario = dict(scenario, serving={"arrival": "poisson", "rate": rate, "requests": requests,
                                       "prompt_tokens": scenario["workload"]["context_tokens"][0]
                                       if isinstance(scenario["workload"]["context_tokens"], list)
                                       else scenario["workload"]["context_tokens"],
                                       "output_tokens": scenario["workload"]["output_tokens"]})
    scenario["workload"] = dict(scenario["workload"], batch=1)
    out = []
    for p in policies:
        r = kvsim.serve(scenario, policies=[p], set=[s for s in sets if s.startswith(p + ".")])
        out.extend(r["summary"]["policies"])
        advance()
    return out


_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def create_app(loopback_only=True):
    """The Flask app. loopback_only (the default, as when it listens on 127.0.0.1): requests must name a
    loopback host, so a web page elsewhere cannot reach it through DNS rebinding."""
    from flask import Flask, Response, abort, jsonify, request
    from plotly.offline import get_plotlyjs

    app = Flask("kvsim.ui")
    catalog = kvsim.catalog()
    jobs = Jobs()
    state = {"plan": None}
    plotly_js = get_plotlyjs()

    @app.before_request
    def same_machine():
        if loopback_only and request.host.rsplit(":", 1)[0] not in _LOOPBACK_NAMES:
            abort(403)

    def form():
        # JSON only: another site's page cannot send application/json here without a CORS preflight,
        # which this server never grants.
        return request.get_json(silent=True) or {}

    @app.get("/")
    def page():
        with open(_PAGE, encoding="utf-8") as f:
            html = f.read()
        return html.replace("/*CATALOG*/null", json.dumps(catalog))

    @app.get("/plotly.js")
    def plotly():
        return Response(plotly_js, mimetype="application/javascript",
                        headers={"Cache-Control": "max-age=86400"})

    @app.get("/api/catalog")
    def get_catalog():
        return jsonify(catalog)

    @app.post("/api/plan")
    def plan():
        try:
            base, kw, policies, sets = request_of(form(), catalog)
            state["plan"] = kvsim.plan(base, policies=policies, set=sets, **kw)
        except kvsim.InputError as e:
            return jsonify(_error_json(e)), 400
        return jsonify(state["plan"])

    @app.post("/api/sweep")
    def sweep():
        try:
            s, policies, sets = scenario_of(form(), catalog)
        except kvsim.InputError as e:
            return jsonify(_error_json(e)), 400
        return jsonify({"job": jobs.start(8, lambda adv: budget_sweep(s, policies, sets, adv))})

    @app.post("/api/serve")
    def serve():
        f = form()
        try:
            s, policies, sets = scenario_of(f, catalog)
        except kvsim.InputError as e:
            return jsonify(_error_json(e)), 400
        rate, n = f.get("rate", 2), f.get("requests", 200)
        return jsonify({"job": jobs.start(len(policies), lambda adv: serving_run(s, policies, sets, rate, n, adv))})

    @app.get("/api/job/<jid>")
    def job(jid):
        j = jobs.get(jid)
        return (jsonify(j), 200) if j is not None else (jsonify({"error": {"text": "no such job"}}), 404)

    @app.get("/api/report")
    def report():
        if state["plan"] is None:
            return jsonify({"error": {"text": "no plan yet"}}), 404
        html = kvsim.report(plan=state["plan"])
        return Response(html, mimetype="text/html",
                        headers={"Content-Disposition": "attachment; filename=kvsim-report.html"})

    return app


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvsim.ui", description="kvsim's local interactive planner")
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 opens it to the network)")
    ap.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    a = ap.parse_args(argv)
    loopback = a.host in ("127.0.0.1", "localhost", "::1")
    if not loopback:
        print(f"kvsim ui: listening on {a.host}: anyone who can reach this address can run plans here")
    create_app(loopback_only=loopback).run(host=a.host, port=a.port, threaded=True)


if __name__ == "__main__":
    main()
