"""kvsim from Python: the capacity planner, sweeps, the serving simulator and trace replay.

    import kvsim
    kvsim.plan("scenarios/default.yaml")                 # dict, as `kvsim plan --format json`
    kvsim.plan(hardware="h200", model="qwen2.5-14b", context=[32768, 131072])   # the CLI's overrides
    kvsim.plan_frame({"hardware": "h100-sxm", ...})     # pandas DataFrame, the CSV's columns
    kvsim.sweep("scenarios/sweeps/budgets.yaml", executor="ray")
    kvsim.serve("scenarios/serving/default.yaml")       # {"summary": ..., "requests": DataFrame}
    kvsim.capacity(None, rate=4, slo_ttft_p99=2, slo_tpot_p99=0.05)

A scenario (or sweep spec) is a path to a YAML file, a dict with the file's structure, or YAML text.
Every function calls kvsim's C++ library in this process (the _kvsim extension), with the GIL released.
The keyword arguments are the CLI options of the same subcommand (--hardware is hardware=, --slo-ttft-p99
is slo_ttft_p99=, in seconds), checked by the same C++ code against the same ranges. Bad input raises
kvsim.InputError (a ValueError) with .file, .line, .field, .value, .allowed and .message.
docs/python.md has the whole API.
"""
import io
import json
import os

_here = os.path.dirname(os.path.abspath(__file__))
# An installed wheel carries the scenario library beside the module; a build tree uses the source's.
if os.path.isdir(os.path.join(_here, "scenarios")) and not os.environ.get("KVSIM_DATA_DIR"):
    os.environ["KVSIM_DATA_DIR"] = os.path.join(_here, "scenarios")

from . import _kvsim  # noqa: E402

__all__ = ["InputError", "library_dir", "catalog", "load_scenario", "plan", "plan_frame", "target_plan", "sweep", "serve",
           "capacity", "replay", "reproduce", "trace_info", "report"]


class InputError(ValueError):
    """A problem with the input, located: file (the scenario's path, "<dict>", "<text>", or the function
    whose keyword it was: "kvsim.plan", "kvsim.serve", ...), line (0: none), field (the dotted key or
    option), value (a string) and allowed (a list of strings: the message's allowed values, each range or
    name one item), each None where the message names none (read by the C++ library from the message it
    formed, core/error_parts.hpp), message."""

    def __init__(self, text, file="", line=0, field="", message="", value=None, allowed=None):
        super().__init__(text)
        self.file, self.line, self.field, self.message = file, line, field, message or text
        if value is None and allowed is None:  # raised here in Python: the same reading of the message
            value, allowed = _kvsim.error_parts(self.message)
        self.value, self.allowed = value, allowed


def _call(fn, *args):
    try:
        return fn(*args)
    except _kvsim.InputError as e:
        raise InputError(*e.args) from None


def _keywords(**kw):
    """The keyword arguments given (not None), each as JSON text for the C++ side, which checks them."""
    def plain(x):  # numpy scalars and the like
        return x.item() if hasattr(x, "item") else str(x)
    return {k: json.dumps(list(v) if isinstance(v, tuple) else v, default=plain) for k, v in kw.items()
            if v is not None}


def library_dir():
    """The scenario library (hardware, hosts, models, calibration, scenarios) in use."""
    return _kvsim.library_dir()


def catalog():
    """What the library offers, as a dict: hardware, host, model and calibration names; policies with
    every parameter (default, range text and numeric min/max, integer, choices, doc); dtypes; the
    tensor-parallel range. The UI builds its controls from it."""
    return json.loads(_kvsim.catalog())


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


_PLAN_DOC = """
    Keyword arguments (each as `kvsim plan --OPTION`; None keeps the scenario's):
      hardware, host, model, calibration: a library name (kvsim.catalog()) or a YAML path
      context: tokens, an int or a list of ints; output: output tokens; batch: an int or "max"
      tensor_parallel: the TP degree; weight_dtype, kv_dtype: "fp32", "fp16", "bf16" or "fp8"
      policies: policy names (replace the scenario's list); set: "POLICY.PARAM=VALUE" strings"""


def plan(scenario=None, policies=None, set=None, *, hardware=None, host=None, model=None, calibration=None,
         context=None, output=None, batch=None, tensor_parallel=None, weight_dtype=None, kv_dtype=None):
    s = load_scenario(scenario)
    kw = _keywords(hardware=hardware, host=host, model=model, calibration=calibration, context=context,
                   output=output, batch=batch, tensor_parallel=tensor_parallel, weight_dtype=weight_dtype,
                   kv_dtype=kv_dtype)
    return json.loads(_call(_kvsim.plan, s.text, s.name, _list(policies), _list(set), kw)[0])


plan.__doc__ = """`kvsim plan`: memory, max batch, TTFT, TPOT and throughput per policy, as a dict (the JSON).

    kvsim.plan(hardware="h200", model="qwen2.5-14b", context=[32768, 131072])
""" + _PLAN_DOC


def plan_frame(scenario=None, policies=None, set=None, *, hardware=None, host=None, model=None, calibration=None,
               context=None, output=None, batch=None, tensor_parallel=None, weight_dtype=None, kv_dtype=None):
    s = load_scenario(scenario)
    kw = _keywords(hardware=hardware, host=host, model=model, calibration=calibration, context=context,
                   output=output, batch=batch, tensor_parallel=tensor_parallel, weight_dtype=weight_dtype,
                   kv_dtype=kv_dtype)
    return _frame(_call(_kvsim.plan, s.text, s.name, _list(policies), _list(set), kw)[1])


plan_frame.__doc__ = "`kvsim plan --format csv` as a DataFrame (the CSV's columns).\n" + _PLAN_DOC


def _floor(trace):
    return None if trace is None else os.fspath(trace)


def target_plan(scenario=None, tpot_ms=None, throughput=None, policies=None, set=None, trace=None, min_recall=None,
                max_output_error=None, *, knob=None, exhaustive=None, trace_max_steps=None, trace_memory_limit=None,
                quality_cache=None, hardware=None, host=None, model=None, calibration=None, context=None,
                output=None, batch=None, tensor_parallel=None, weight_dtype=None, kv_dtype=None):
    s = load_scenario(scenario)
    kw = _keywords(tpot_ms=tpot_ms, throughput=throughput, trace=_floor(trace), min_recall=min_recall,
                   max_output_error=max_output_error, knob=_list(knob) or None, exhaustive=exhaustive,
                   trace_max_steps=trace_max_steps, trace_memory_limit=trace_memory_limit,
                   quality_cache=_floor(quality_cache), hardware=hardware, host=host, model=model,
                   calibration=calibration, context=context, output=output, batch=batch,
                   tensor_parallel=tensor_parallel, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    return json.loads(_call(_kvsim.target_plan, s.text, s.name, _list(policies), _list(set), kw))


target_plan.__doc__ = """`kvsim plan --target-tpot MS` or `--target-throughput TOK_S`: per policy and context the
    budget and batch that meet the target best, as a list of dicts. With a quality floor (min_recall
    and/or max_output_error, measured by replaying `trace`) the policies' budget knobs are searched;
    without one the budgets stay at the scenario's.
      tpot_ms (> 0) or throughput (> 0, tokens/s per GPU): exactly one
      trace: a trace path; min_recall: 0 .. 1; max_output_error: >= 0
      knob: "POLICY.PARAM=V1,V2,..." strings (searched instead of the policy's default knobs); exhaustive: bool
      trace_max_steps: >= 0 (0: all); trace_memory_limit: GiB (> 0, default 8); quality_cache: a JSON path""" + \
    _PLAN_DOC


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


_SERVE_DOC = """
    Keyword arguments (each as the CLI option; None keeps the scenario's serving block):
      hardware, model, calibration: a library name (kvsim.catalog()) or a YAML path
      rate: requests/s (> 0); requests: 1 .. 10000000; router: "round_robin" or "least_loaded";
      preemption: "recompute" or "swap"; policies, set: as for plan"""


def serve(scenario=None, policies=None, set=None, rate=None, requests=None, replicas=None, *, hardware=None,
          model=None, calibration=None, concurrency=None, router=None, preemption=None):
    s = load_scenario(scenario, default="serving/default.yaml")
    kw = _keywords(rate=rate, requests=requests, replicas=replicas, hardware=hardware, model=model,
                   calibration=calibration, concurrency=concurrency, router=router, preemption=preemption)
    summary, csv = _call(_kvsim.serve, s.text, s.name, _list(policies), _list(set), kw)
    return {"summary": json.loads(summary), "requests": _frame(csv)}


serve.__doc__ = """`kvsim serve`: {"summary": the JSON summary (dict), "requests": the per-request CSV (DataFrame)}.
      replicas: >= 1; concurrency: a closed loop of N clients (0: open loop)""" + _SERVE_DOC


def _capacity_one(text, name, policy, set, kw):
    return json.loads(_call(_kvsim.capacity, text, name, [policy], set, kw))


def capacity(scenario=None, rate=None, slo_ttft_p99=None, slo_tpot_p99=None, policies=None, set=None,
             requests=None, max_gpus=None, tensor_parallel=None, executor="local", trace=None, min_recall=None,
             max_output_error=None, *, trace_max_steps=None, trace_memory_limit=None, quality_cache=None,
             hardware=None, model=None, calibration=None, router=None, preemption=None):
    s = load_scenario(scenario, default="serving/default.yaml")
    kw = _keywords(rate=rate, requests=requests, slo_ttft_p99=slo_ttft_p99, slo_tpot_p99=slo_tpot_p99,
                   max_gpus=max_gpus, tensor_parallel=_list(tensor_parallel) or None, trace=_floor(trace),
                   min_recall=min_recall, max_output_error=max_output_error, trace_max_steps=trace_max_steps,
                   trace_memory_limit=trace_memory_limit, quality_cache=_floor(quality_cache), hardware=hardware,
                   model=model, calibration=calibration, router=router, preemption=preemption)
    if executor == "local":
        rows = json.loads(_call(_kvsim.capacity, s.text, s.name, _list(policies), _list(set), kw))
    elif executor == "ray":
        import ray
        if not ray.is_initialized():
            ray.init()
        names = _list(policies) or _policies_of(s, set)
        task = ray.remote(_capacity_one)
        rows = [r for part in ray.get([task.remote(s.text, s.name, p, _list(set), kw) for p in names]) for r in part]
    else:
        raise InputError(f"capacity: executor: value '{executor}' is not allowed; allowed: local, ray", "capacity", 0,
                         "executor", f"value '{executor}' is not allowed; allowed: local, ray")
    try:
        import pandas
        return pandas.DataFrame(rows)
    except ImportError:
        return rows


capacity.__doc__ = """`kvsim capacity`: per policy the fewest GPUs (replicas x TP) meeting the p99 SLOs at
    `rate`, as a DataFrame. A quality floor (min_recall, max_output_error on `trace`) searches the budgets
    as target_plan does. executor="ray" searches the policies as parallel Ray tasks (same rows).
      slo_ttft_p99, slo_tpot_p99: seconds (> 0; at least one); max_gpus: 1 .. 4096 (default 64);
      tensor_parallel: degrees to try (default 1 2 4 8); trace, min_recall, max_output_error, trace_max_steps,
      trace_memory_limit, quality_cache: as target_plan""" + \
    _SERVE_DOC


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
