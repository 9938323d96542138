#!/usr/bin/env python3
"""Real against synthetic: policy quality at a few budgets and the attention profile (issue 30).

    tools/dev/compare-traces.py REAL.safetensors SYNTHETIC [SYNTHETIC ...]
        [--budgets 256,512,1024] [--max-steps 32] [--needle TEXT | --needle-tokens FIRST:END]
        [--synthetic-needle] [--policy NAME ...]
        [--set KEY=VALUE ...] [--layers 0,6,12] [--format markdown|json] [--compact] [-o FILE] [--json FILE]
        [--workdir DIR] [--kvsim PATH]
    tools/dev/compare-traces.py --combine A.json B.json [...] [--compact] [-o FILE]

SYNTHETIC is a preset name from scenarios/traces/ (`tiny`, `needle`, ...) or a generator config YAML
(a value ending in .yaml/.yml or containing a `/`), e.g. the output of `kvsim trace fit`. Each is
generated at the real trace's shape with `kvsim trace gen`: the model shape (layers, heads, KV heads,
head dimension, RoPE base), the stored layers and KV heads, the prompt and generated lengths and the
stored prompt queries (obs_window) are set from `kvsim trace info REAL`, so only the attention knobs
differ. `--set` adds generator overrides after those (for every synthetic trace).

Then `kvsim replay TRACE --budget-sweep --format json` runs on every trace (the real one with
`--needle TEXT` when given: needle recall needs the model's tokenizer, so synthetic traces have none unless `--synthetic-needle` gives each one a needle at the real needle's
depth and length, replayed with `--needle-tokens` and its needle recall shown in brackets too),
and `kvsim trace info --profile-layers 0 --format json` profiles each. The report has, per policy and
budget (`policy@B` of the sweep; a budget the sweep does not hold for a trace, or whose fixed part
exceeds it, shows "—"), the mean attention-mass recall, top-k recall and relative output error of the
real trace and of each synthetic one with its difference from real, the worst |difference| per policy,
and the structural profile side by side.

`--layers` first slices the real trace to those model layers (`kvsim trace slice`), which replays
faster; the synthetic traces then store the same layers. Work files (generated traces, replay JSON)
go to a temporary folder, removed at the end, or to --workdir, kept, where a replay or profile whose
command and input are unchanged is reused. Outputs are written atomically. Exit status: 0 done, 1 a
kvsim command failed (its stderr is shown), 2 a usage or input error.

`--combine` joins the synthetic columns of earlier JSON reports on the same real trace (same path,
layers and decode rows; the real values must be equal), so a column can be added without replaying
the others again.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_KVSIM = os.path.join(HERE, "..", "..", "build", "kvsim")
METRICS = (("attention_recall", "recall"), ("topk_recall", "top-k recall"), ("output_error", "output error"))
# The profile's columns: (label, function of trace info's "profile" object).
PROFILE = (
    ("sink share", lambda p: p.get("sink_share")),
    ("recent share", lambda p: p.get("recent_share")),
    ("m90", lambda p: p.get("mass90_fraction")),
    ("entropy ratio", lambda p: p.get("attention_entropy_ratio")),
    ("cos(1)", lambda p: cosine_at(p, 1)),
    ("cos(8)", lambda p: cosine_at(p, 8)),
    ("cos(32)", lambda p: cosine_at(p, 32)),
)


class Failure(Exception):
    """An error with its exit status: 2 bad input, 1 a kvsim command that failed."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


def cosine_at(profile, distance):
    for c in profile.get("query_cosine") or []:
        if c.get("distance") == distance:
            return c.get("cosine")
    return None


def write_atomic(path, text):
    """Writes via a temporary file in the same folder and a rename, so no reader sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".compare-traces.", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def fresh(out, inputs):
    """Whether out exists and is newer than every input (the kvsim binary included)."""
    if not os.path.exists(out):
        return False
    t = os.path.getmtime(out)
    return all(os.path.getmtime(i) <= t for i in inputs if os.path.exists(i))


def run_kvsim(kvsim, args, out=None, inputs=None, stderr_to=None):
    """Runs kvsim and returns its stdout. With inputs (a --workdir run), skips a run whose output is
    fresh and whose command line, recorded beside it, is unchanged. stderr_to: a file that keeps the
    run's stderr (written before the stamp, so a reused run still has it)."""
    cmd = [kvsim] + args
    key = shlex.join(cmd) + "\n"
    stamp = out + ".cmd" if out else None
    if inputs is not None and out and fresh(out, inputs + [kvsim]) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == key:
                return None
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise Failure("command failed (exit %d): %s\n%s" % (proc.returncode, shlex.join(cmd), proc.stderr.strip()),
                      2 if proc.returncode == 2 else 1)
    if stderr_to:
        write_atomic(stderr_to, proc.stderr)
    if stamp:
        write_atomic(stamp, key)
    return proc.stdout


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Failure("%s: cannot read %s: %s" % (path, what, e), 1)


def info_json(kvsim, trace, out, reuse):
    """`kvsim trace info TRACE --format json` with the profile over every stored layer, kept in out."""
    cmd = ["trace", "info", trace, "--profile-layers", "0", "--format", "json"]
    key = shlex.join([kvsim] + cmd) + "\n"
    stamp = out + ".cmd"
    if reuse and fresh(out, [trace, kvsim]) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == key:
                return load_json(out, "trace info")
    text = run_kvsim(kvsim, cmd)  # trace info prints to standard output only
    try:
        info = json.loads(text)
    except ValueError as e:
        raise Failure("kvsim trace info %s printed no JSON: %s" % (trace, e), 1)
    write_atomic(out, text)
    write_atomic(stamp, key)
    return info


def shape_overrides(info):
    """Generator overrides that give a synthetic trace the real trace's shape and lengths."""
    model, stored = info["model"], info["stored"]
    prompt_queries = int(info["queries"]) - int(info["decode_queries"])
    if prompt_queries < 1:
        raise Failure("%s: the trace stores no prompt queries (obs window), which the generator needs at least 1 of"
                      % info.get("path"))
    index_list = lambda xs: "[" + ",".join(str(int(x)) for x in xs) + "]"
    return [
        "layers=%d" % model["layers"], "heads=%d" % model["heads"], "kv_heads=%d" % model["kv_heads"],
        "head_dim=%d" % model["head_dim"], "rope_theta=%r" % float(model["rope_theta"]),
        "store_layers=" + index_list(stored["layers"]), "store_kv_heads=" + index_list(stored["kv_heads"]),
        "prompt_tokens=%d" % info["prompt_tokens"], "generated_tokens=%d" % info["generated_tokens"],
        "obs_window=%d" % prompt_queries,
    ]


def synthetic_source(spec):
    """(`--preset`|`--config`, value, short name) for a preset name or a YAML path."""
    if spec.endswith((".yaml", ".yml")) or "/" in spec:
        if not os.path.isfile(spec):
            raise Failure("synthetic config %s: no such file (give a preset name from scenarios/traces/ or a YAML path)"
                          % spec)
        return "--config", spec, os.path.splitext(os.path.basename(spec))[0]
    return "--preset", spec, spec


def replay_json(kvsim, trace, out, opts, needle, reuse, needle_tokens=None):
    args = ["replay", trace, "--budget-sweep", "--format", "json", "--max-steps", str(opts.max_steps), "-o", out]
    for p in opts.policy or []:
        args += ["--policy", p]
    if opts.threads:
        args += ["--threads", str(opts.threads)]
    if needle:
        args += ["--needle", needle]
    if needle_tokens:
        args += ["--needle-tokens", "%d:%d" % tuple(needle_tokens)]
    run_kvsim(kvsim, args, out, [trace] if reuse else None)
    return load_json(out, "replay JSON")


def quality_cells(replay):
    """{(policy, budget): {metric: mean}} from a budget-sweep replay; labels are `policy@B`."""
    cells = {}
    for p in replay.get("policies", []):
        label = p.get("label", "")
        if "@" not in label:
            continue  # full attention: 1, 1, 0 by definition
        policy, budget = label.split("@", 1)
        q = p.get("quality", {})
        cells[(policy, int(budget))] = {m: (q.get(m) or {}).get("mean") for m, _ in METRICS}
        needle = q.get("needle_recall")
        cells[(policy, int(budget))]["needle_recall"] = needle.get("mean") if isinstance(needle, dict) else None
    return cells


def profile_row(info):
    p = info.get("profile") or {}
    return {label: fn(p) for label, fn in PROFILE}


def prepare_real(opts, kvsim, work):
    """The real trace to replay (sliced to --layers when given) and its info."""
    real = opts.real
    if not os.path.isfile(real) and not os.path.isdir(real):
        raise Failure("real trace %s: no such file or shard directory" % real)
    if opts.layers:
        sliced = os.path.join(work, "real-sliced.safetensors")
        run_kvsim(kvsim, ["trace", "slice", real, "--layers", opts.layers, "-o", sliced], sliced,
                  [real] if opts.workdir else None)
        real = sliced
    return real, info_json(kvsim, real, os.path.join(work, "real-info.json"), bool(opts.workdir))


def real_needle_span(opts, kvsim, real, work):
    """The real trace's needle as a token span [first, end) of its prompt: a one-row replay of full
    attention with --needle, which finds it with the model's tokenizer."""
    out = os.path.join(work, "real-needle.json")
    run_kvsim(kvsim, ["replay", real, "--policy", "full", "--max-steps", "1", "--needle", opts.needle,
                      "--format", "json", "-o", out], out, [real] if opts.workdir else None)
    return load_json(out, "replay JSON")["needle"]["tokens"]


def span_arg(text):
    """argparse type of --needle-tokens: "FIRST:END" as [first, end]."""
    try:
        first, end = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError("value '%s' is not a token span; allowed: FIRST:END, two integers" % text)
    if not 0 <= first < end:
        raise argparse.ArgumentTypeError("value '%s': allowed: 0 <= FIRST < END" % text)
    return [first, end]


def needle_override(span, prompt_tokens):
    """The generator's needle at the real needle's depth and length (it starts at the first sentence
    boundary at depth x P, so its first token may differ by a sentence)."""
    first, end = span
    return "needles=[{depth: %.6f, length: %d}]" % (first / prompt_tokens, end - first)


def generated_needle_span(stderr_text, trace):
    """`kvsim trace gen` prints "needle 0: tokens FIRST:END" per needle; the first one's span."""
    for line in stderr_text.splitlines():
        if "needle 0: tokens " in line:
            first, end = line.split("needle 0: tokens ", 1)[1].split(":")
            return [int(first), int(end)]
    raise Failure("kvsim trace gen wrote %s without a needle span on stderr" % trace, 1)


def generate_synthetic(opts, kvsim, work, overrides, spec, index):
    """Writes one synthetic trace at the real trace's shape; returns its record (replayed later)."""
    flag, value, name = synthetic_source(spec)
    base = os.path.join(work, "syn%d-%s" % (index, name))
    trace = base + ".safetensors"
    args = ["trace", "gen", flag, value]
    for s in overrides + (opts.set or []):
        args += ["--set", s]
    configs = [value] if flag == "--config" else []
    log = base + "-gen.log"
    run_kvsim(kvsim, args + ["-o", trace], trace, configs if opts.workdir else None, stderr_to=log)
    record = {"name": name, "source": spec, "trace": trace, "base": base}
    if any(o.startswith("needles=") for o in overrides):
        with open(log) as f:
            record["needle_tokens"] = generated_needle_span(f.read(), trace)
    return record


def collect(opts):
    """Runs every kvsim step and returns the comparison as plain data (the JSON report). The synthetic
    traces are generated before any replay, so a bad config fails in seconds, not after the real replay."""
    kvsim = opts.kvsim
    if not (os.path.isfile(kvsim) and os.access(kvsim, os.X_OK)):
        raise Failure("kvsim binary %s: not found or not executable (build it, or pass --kvsim PATH)" % kvsim)
    with tempfile.TemporaryDirectory(prefix="compare-traces.") as tmp:
        work = opts.workdir or tmp
        os.makedirs(work, exist_ok=True)
        reuse = bool(opts.workdir)
        real, real_info = prepare_real(opts, kvsim, work)
        overrides = shape_overrides(real_info)
        if opts.synthetic_needle:
            if not opts.needle and not opts.needle_tokens:
                raise Failure("--synthetic-needle needs --needle TEXT or --needle-tokens FIRST:END (the real trace's "
                              "needle)", 2)
            span = opts.needle_tokens or real_needle_span(opts, kvsim, real, work)
            overrides.append(needle_override(span, real_info["prompt_tokens"]))
        synthetics = [generate_synthetic(opts, kvsim, work, overrides, spec, i) for i, spec in enumerate(opts.synthetic)]
        real_replay = replay_json(kvsim, real, os.path.join(work, "real-replay.json"), opts, opts.needle, reuse,
                                  opts.needle_tokens)
        for s in synthetics:
            s["info"] = info_json(kvsim, s["trace"], s["base"] + "-info.json", reuse)
            s["replay"] = replay_json(kvsim, s["trace"], s["base"] + "-replay.json", opts, None, reuse,
                                      s.get("needle_tokens"))
        return build_report(opts, real_info, real_replay, overrides, synthetics)


def build_report(opts, real_info, real_replay, overrides, synthetics):
    real_cells = quality_cells(real_replay)
    syn_cells = [quality_cells(s["replay"]) for s in synthetics]
    policies = []
    for policy, _ in real_cells:
        if policy not in policies:
            policies.append(policy)
    rows = []
    for policy in policies:
        for b in opts.budgets:
            real = real_cells.get((policy, b))
            row = {"policy": policy, "budget": b, "real": real, "synthetic": []}
            for cells in syn_cells:
                syn = cells.get((policy, b))
                diff = None
                if syn and real:
                    diff = {m: (syn[m] - real[m]) if syn[m] is not None and real[m] is not None else None
                            for m, _ in METRICS}
                row["synthetic"].append({"values": syn, "diff": diff})
            rows.append(row)
    return {
        "schema": "kvsim.compare_traces/1",
        "real": {"path": opts.real, "layers": opts.layers, "needle": opts.needle,
                 "needle_tokens": (real_replay.get("needle") or {}).get("tokens"), "trace": real_replay.get("trace"),
                 "profile": profile_row(real_info)},
        "options": {"budgets": opts.budgets, "max_steps": opts.max_steps, "policies": opts.policy or "all",
                    "shape_overrides": overrides, "extra_overrides": opts.set or []},
        "synthetic": [{"name": s["name"], "source": s["source"], "trace": s["replay"].get("trace"),
                       "profile": profile_row(s["info"])} for s in synthetics],
        "rows": rows,
        "worst": worst_gaps(rows, len(synthetics)),
        "mean_abs_diff": mean_abs_diffs(rows, len(synthetics)),
    }


def worst_gaps(rows, n):
    """Per synthetic trace and policy: the largest |synthetic - real| recall over the budgets, and where."""
    worst = [dict() for _ in range(n)]
    for row in rows:
        for i, s in enumerate(row["synthetic"]):
            d = (s["diff"] or {}).get("attention_recall")
            if d is None:
                continue
            w = worst[i].get(row["policy"])
            if w is None or abs(d) > abs(w["recall_diff"]):
                worst[i][row["policy"]] = {"recall_diff": d, "budget": row["budget"]}
    return worst


def mean_abs_diffs(rows, n):
    """Per metric and synthetic trace: the mean |synthetic - real| over every (policy, budget) both have."""
    out = {}
    for metric, _ in METRICS:
        out[metric] = []
        for i in range(n):
            d = [abs(r["synthetic"][i]["diff"][metric]) for r in rows
                 if r["synthetic"][i]["diff"] and r["synthetic"][i]["diff"][metric] is not None]
            out[metric].append(sum(d) / len(d) if d else None)
    return out


def fmt(x, digits=3, signed=False):
    if x is None:
        return "—"
    return ("%+.*f" if signed else "%.*f") % (digits, x)


def markdown(report, compact=False):
    names = [s["name"] for s in report["synthetic"]]
    lines = ["Real trace: `%s` (%s tokens, %s prompt; %s decode rows replayed); budgets %s tokens; Δ = synthetic − real."
             % (report["real"]["path"], (report["real"]["trace"] or {}).get("tokens"),
                (report["real"]["trace"] or {}).get("prompt_tokens"), (report["real"]["trace"] or {}).get("decode_rows"),
                ", ".join(str(b) for b in report["options"]["budgets"])), ""]
    has_needle = any((r["real"] or {}).get("needle_recall") is not None for r in report["rows"])
    if compact:
        lines += compact_table(report, names, has_needle)
        return "\n".join(lines + worst_markdown(report, names) + profile_markdown(report)) + "\n"
    for metric, title in METRICS:
        lines += ["**%s** (mean)%s" % (title, ", real needle recall in brackets" if has_needle and
                                      metric == "attention_recall" else ""), ""]
        lines.append("| policy | budget | real | " + " | ".join("%s (Δ)" % n for n in names) + " |")
        lines.append("|---|---|---|" + "---|" * len(names))
        for row in report["rows"]:
            real = row["real"] or {}
            cell = fmt(real.get(metric))
            if has_needle and metric == "attention_recall" and real.get("needle_recall") is not None:
                cell += " [%.2f]" % real["needle_recall"]
            syn = ["%s (%s)%s" % (fmt((s["values"] or {}).get(metric)), fmt((s["diff"] or {}).get(metric), signed=True),
                                  needle_bracket(s["values"]) if metric == "attention_recall" else "")
                   if s["values"] else "—" for s in row["synthetic"]]
            lines.append("| %s | %d | %s | %s |" % (row["policy"], row["budget"], cell, " | ".join(syn)))
        lines.append("")
    lines += worst_markdown(report, names) + profile_markdown(report)
    return "\n".join(lines) + "\n"


def needle_bracket(values):
    """" [0.42]": a synthetic trace's own needle recall (--synthetic-needle), else nothing."""
    n = (values or {}).get("needle_recall")
    return "" if n is None else " [%.2f]" % n


def compact_table(report, names, has_needle):
    """One table: each cell is recall / top-k recall / output error (real), or their differences."""
    lines = ["**recall / top-k recall / output error** (means; synthetic columns: Δ of each)%s" %
             ("; real needle recall in brackets" if has_needle else ""), "",
             "| policy | budget | real | " + " | ".join("%s Δ" % n for n in names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for row in report["rows"]:
        real = row["real"] or {}
        cell = " / ".join(fmt(real.get(m)) for m, _ in METRICS) if row["real"] else "—"
        if has_needle and real.get("needle_recall") is not None:
            cell += " [%.2f]" % real["needle_recall"]
        syn = [" / ".join(fmt(s["diff"][m], signed=True) for m, _ in METRICS) + needle_bracket(s["values"])
               if s["diff"] else "—" for s in row["synthetic"]]
        lines.append("| %s | %d | %s | %s |" % (row["policy"], row["budget"], cell, " | ".join(syn)))
    return lines + [""]


def worst_markdown(report, names):
    policies = []
    for row in report["rows"]:
        if row["policy"] not in policies:
            policies.append(row["policy"])
    lines = ["**worst recall gap** (largest |Δ recall| over the budgets, signed, @ budget)", "",
             "| policy | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for p in policies:
        cells = []
        for w in report["worst"]:
            g = w.get(p)
            cells.append("%s @%d" % (fmt(g["recall_diff"], signed=True), g["budget"]) if g else "—")
        lines.append("| %s | %s |" % (p, " | ".join(cells)))
    for metric, title in METRICS:
        means = [fmt(m) for m in report["mean_abs_diff"][metric]]
        lines.append("| mean abs. Δ %s, all cells | %s |" % (title, " | ".join(means)))
    needle = needle_gaps(report)
    if any(g is not None for g in needle):
        lines.append("| mean abs. Δ needle recall, all cells | %s |" % " | ".join(fmt(g) for g in needle))
    return lines + [""]


def needle_gaps(report):
    """Per synthetic trace: mean |synthetic − real| needle recall over the cells where both have one."""
    gaps = []
    for i in range(len(report["synthetic"])):
        d = [abs(r["synthetic"][i]["values"]["needle_recall"] - r["real"]["needle_recall"]) for r in report["rows"]
             if r["real"] and r["real"].get("needle_recall") is not None and r["synthetic"][i]["values"]
             and r["synthetic"][i]["values"].get("needle_recall") is not None]
        gaps.append(sum(d) / len(d) if d else None)
    return gaps


def profile_markdown(report):
    labels = [label for label, _ in PROFILE]
    lines = ["**structural profile** (`kvsim trace info --profile-layers 0`)", "",
             "| trace | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    rows = [("real", report["real"]["profile"])] + [(s["name"], s["profile"]) for s in report["synthetic"]]
    for name, prof in rows:
        lines.append("| %s | %s |" % (name, " | ".join(fmt(prof.get(label)) for label in labels)))
    return lines + [""]


def same_values(a, b, tol=1e-9):
    """Equal cells: both missing, or the same metrics within tol (two replays of one trace may sum in
    another thread order)."""
    if a is None or b is None:
        return a is b
    return a.keys() == b.keys() and all(
        (a[k] is None and b[k] is None) or (a[k] is not None and b[k] is not None and abs(a[k] - b[k]) <= tol)
        for k in a)


def combine(paths):
    """Joins the synthetic columns of JSON reports on one real trace (runs made at different times, e.g.
    a fitted config added later). The real columns must agree, or the reports are not comparable."""
    reports = [load_json(p, "a compare-traces JSON report") for p in paths]
    for path, r in zip(paths, reports):
        if r.get("schema") != "kvsim.compare_traces/1":
            raise Failure("%s: schema %r is not kvsim.compare_traces/1" % (path, r.get("schema")))
    base = reports[0]
    rows = {(r["policy"], r["budget"]): r for r in base["rows"]}
    for path, r in zip(paths[1:], reports[1:]):
        for field in ("path", "layers"):
            if r["real"][field] != base["real"][field]:
                raise Failure("%s: real.%s %r differs from %s's %r" % (path, field, r["real"][field], paths[0],
                                                                       base["real"][field]))
        if r["options"]["max_steps"] != base["options"]["max_steps"]:
            raise Failure("%s: max_steps %s differs from %s's %s" % (path, r["options"]["max_steps"], paths[0],
                                                                    base["options"]["max_steps"]))
        own = {(x["policy"], x["budget"]): x for x in r["rows"]}
        for key, row in rows.items():
            other = own.get(key)
            if other and not same_values(other["real"], row["real"]):
                raise Failure("%s: the real trace's %s@%d differs from %s's: not the same replay" % (path, key[0], key[1],
                                                                                                   paths[0]))
            row["synthetic"] += other["synthetic"] if other else [{"values": None, "diff": None}] * len(r["synthetic"])
        base["synthetic"] += r["synthetic"]
    n = len(base["synthetic"])
    base["worst"], base["mean_abs_diff"] = worst_gaps(base["rows"], n), mean_abs_diffs(base["rows"], n)
    base["combined_from"] = list(paths)
    return base


def parse_budgets(text):
    try:
        budgets = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        budgets = []
    if not budgets or any(b < 1 for b in budgets):
        raise Failure("--budgets: value '%s' is not a comma-separated list of positive token counts (e.g. 256,512,1024)"
                      % text)
    return budgets


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("real", help="real trace (.safetensors or shard directory); with --combine, a JSON report")
    ap.add_argument("synthetic", nargs="*", help="preset name or generator config YAML; with --combine, more reports")
    ap.add_argument("--combine", action="store_true",
                    help="join the synthetic columns of JSON reports on the same real trace (runs nothing)")
    ap.add_argument("--budgets", default="256,512,1024", help="budgets in tokens (default 256,512,1024)")
    ap.add_argument("--max-steps", type=int, default=32, help="decode rows replayed (default 32)")
    ap.add_argument("--needle", help="needle text in the real trace's prompt: adds its needle recall")
    ap.add_argument("--needle-tokens", type=span_arg,
                    help="FIRST:END, the real trace's needle as a token span of its prompt (instead of --needle TEXT: "
                         "a trace without the model's tokenizer)")
    ap.add_argument("--synthetic-needle", action="store_true",
                    help="with --needle or --needle-tokens: give every synthetic trace a needle at the real one's depth and length, "
                         "and report its needle recall too")
    ap.add_argument("--policy", action="append", help="policy to replay (repeatable; default: all with a selector)")
    ap.add_argument("--set", action="append", help="generator KEY=VALUE override for every synthetic trace")
    ap.add_argument("--layers", help="slice the real trace to these model layers first (e.g. 0,6,12,18,24,29)")
    ap.add_argument("--threads", type=int, default=0, help="replay threads (default: kvsim's)")
    ap.add_argument("--format", choices=("markdown", "json"), default="markdown")
    ap.add_argument("--compact", action="store_true",
                    help="markdown: one quality table, each cell recall / top-k recall / output error")
    ap.add_argument("-o", "--out", help="write the report here (atomically) instead of standard output")
    ap.add_argument("--json", help="also write the JSON report here")
    ap.add_argument("--workdir", help="keep work files here and reuse unchanged ones (default: a temporary folder)")
    ap.add_argument("--kvsim", default=os.environ.get("KVSIM", DEFAULT_KVSIM), help="kvsim binary (default build/kvsim)")
    opts = ap.parse_args(argv)
    if not opts.synthetic:
        ap.error("give at least one synthetic preset or config (with --combine: a second report)")
    opts.budgets = parse_budgets(opts.budgets)
    if opts.combine:
        return opts
    for spec in opts.synthetic:
        synthetic_source(spec)  # a missing YAML fails before any kvsim run
    if opts.max_steps < 1:
        raise Failure("--max-steps: value %d is not a positive number of decode rows" % opts.max_steps)
    return opts


def main(argv):
    try:
        opts = parse_args(argv)
        report = combine([opts.real] + opts.synthetic) if opts.combine else collect(opts)
        text = markdown(report, opts.compact) if opts.format == "markdown" else json.dumps(report, indent=1) + "\n"
        if opts.json:
            write_atomic(opts.json, json.dumps(report, indent=1) + "\n")
        if opts.out:
            write_atomic(opts.out, text)
        else:
            sys.stdout.write(text)
        return 0
    except Failure as e:
        print("compare-traces: error: %s" % e, file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
