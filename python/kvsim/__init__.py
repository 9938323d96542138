"""kvsim from Python: the capacity planner, sweeps, the serving simulator and trace replay.

    import kvsim
    kvsim.plan("scenarios/default.yaml")                 # dict, as `kvsim plan --format json`
    kvsim.plan_frame({"hardware": "h100-sxm", ...})     # pandas DataFrame, the CSV's columns
    kvsim.sweep("scenarios/sweeps/budgets.yaml", executor="ray")
    kvsim.serve("scenarios/serving/default.yaml")       # {"summary": ..., "requests": DataFrame}
    kvsim.capacity(None, rate=4, slo_ttft_p99=2, slo_tpot_p99=0.05)

A scenario (or sweep spec) is a path to a YAML file, a dict with the file's structure, or YAML text.
Every function calls kvsim's C++ library in this process (the _kvsim extension), with the GIL released.
Bad input raises kvsim.InputError (a ValueError) with .file, .line, .field, .value, .allowed and
.message. docs/python.md has the whole API.
"""
import io
import json
import os
import re

_here = os.path.dirname(os.path.abspath(__file__))
# An installed wheel carries the scenario library beside the module; a build tree uses the source's.
if os.path.isdir(os.path.join(_here, "scenarios")) and not os.environ.get("KVSIM_DATA_DIR"):
    os.environ["KVSIM_DATA_DIR"] = os.path.join(_here, "scenarios")

from . import _kvsim  # noqa: E402

__all__ = ["InputError", "library_dir", "load_scenario", "plan", "plan_frame", "target_plan", "sweep", "serve",
           "capacity", "replay", "reproduce", "trace_info", "report"]


class InputError(ValueError):
    """A problem with the input, located: file (or "command line"/a function name), line (0: none),
    field (the dotted key or option), value and allowed (when the message names them), message."""

    def __init__(self, text, file="", line=0, field="", message=""):
        super().__init__(text)
        self.file, self.line, self.field, self.message = file, line, field, message or text
        m = re.search(r"value '([^']*)'|value (\S+)", self.message)
        self.value = (m.group(1) if m.group(1) is not None else m.group(2).rstrip(":;,")) if m else None
        a = self.message.rfind("allowed: ")
        self.allowed = self.message[a + len("allowed: "):] if a >= 0 else None


def _call(fn, *args):
    try:
        return fn(*args)
    except _kvsim.InputError as e:
        raise InputError(*e.args) from None


def library_dir():
    """The scenario library (hardware, hosts, models, calibration, scenarios) in use."""
    return _kvsim.library_dir()


class Scenario:
    """A scenario's YAML text and the name errors call it by (its path, "<dict>" or "<text>")."""

    def __init__(self, text, name):
        self.text, self.name = text, name

    def __repr__(self):
        return f"kvsim.Scenario({self.name!r})"


def load_scenario(scenario=None, default="default.yaml"):
    """A Scenario from a path, a dict, YAML text or None (the library's `default`)."""
    if isinstance(scenario, Scenario):
        return scenario
    if scenario is None:
        scenario = os.path.join(library_dir(), default)
    if isinstance(scenario, dict):
        return Scenario(json.dumps(scenario), "<dict>")  # JSON is YAML
    if isinstance(scenario, os.PathLike) or (isinstance(scenario, str) and "\n" not in scenario and
                                             (scenario.endswith((".yaml", ".yml")) or os.path.exists(scenario))):
        path = os.fspath(scenario)
        try:
            with open(path, encoding="utf-8") as f:
                return Scenario(f.read(), path)
        except OSError as e:
            raise InputError(f"{path}: cannot read ({e.strerror})", path, 0, "", f"cannot read ({e.strerror})") from None
    if isinstance(scenario, str):
        return Scenario(scenario, "<text>")
    raise TypeError(f"a scenario is a path, a dict or YAML text, not {type(scenario).__name__}")


def _frame(csv_text):
    try:
        import pandas
    except ImportError:
        raise ImportError("kvsim's tabular results need pandas (pip install pandas, or python3-pandas)") from None
    return pandas.read_csv(io.StringIO(csv_text))


def _list(x):
    return [] if x is None else [x] if isinstance(x, str) else list(x)


def plan(scenario=None, policies=None, set=None):
    """`kvsim plan`: memory, max batch, TTFT, TPOT and throughput per policy, as a dict (the JSON)."""
    s = load_scenario(scenario)
    return json.loads(_call(_kvsim.plan, s.text, s.name, _list(policies), _list(set))[0])


def plan_frame(scenario=None, policies=None, set=None):
    """`kvsim plan --format csv` as a DataFrame (the CSV's columns)."""
    s = load_scenario(scenario)
    return _frame(_call(_kvsim.plan, s.text, s.name, _list(policies), _list(set))[1])


def _floor(trace, min_recall, max_output_error):
    return ("" if trace is None else os.fspath(trace), -1.0 if min_recall is None else float(min_recall),
            -1.0 if max_output_error is None else float(max_output_error))


def target_plan(scenario=None, tpot_ms=None, throughput=None, policies=None, set=None, trace=None, min_recall=None,
                max_output_error=None):
    """`kvsim plan --target-tpot MS` or `--target-throughput TOK_S`: per policy and context the budget and
    batch that meet the target best, as a list of dicts. With a quality floor (min_recall and/or
    max_output_error, measured by replaying `trace`) the policies' budget knobs are searched; without
    one the budgets stay at the scenario's."""
    s = load_scenario(scenario)
    return json.loads(_call(_kvsim.target_plan, s.text, s.name, _list(policies), _list(set), float(tpot_ms or 0),
                            float(throughput or 0), *_floor(trace, min_recall, max_output_error)))


def _sweep_shard(text, name, index, count):
    return _call(_kvsim.sweep_run, text, name, index, count, 1, "")


def sweep(spec, executor="local", shards=None, threads=0):
    """`kvsim sweep SPEC` as a DataFrame (the results CSV's columns and row order).

    executor="local" runs every point in this process (threads: 0 = one per core). executor="ray"
    splits the points into `shards` (default: the cluster's CPUs) with `--shard i/N`'s rule, runs each
    shard as a Ray task and merges them: the same rows, in the same order, as a local run. Call
    ray.init() first to choose the cluster; otherwise a local one starts."""
    s = load_scenario(spec, default="sweeps/budgets.yaml")
    if executor == "local":
        return _frame(_call(_kvsim.sweep_run, s.text, s.name, 0, 1, int(threads), ""))
    if executor != "ray":
        raise InputError(f"sweep: executor: value '{executor}' is not allowed; allowed: local, ray", "sweep", 0,
                         "executor", f"value '{executor}' is not allowed; allowed: local, ray")
    import ray
    if not ray.is_initialized():
        ray.init()
    n = int(shards or max(1, int(ray.cluster_resources().get("CPU", 1))))
    task = ray.remote(_sweep_shard)
    parts = ray.get([task.remote(s.text, s.name, i, n) for i in range(n)])
    return _frame(_call(_kvsim.sweep_merge, parts, ""))


def serve(scenario=None, policies=None, set=None, rate=None, requests=None, replicas=None):
    """`kvsim serve`: {"summary": the JSON summary (dict), "requests": the per-request CSV (DataFrame)}."""
    s = load_scenario(scenario, default="serving/default.yaml")
    summary, csv = _call(_kvsim.serve, s.text, s.name, _list(policies), _list(set), float(rate or 0),
                         int(requests or 0), int(replicas or 0))
    return {"summary": json.loads(summary), "requests": _frame(csv)}


def _capacity_one(text, name, policy, set, *args):
    return json.loads(_call(_kvsim.capacity, text, name, [policy], set, *args))


def capacity(scenario=None, rate=None, slo_ttft_p99=None, slo_tpot_p99=None, policies=None, set=None,
             requests=None, max_gpus=64, tensor_parallel=None, executor="local", trace=None, min_recall=None,
             max_output_error=None):
    """`kvsim capacity`: per policy the fewest GPUs (replicas x TP) meeting the p99 SLOs (seconds) at
    `rate`, as a DataFrame. A quality floor (min_recall, max_output_error on `trace`) searches the
    budgets as target_plan does. executor="ray" searches the policies as parallel Ray tasks (same rows)."""
    s = load_scenario(scenario, default="serving/default.yaml")
    args = (float(rate or 0), int(requests or 0), float(slo_ttft_p99 or 0), float(slo_tpot_p99 or 0),
            int(max_gpus), [int(t) for t in _list(tensor_parallel)], *_floor(trace, min_recall, max_output_error))
    if executor == "local":
        rows = json.loads(_call(_kvsim.capacity, s.text, s.name, _list(policies), _list(set), *args))
    elif executor == "ray":
        import ray
        if not ray.is_initialized():
            ray.init()
        names = _list(policies) or _policies_of(s, set)
        task = ray.remote(_capacity_one)
        rows = [r for part in ray.get([task.remote(s.text, s.name, p, _list(set), *args) for p in names]) for r in part]
    else:
        raise InputError(f"capacity: executor: value '{executor}' is not allowed; allowed: local, ray", "capacity", 0,
                         "executor", f"value '{executor}' is not allowed; allowed: local, ray")
    try:
        import pandas
        return pandas.DataFrame(rows)
    except ImportError:
        return rows


def _policies_of(s, set=None):
    """The policy names of a scenario, in its order (as `kvsim plan` lists them)."""
    seen = []
    for r in plan(s, set=set)["results"]:
        if r["policy"] not in seen:
            seen.append(r["policy"])
    return seen


def replay(trace, scenario=None, policies=None, set=None, max_steps=0, threads=0):
    """`kvsim replay TRACE`: {"report": the JSON report (dict), "rows": the CSV rows (DataFrame)}.
    `scenario` is a path (or None: the default scenario) for the simulated columns."""
    report, csv = _call(_kvsim.replay, os.fspath(trace), "" if scenario is None else os.fspath(scenario),
                        _list(policies), _list(set), int(max_steps), int(threads))
    return {"report": json.loads(report), "rows": _frame(csv)}


def reproduce(paper=None):
    """`kvsim reproduce [PAPER]`: every published figure next to its prediction, as a DataFrame."""
    rows = json.loads(_call(_kvsim.reproduce, paper or ""))
    try:
        import pandas
        return pandas.DataFrame(rows)
    except ImportError:
        return rows


def trace_info(path, profile=True):
    """`kvsim trace info --format json` as a dict."""
    return json.loads(_call(_kvsim.trace_info, os.fspath(path), bool(profile)))


def _report_text(kind, x, csv):
    """(name, text) of one report input: a path, a dict (JSON kinds), a DataFrame or CSV text (CSV kinds),
    or JSON text."""
    if isinstance(x, dict):
        return f"<{kind} dict>", json.dumps(x)
    if hasattr(x, "to_csv"):
        return f"<{kind} DataFrame>", x.to_csv(index=False)
    if isinstance(x, str) and ("\n" in x or x.lstrip().startswith("{")):
        return f"<{kind} text>", x
    if isinstance(x, (str, os.PathLike)):
        path = os.fspath(x)
        try:
            with open(path, encoding="utf-8") as f:
                return path, f.read()
        except OSError as e:
            raise InputError(f"report: {kind}: value '{path}': cannot read ({e.strerror})", "report", 0, kind,
                             f"value '{path}': cannot read ({e.strerror})") from None
    what = "a path, a DataFrame or CSV text" if csv else "a path, a dict or JSON text"
    raise TypeError(f"report's {kind} is {what}, not {type(x).__name__}")


def report(plan=None, sweep=None, pareto=None, serve=None, requests=None, replay=None, scenario=None, out=None,
           series=None):
    """`kvsim report`: one self-contained HTML page (str; also written atomically to `out` when given).
    plan/serve/replay: a path, a dict or JSON text; sweep/pareto/requests/series: a path, a DataFrame or
    CSV text; serve may be kvsim.serve's own result ({"summary", "requests"}); scenario: as plan() takes it,
    run here (plan, and serve when it has a serving: block). Plotly.js comes from KVSIM_PLOTLY_JS, Debian's
    python3-plotly, or the plotly package's copy."""
    if isinstance(serve, dict) and "summary" in serve:
        serve, requests = serve["summary"], serve.get("requests") if requests is None else requests
    sources = {}
    for kind, x, csv in (("plan", plan, False), ("sweep", sweep, True), ("pareto", pareto, True), ("serve", serve, False),
                         ("requests", requests, True), ("series", series, True), ("replay", replay, False)):
        if x is not None:
            sources[kind] = _report_text(kind, x, csv)
    text, name = "", ""
    if scenario is not None:
        s = load_scenario(scenario)
        text, name = s.text, s.name
    if not os.environ.get("KVSIM_PLOTLY_JS") and not os.path.exists("/usr/share/python3-plotly/plotly.js"):
        try:  # a pip-installed plotly ships the library too
            import plotly
            js = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
            if os.path.exists(js):
                os.environ["KVSIM_PLOTLY_JS"] = js
        except ImportError:
            pass
    return _call(_kvsim.report, sources, text, name, "" if out is None else os.fspath(out))
