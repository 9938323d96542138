#!/usr/bin/env bash
# Runs the same commands with two kvsim binaries and compares their outputs byte for byte: the check
# that a refactor left behaviour unchanged (issue 17). Both binaries read the scenarios of this tree
# (KVSIM_DATA_DIR), so file paths in the outputs agree.
#
#   tools/dev/compare-outputs.sh [--rel TOL [--abs TOL]] OLD_KVSIM NEW_KVSIM [WORKDIR]
#
# With --rel (issue 29: a change exact only to a relative tolerance, such as a faster step simulator,
# moves the last digits of printed numbers), a file that differs byte for byte is compared again with
# tools/dev/compare_numeric.py: the same text, numbers within the tolerance (JSON parsed; in text
# tables and CSV also a flip of the last printed digit, listed apart). It counts as a difference only
# when that fails, and the summary says how many files matched byte for byte, how many only within the
# tolerance (with the largest relative difference) and how many differ.
#
# Measured times (the replay's performance block, select_s and prefill_s, the sweep's points/s) are
# dropped before comparing. Compared: `plan --format json` on every scenario under scenarios/ (including
# the ones that fail, whose error text and exit status are compared), `reproduce --format json`, `sweep`
# on scenarios/sweeps/budgets.yaml, `replay` on the tiny preset trace (JSON, CSV with a budget sweep, and
# with --policy on a scenario that sets the policies' parameters, plus --set), the target plan with and
# without a quality floor (JSON and table), `serve` on scenarios/serving/default.yaml (its seed is fixed;
# summary, per-request CSV and timeline), `capacity` on the worked example of docs/serving.md, the
# timelines, the library listings and `policy show` of every policy.
set -uo pipefail
rel=""; abs=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --rel) rel=$2; shift 2 ;;
    --abs) abs=$2; shift 2 ;;
    *) echo "compare-outputs.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -ge 2 ]] || { echo "usage: compare-outputs.sh [--rel TOL [--abs TOL]] OLD_KVSIM NEW_KVSIM [WORKDIR]" >&2; exit 2; }
old=$(realpath "$1"); new=$(realpath "$2"); work=${3:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export KVSIM_DATA_DIR="$root/scenarios"
mkdir -p "$work/old" "$work/new"
n=0; bad=0
exact=0; within=0; flips=0; max_rel=0  # files: byte for byte, only within the tolerance (--rel)
# same OLD_FILE NEW_FILE LABEL: counts the file as matching byte for byte, matching within the
# tolerance, or differing (printed, with compare_numeric.py's findings in tolerance mode).
same() {
  if cmp -s "$1" "$2"; then exact=$((exact + 1)); return 0; fi
  if [[ -n $rel && -f $1 && -f $2 ]]; then
    local report
    if report=$(python3 "$root/tools/dev/compare_numeric.py" --rel "$rel" --abs "$abs" --limit 10 "$1" "$2"); then
      within=$((within + 1))
      # the summary's first "max relative difference" is the one of the numbers within the tolerance;
      # flips are counted apart (their relative difference is the printed precision's, not the change's)
      local r f
      r=$(sed -n -E 's/^summary: [^(]* \(max relative difference ([^)]*)\), .*/\1/p' <<<"$report")
      f=$(sed -n -E 's/^summary: .*, ([0-9]+) last-digit flips .*/\1/p' <<<"$report")
      max_rel=$(awk -v a="$max_rel" -v b="${r:-0}" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
      flips=$((flips + ${f:-0}))
      return 0
    fi
    echo "DIFFERS: $3"; sed 's/^/    /' <<<"$report"; bad=$((bad + 1)); return 1
  fi
  echo "DIFFERS: $3"; bad=$((bad + 1)); return 1
}
run() {  # run NAME ARGS... : the command with each binary, stdout+stderr+status into files
  local name=$1; shift
  for side in old new; do
    local bin=$old; [[ $side == new ]] && bin=$new
    ( cd "$work/$side" && "$bin" "$@" >"$name.out" 2>"$name.err"; echo "rc=$?" >>"$name.err" )
  done
  n=$((n + 1))
  # Measured times differ from run to run: the replay's "performance" block and per-policy select_s,
  # and the sweep's points/s on stderr. Everything else must match.
  for side in old new; do
    sed -i -E 's/\([0-9.]+ points\/s/(N points\/s/' "$work/$side/$name.err"
    # serve's and capacity's progress lines: their speed, and the order in which policies (run
    # concurrently) finish
    if [[ $name == serve_* || $name == capacity_* ]]; then
      sed -i -E -e 's/ in [0-9.]+ s \([0-9]+ requests\/s, [0-9]+ iterations\/s\)/ in N s/' \
        -e 's/ \([0-9]+\/([0-9]+)\): / (k\/\1): /' "$work/$side/$name.err"
      sort -o "$work/$side/$name.err" "$work/$side/$name.err"
    fi
    if [[ $name == replay_tiny* ]] && [[ $name != *_csv ]] && [[ -s $work/$side/$name.out ]]; then
      python3 -c 'import json,sys
def strip(x):
    if isinstance(x, dict): return {k: strip(v) for k, v in x.items() if k not in ("performance", "select_s", "prefill_s")}
    if isinstance(x, list): return [strip(v) for v in x]
    return x
p = sys.argv[1]; d = json.load(open(p)); open(p, "w").write(json.dumps(strip(d), indent=2))' "$work/$side/$name.out"
    fi
  done
  for ext in out err; do same "$work/old/$name.$ext" "$work/new/$name.$ext" "$name.$ext ($*)"; done
}
for f in $(find scenarios -name '*.yaml' ! -path 'scenarios/hardware/*' ! -path 'scenarios/hosts/*' \
             ! -path 'scenarios/models/*' ! -path 'scenarios/calibration/*' ! -path 'scenarios/traces/*' \
             ! -path 'scenarios/sweeps/*' | sort); do
  run "plan_$(echo "$f" | tr '/.' '__')" plan --format json "$root/$f"
done
run reproduce reproduce --format json
run sweep_budgets sweep "$root/scenarios/sweeps/budgets.yaml" -o budgets.csv
for side in old new; do [[ -f $work/$side/budgets.csv ]] || echo "missing $side/budgets.csv"; done
same "$work/old/budgets.csv" "$work/new/budgets.csv" budgets.csv
"$new" trace gen --preset tiny -o "$work/tiny.safetensors" >/dev/null 2>&1
run replay_tiny replay "$work/tiny.safetensors" --format json
run replay_tiny_csv replay "$work/tiny.safetensors" --format csv --policy chess --policy ctkvr --budget-sweep
cat >"$work/params.yaml" <<YAML
hardware: h100-sxm
model: llama-3.1-8b
workload: {context_tokens: 65536, output_tokens: 512}
policies: [{name: chess, rho_page: 0.3}, {name: ctkvr, probes: 8}, quest]
YAML
run replay_tiny_scenario replay "$work/tiny.safetensors" "$work/params.yaml" --policy chess --policy ctkvr \
  --set chess.rho_chunk=0.5 --format json --max-steps 16
target="--context 4096 --policy quest --policy chess --policy ctkvr --policy sekv --target-tpot 30"
run target_plan plan $target --format json
run target_plan_floor plan $target --min-recall 0.9 --trace "$work/tiny.safetensors" --trace-max-steps 16 --format json
run target_plan_floor_table plan $target --min-recall 0.9 --max-output-error 0.5 --trace "$work/tiny.safetensors" \
  --trace-max-steps 16 --knob sekv.max_rank=8,32
run serve_default serve "$root/scenarios/serving/default.yaml" --format json --requests-csv serve_requests.csv \
  --timeline serve_timeline.json
for f in serve_requests.csv serve_timeline.json; do
  same "$work/old/$f" "$work/new/$f" "$f"
done
run serve_table serve "$root/scenarios/serving/default.yaml"
run capacity_worked capacity --rate 4 --slo-ttft-p99 2s --slo-tpot-p99 50ms --requests 2000 --format json
run timeline_plan plan "$root/scenarios/default.yaml" --timeline plan_timeline.json
same "$work/old/plan_timeline.json" "$work/new/plan_timeline.json" plan_timeline.json
run timeline_replay replay "$work/tiny.safetensors" --format csv --timeline replay_timeline.json
same "$work/old/replay_timeline.json" "$work/new/replay_timeline.json" replay_timeline.json
for p in $("$new" policy list | awk '{print $1}'); do run "policy_$p" policy show "$p" --format json; done
for k in hardware host model; do run "${k}_list" "$k" list; done
run plan_table plan
run plan_csv plan "$root/scenarios/example.yaml" --format csv
if [[ -n $rel ]]; then
  echo "compared $n commands in $work: $bad difference(s); files: $exact byte for byte," \
    "$within only within relative tolerance $rel (abs $abs; max relative difference $max_rel," \
    "$flips last-digit flip(s) in text), $bad differ"
else
  echo "compared $n commands in $work: $bad difference(s)"
fi
[[ $bad -eq 0 ]]
