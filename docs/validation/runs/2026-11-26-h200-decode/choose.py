# Rule fixed before the run: score = geometric mean of hbm_frac at 16K and 128K tokens with the planner's
# split count (splits:0). New kernel's lane width: 4 unless 8 beats it by more than 3%. The new kernel
# replaces the old one unless the old one scores higher (same run). Prints old | new-4 | new-8.
import json, math, sys
def frac(path, key):
    out = {}
    for r in json.load(open(path))["benchmarks"]:
        f = dict(kv.split(":") for kv in r["name"].split("/")[1:] if ":" in kv)
        if f.get("splits") == "0" and "hbm_frac" in r:
            out.setdefault(key(f), {})[f["tokens"]] = r["hbm_frac"]
    return {k: math.sqrt(v["16384"] * v["131072"]) for k, v in out.items() if len(v) == 2}
old = frac(sys.argv[1], lambda f: "old" if f.get("row_tokens") == "0" else None).get("old", 0)
new = frac(sys.argv[2], lambda f: f.get("lane_floats"))
for k, v in [("old", old)] + sorted(new.items()):
    print(f"{k}: geomean hbm_frac {v:.4f}", file=sys.stderr)
lf = "8" if new.get("8", 0) > 1.03 * new.get("4", 0) else "4"
print("old" if old > new.get(lf, 0) else f"new-{lf}")
