#!/usr/bin/env bash
# Runs the same commands with two kvsim binaries and compares their outputs byte for byte: the check
# that a refactor left behaviour unchanged (issue 17). Both binaries read the scenarios of this tree
# (KVSIM_DATA_DIR), so file paths in the outputs agree.
#
#   tools/dev/compare-outputs.sh OLD_KVSIM NEW_KVSIM [WORKDIR]
#
# Measured times (the replay's performance block and select_s, the sweep's points/s) are dropped
# before comparing. Compared: `plan --format json` on every scenario under scenarios/ (including the ones that fail,
# whose error text and exit status are compared), `reproduce --format json`, `sweep` on
# scenarios/sweeps/budgets.yaml, and `replay --format json` on the tiny preset trace.
set -uo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); work=${3:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export KVSIM_DATA_DIR="$root/scenarios"
mkdir -p "$work/old" "$work/new"
n=0; bad=0
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
    if [[ $name == replay_tiny ]] && [[ -s $work/$side/$name.out ]]; then
      python3 -c 'import json,sys
def strip(x):
    if isinstance(x, dict): return {k: strip(v) for k, v in x.items() if k != "performance" and k != "select_s"}
    if isinstance(x, list): return [strip(v) for v in x]
    return x
p = sys.argv[1]; d = json.load(open(p)); open(p, "w").write(json.dumps(strip(d), indent=2))' "$work/$side/$name.out"
    fi
  done
  for ext in out err; do
    if ! cmp -s "$work/old/$name.$ext" "$work/new/$name.$ext"; then
      echo "DIFFERS: $name.$ext ($*)"; bad=$((bad + 1))
    fi
  done
}
for f in $(find scenarios -name '*.yaml' ! -path 'scenarios/hardware/*' ! -path 'scenarios/hosts/*' \
             ! -path 'scenarios/models/*' ! -path 'scenarios/calibration/*' ! -path 'scenarios/traces/*' \
             ! -path 'scenarios/sweeps/*' | sort); do
  run "plan_$(echo "$f" | tr '/.' '__')" plan --format json "$root/$f"
done
run reproduce reproduce --format json
run sweep_budgets sweep "$root/scenarios/sweeps/budgets.yaml" -o budgets.csv
for side in old new; do [[ -f $work/$side/budgets.csv ]] || echo "missing $side/budgets.csv"; done
cmp -s "$work/old/budgets.csv" "$work/new/budgets.csv" || { echo "DIFFERS: budgets.csv"; bad=$((bad + 1)); }
"$new" trace gen --preset tiny -o "$work/tiny.safetensors" >/dev/null 2>&1
run replay_tiny replay "$work/tiny.safetensors" --format json
run replay_tiny_csv replay "$work/tiny.safetensors" --format csv --policy chess --policy ctkvr --budget-sweep
run timeline_plan plan "$root/scenarios/default.yaml" --timeline plan_timeline.json
cmp -s "$work/old/plan_timeline.json" "$work/new/plan_timeline.json" || { echo "DIFFERS: plan_timeline.json"; bad=$((bad + 1)); }
run timeline_replay replay "$work/tiny.safetensors" --format csv --timeline replay_timeline.json
cmp -s "$work/old/replay_timeline.json" "$work/new/replay_timeline.json" || { echo "DIFFERS: replay_timeline.json"; bad=$((bad + 1)); }
for p in $("$new" policy list | awk '{print $1}'); do run "policy_$p" policy show "$p" --format json; done
for k in hardware host model; do run "${k}_list" "$k" list; done
run plan_table plan
run plan_csv plan "$root/scenarios/example.yaml" --format csv
echo "compared $n commands in $work: $bad difference(s)"
[[ $bad -eq 0 ]]
