#!/usr/bin/python3
"""Plots from kvsim sweep results and plan JSON (docs/sweeps.md, "Plotting").

  tools/plot/plot.py pareto  RESULTS.csv -o pareto.png [--x tpot_s] [--y throughput_tok_s] [--where F=V ...]
  tools/plot/plot.py context RESULTS.csv -o tpot.png   [--y tpot_s] [--where F=V ...]
  tools/plot/plot.py phases  RESULTS.csv|PLAN.json -o phases.png [--where F=V ...]
  tools/plot/plot.py latency REQUESTS.csv -o cdf.png   [--y ttft_s|tpot_s|e2e_s] [--where F=V ...]
  tools/plot/plot.py queue   SERIES.csv -o queue.png   [--where F=V ...]

pareto:  every feasible point per policy (faint) and its Pareto front (line), the front computed the
         way `kvsim sweep` writes RESULTS.pareto.csv (times and bytes lower is better, throughput and
         quality higher is better).
context: TPOT (or --y COLUMN) against workload.context_tokens, one line per policy. Where other axes
         leave several rows per (policy, context), the line is their minimum and the title says so;
         narrow them with --where (e.g. --where workload.batch=1).
phases:  the decode step per policy (and context) as stacked bars of solo roofline time by phase kind, with the step
         time (after overlap) marked; from a sweep (decode_<kind>_s columns) or `kvsim plan --format json`.
latency: the CDF of one latency per policy (TTFT by default) from `kvsim serve --requests-csv`, with
         its p50 and p99 marked (docs/serving.md).
queue:   requests waiting and running over time per policy (and replica) from `kvsim serve --series`.

Runs with Debian's /usr/bin/python3 and python3-matplotlib (`KVSIM_WITH_PLOTS=1 tools/install-deps.sh`), so
a pyenv or virtualenv python3 earlier on PATH does not hide the Debian package. Standard library otherwise.
"""
import argparse
import csv
import json
import textwrap
import sys

LOWER_IS_BETTER = {"tpot_s", "ttft_s", "hbm_bytes", "kv_hbm_bytes", "dram_bytes", "error_mean", "decode_serial_s"}
LABELS = {
    "tpot_s": "TPOT (ms)", "ttft_s": "TTFT (ms)", "e2e_s": "end-to-end latency (ms)", "throughput_tok_s": "throughput (tokens/s per GPU)",
    "hbm_bytes": "HBM used (GiB)", "kv_hbm_bytes": "KV in HBM (GiB)", "dram_bytes": "host DRAM used (GiB)",
    "recall_mean": "attention-mass recall (mean)", "recall_p10": "attention-mass recall (p10)",
    "topk_recall": "top-k recall", "error_mean": "attention-output error (mean)",
    "workload.context_tokens": "context (tokens)",
}
SCALE = {"tpot_s": 1e3, "ttft_s": 1e3, "e2e_s": 1e3, "decode_serial_s": 1e3, "hbm_bytes": 1 / 2**30, "kv_hbm_bytes": 1 / 2**30,
         "dram_bytes": 1 / 2**30}


def die(msg):
    print(f"tools/plot: error: {msg}", file=sys.stderr)
    sys.exit(2)


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        die("matplotlib is missing: install python3-matplotlib (KVSIM_WITH_PLOTS=1 tools/install-deps.sh)")


def read_rows(path, where):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        die(f"{path}: {e.strerror}")
    if rows and "policy" not in rows[0]:
        die(f"{path}: no policy column: not a kvsim results file (sweep, serve --requests-csv or --series)")
    for cond in where:
        if "=" not in cond:
            die(f"--where {cond!r}: expected FIELD=VALUE")
        field, value = cond.split("=", 1)
        if rows and field not in rows[0]:
            die(f"--where {cond!r}: {path} has no column {field!r}; columns: {', '.join(rows[0].keys())}")
        # An empty cell is an axis that does not apply to that row's policy: keep it, so that
        # --where quest.budget_tokens=1024 narrows quest and leaves the other policies alone.
        rows = [r for r in rows if r[field] in (value, "")]
    return rows


def num(row, col):
    v = row.get(col, "")
    return float(v) * SCALE.get(col, 1) if v not in ("", None) else None


def by_policy(rows):
    out = {}
    for r in rows:
        out.setdefault(r["policy"], []).append(r)
    return out


def front(points, x_lower, y_lower):
    """Non-dominated (x, y) pairs, sorted by x from best to worst."""
    key = lambda p: ((p[0] if x_lower else -p[0]), (p[1] if y_lower else -p[1]))
    out, best = [], None
    for p in sorted(points, key=key):
        y = p[1] if not y_lower else -p[1]
        if best is None or y > best:
            out.append(p)
            best = y
    return out


def title(ax, head, notes):
    """A title that wraps instead of running off the figure."""
    lines = [head] + [textwrap.fill(n, 110) for n in notes if n]
    ax.set_title("\n".join(lines), fontsize=9)


def plain_log_ticks(ax):
    """Log axes labelled 5, 6, 10 (and 2048, 4096) rather than 5x10^0 (and 2^11)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
        if scale == "log":
            plain = FuncFormatter(lambda v, _: f"{v:g}")
            axis.set_major_formatter(plain)
            lo, hi = sorted(axis.get_view_interval())
            # Within about a decade the major ticks are too few: label the minor ones too.
            axis.set_minor_formatter(plain if lo > 0 and hi / lo < 20 else NullFormatter())


def save(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"tools/plot: wrote {path}")


def cmd_pareto(a):
    plt = pyplot()
    rows = [r for r in read_rows(a.input, a.where) if r.get("feasible") == "1"]
    # A front compares configurations of one workload: with several contexts left, draw the largest.
    ctx = "workload.context_tokens"
    contexts = sorted({int(r[ctx]) for r in rows if r.get(ctx)})
    if len(contexts) > 1:
        rows = [r for r in rows if int(r[ctx]) == contexts[-1]]
        a.where = a.where + [f"{ctx}={contexts[-1]} (largest; choose with --where)"]
    for c in (a.x, a.y):
        if rows and c not in rows[0]:
            die(f"{a.input} has no column {c!r}")
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for i, (pol, rs) in enumerate(by_policy(rows).items()):
        pts = [(num(r, a.x), num(r, a.y)) for r in rs if num(r, a.x) is not None and num(r, a.y) is not None]
        if not pts:
            continue
        color = f"C{i % 10}"
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=8, alpha=0.25, color=color)
        f = front(pts, a.x in LOWER_IS_BETTER, a.y in LOWER_IS_BETTER)
        ax.plot([p[0] for p in f], [p[1] for p in f], "-o", ms=3.5, color=color, label=f"{pol} ({len(f)} on front)")
    ax.set_xlabel(LABELS.get(a.x, a.x))
    ax.set_ylabel(LABELS.get(a.y, a.y))
    if a.logx:
        ax.set_xscale("log")
    if a.logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    plain_log_ticks(ax)
    if a.title:
        ax.set_title(a.title)
    else:
        title(ax, f"Pareto front per policy: {a.y} vs {a.x}", [", ".join(a.where)])
    save(plt, fig, a.output)


def cmd_context(a):
    plt = pyplot()
    rows = [r for r in read_rows(a.input, a.where) if r.get("feasible") == "1"]
    ctx = "workload.context_tokens"
    if rows and ctx not in rows[0]:
        die(f"{a.input} has no {ctx} column")
    fig, ax = plt.subplots(figsize=(7.5, 5))
    several = False
    for i, (pol, rs) in enumerate(by_policy(rows).items()):
        best = {}
        for r in rs:
            x, y = float(r[ctx]), num(r, a.y)
            if y is None:
                continue
            several |= x in best
            best[x] = min(best.get(x, y), y) if a.y in LOWER_IS_BETTER else max(best.get(x, y), y)
        xs = sorted(best)
        ax.plot(xs, [best[x] for x in xs], "-o", ms=3.5, color=f"C{i % 10}", label=pol)
    ax.set_xscale("log", base=2)
    if a.logy:
        ax.set_yscale("log")
    ax.set_xlabel(LABELS[ctx])
    ax.set_ylabel(LABELS.get(a.y, a.y))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    plain_log_ticks(ax)
    if a.title:
        ax.set_title(a.title)
    else:
        title(ax, f"{LABELS.get(a.y, a.y)} vs context per policy" + (" (best over the other axes)" if several else ""),
              [", ".join(a.where)])
    save(plt, fig, a.output)


def phase_bars_from_csv(path, where):
    rows = [r for r in read_rows(path, where) if r.get("feasible") == "1"]
    kinds = [c[len("decode_"):-2] for c in (rows[0].keys() if rows else []) if c.startswith("decode_") and c.endswith("_s")
             and c != "decode_serial_s"]
    bars, seen = [], set()
    for r in rows:
        label = r["policy"] + "\n" + r.get("workload.context_tokens", "")
        if label in seen:  # other axes left several rows: the first (smallest values) stands for them
            continue
        seen.add(label)
        bars.append((label, {k: num(r, f"decode_{k}_s") * 1e3 for k in kinds}, num(r, "tpot_s")))
    return bars, len(rows) > len(bars)


def phase_bars_from_json(path):
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        die(f"{path}: {e}")
    if j.get("schema") != "kvsim.plan/1":
        die(f"{path}: schema {j.get('schema')!r} is not kvsim.plan/1 (write it with kvsim plan --format json)")
    bars = []
    for r in j["results"]:
        if not r.get("feasible"):
            continue
        by = {}
        for ph in r["phases"]:
            if ph["stage"] == "decode":
                by[ph["kind"]] = by.get(ph["kind"], 0) + ph["time_ms"]
        bars.append((f"{r['policy']}\n{r['context_tokens']}", by, r["tpot_ms"]))
    return bars, False


def cmd_phases(a):
    plt = pyplot()
    bars, reduced = phase_bars_from_json(a.input) if a.input.endswith(".json") else phase_bars_from_csv(a.input, a.where)
    if not bars:
        die(f"{a.input}: no feasible rows to draw" + (f" with {', '.join(a.where)}" if a.where else ""))
    if len(bars) > 40:
        die(f"{a.input}: {len(bars)} bars; narrow them with --where (e.g. --where workload.batch=1)")
    kinds = [k for k in dict.fromkeys(k for _, by, _ in bars for k in by) if any(by.get(k, 0) > 0 for _, by, _ in bars)]
    fig, ax = plt.subplots(figsize=(max(7.5, 0.75 * len(bars) + 4), 5.5))
    xs = range(len(bars))
    bottom = [0.0] * len(bars)
    for i, k in enumerate(kinds):
        h = [by.get(k, 0) for _, by, _ in bars]
        ax.bar(xs, h, bottom=bottom, label=k, color=f"C{i % 10}")
        bottom = [b + v for b, v in zip(bottom, h)]
    ax.scatter(xs, [t for _, _, t in bars], marker="_", s=400, color="black", zorder=3, label="step time (after overlap)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([l for l, _, _ in bars], fontsize=8)
    ax.set_ylabel("decode step: solo roofline time per phase kind (ms)")
    if a.logy:
        ax.set_yscale("log")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    if a.title:
        ax.set_title(a.title)
    else:
        title(ax, "decode-step phase breakdown",
              [", ".join(a.where), "first row per policy and context (smallest axis values); narrow with --where" if reduced else ""])
    save(plt, fig, a.output)


def quantile(v, q):
    """q-quantile of ascending v, interpolated between the closest ranks (core/quantile.hpp's rule)."""
    x = q * (len(v) - 1)
    i = int(x)
    f = x - i
    return v[i] * (1 - f) + v[i + 1] * f if i + 1 < len(v) else v[i]


def cmd_latency(a):
    plt = pyplot()
    rows = [r for r in read_rows(a.input, a.where) if r.get("rejected", "0") == "0"]
    if rows and a.y not in rows[0]:
        die(f"{a.input} has no column {a.y!r}: not a `kvsim serve --requests-csv` file")
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for i, (pol, rs) in enumerate(by_policy(rows).items()):
        v = sorted(x for x in (num(r, a.y) for r in rs) if x is not None and x == x)  # NaN: unfinished
        if not v:
            continue
        n = len(v)
        color = f"C{i % 10}"
        p50, p99 = quantile(v, 0.5), quantile(v, 0.99)
        ax.step(v, [(k + 1) / n for k in range(n)], where="post", color=color,
                label=f"{pol}: p50 {p50:.4g}, p99 {p99:.4g}")
        ax.axvline(p99, color=color, ls=":", lw=0.8)
    ax.set_xlabel(LABELS.get(a.y, a.y))
    ax.set_ylabel("fraction of requests")
    ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    plain_log_ticks(ax)
    if a.title:
        ax.set_title(a.title)
    else:
        title(ax, f"{a.y} CDF per policy (dotted: p99)", [", ".join(a.where)])
    save(plt, fig, a.output)


def cmd_queue(a):
    plt = pyplot()
    rows = read_rows(a.input, a.where)
    if rows and "waiting" not in rows[0]:
        die(f"{a.input} has no column 'waiting': not a `kvsim serve --series` file")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for i, (pol, rs) in enumerate(by_policy(rows).items()):
        for rep in sorted({r["replica"] for r in rs}, key=int):
            pts = [(float(r["start_s"]), int(r["waiting"]), int(r["running"])) for r in rs if r["replica"] == rep]
            label = pol if rep == "0" else None
            color = f"C{i % 10}"
            top.plot([p[0] for p in pts], [p[1] for p in pts], lw=0.8, color=color, label=label)
            bottom.plot([p[0] for p in pts], [p[2] for p in pts], lw=0.8, color=color)
    top.set_ylabel("waiting requests")
    bottom.set_ylabel("running (batch)")
    bottom.set_xlabel("time (s)")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    top.legend(fontsize=8)
    if a.logy:
        top.set_yscale("log")
    if a.title:
        top.set_title(a.title)
    else:
        title(top, "queue length and batch over time (each replica a line)", [", ".join(a.where)])
    save(plt, fig, a.output)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, fn in (("pareto", cmd_pareto), ("context", cmd_context), ("phases", cmd_phases),
                     ("latency", cmd_latency), ("queue", cmd_queue)):
        s = sub.add_parser(name)
        s.add_argument("input")
        s.add_argument("-o", "--output", required=True, help="PNG to write")
        s.add_argument("--where", action="append", default=[], help="keep rows with FIELD=VALUE (repeatable)")
        s.add_argument("--title")
        s.add_argument("--logy", action="store_true")
        s.set_defaults(fn=fn)
        if name == "pareto":
            s.add_argument("--x", default="tpot_s")
            s.add_argument("--y", default="throughput_tok_s")
            s.add_argument("--logx", action="store_true")
        if name == "context":
            s.add_argument("--y", default="tpot_s")
        if name == "latency":
            s.add_argument("--y", default="ttft_s", choices=["ttft_s", "tpot_s", "e2e_s"])
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
