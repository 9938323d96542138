#!/usr/bin/env bash
# Mutation testing of the cost model, the simulator and the reference kernels (docs/robustness.md,
# "Mutation testing"). For each mutant in tools/mutate/mutants.txt: apply it, rebuild only what is
# needed (cmake --build BUILD --target kvsim_tests kvsim_properties kvsim), run the test suite (ctest), record
#   killed        the suite failed (or timed out)
#   survived      the suite passed: no test notices the bug
#   not compiled  the build failed (reported separately, excluded from the score)
#   equivalent    listed as equivalent in mutants.txt: not run, excluded from the score
# and restore the file, always (a trap restores it on exit, Ctrl-C or error). Then a table and
# "K killed of N (P%)", N = killed + survived.
#
# Usage: bash tools/mutate/run.sh [ID ...]       (no ID: every mutant)
# Environment: BUILD (default build), JOBS (2), MUTANT_TIMEOUT (seconds per test run, 600),
#              MUTANTS_FILE (tools/mutate/mutants.txt), RESULTS (BUILD/mutation-results.txt),
#              BASELINE=0: skip the unmutated suite run (when it is known to pass on this tree),
#              RESUME=1: keep RESULTS and skip the mutants it already has (a long run stopped and started
#              again goes on where it was; the score then counts every row of RESULTS).
# Slow (a rebuild and a full test run per mutant): not part of `make test`.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD:-build}
JOBS=${JOBS:-2}
TIMEOUT=${MUTANT_TIMEOUT:-600}
MUTANTS_FILE=${MUTANTS_FILE:-tools/mutate/mutants.txt}
RESULTS=${RESULTS:-$BUILD/mutation-results.txt}
NICE="nice -n 10"
[ -d "$BUILD" ] || { echo "no build directory $BUILD: run 'make build' first" >&2; exit 2; }

WORK=$(mktemp -d)
CURRENT_FILE=""
restore() {
  if [ -n "$CURRENT_FILE" ] && [ -f "$WORK/orig" ]; then
    # A plain cp (not -p) gives the file a new mtime, so the next build recompiles the restored source.
    cp "$WORK/orig" "$ROOT/$CURRENT_FILE"
    touch "$ROOT/$CURRENT_FILE"
    CURRENT_FILE=""
  fi
}
cleanup() { restore; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'echo; echo "interrupted: restoring $CURRENT_FILE" >&2; exit 130' INT TERM HUP

# Parse the mutants into one record per line: id \x1f file \x1f find \x1f replace \x1f why \x1f equivalent
python3 - "$MUTANTS_FILE" "$@" > "$WORK/list" <<'PY' || exit 2
import sys
path, wanted = sys.argv[1], set(sys.argv[2:])
entries, cur = [], None
for raw in open(path, encoding="utf-8"):
    line = raw.rstrip("\n")
    if line.startswith("#"):
        continue
    if line.startswith("[") and line.endswith("]"):
        cur = {"id": line[1:-1]}
        entries.append(cur)
        continue
    if not line.strip() or cur is None:
        continue
    key, sep, val = line.partition(": ")
    if not sep:
        sys.exit(f"{path}: cannot read line {line!r}")
    cur[key] = val
ids = set()
for e in entries:
    for k in ("file", "find", "replace", "why"):
        if k not in e:
            sys.exit(f"{path}: mutant {e['id']} has no '{k}:'")
    if e["id"] in ids:
        sys.exit(f"{path}: mutant id {e['id']} twice")
    ids.add(e["id"])
    text = open(e["file"], encoding="utf-8").read()
    n = text.count(e["find"])
    if n != 1:
        sys.exit(f"{path}: mutant {e['id']}: 'find' occurs {n} times in {e['file']} (must be once)")
unknown = wanted - ids
if unknown:
    sys.exit(f"unknown mutant ids: {' '.join(sorted(unknown))}")
for e in entries:
    if wanted and e["id"] not in wanted:
        continue
    print("\x1f".join([e["id"], e["file"], e["find"], e["replace"], e["why"], e.get("equivalent", "")]))
PY

apply_mutant() {  # file find replace
  python3 - "$1" "$2" "$3" <<'PY'
import sys
f, find, rep = sys.argv[1:4]
t = open(f, encoding="utf-8").read()
assert t.count(find) == 1
open(f, "w", encoding="utf-8").write(t.replace(find, rep, 1))
PY
}

build() { $NICE cmake --build "$BUILD" --target kvsim_tests kvsim_properties kvsim -j "$JOBS" > "$WORK/build.log" 2>&1; }

echo "baseline: building and running the suite unmutated..."
if ! build; then echo "the unmutated tree does not build:" >&2; tail -20 "$WORK/build.log" >&2; exit 2; fi
if [ "${BASELINE:-1}" != 0 ] && ! (cd "$BUILD" && $NICE timeout "$TIMEOUT" ctest -j "$JOBS" > "$WORK/test.log" 2>&1); then
  echo "the unmutated suite fails; fix it first:" >&2; grep -E "Failed|\*\*\*" "$WORK/test.log" | head -20 >&2; exit 2
fi

if [ "${RESUME:-0}" = 1 ] && [ -f "$RESULTS" ]; then
  echo "resuming: $(wc -l < "$RESULTS") mutant(s) already in $RESULTS"
else
  : > "$RESULTS"
fi
killed=0; survived=0; nocompile=0; equivalent=0
declare -a rows
while IFS=$'\x1f' read -r id file find replace why equiv; do
  if [ "${RESUME:-0}" = 1 ] && cut -f1 "$RESULTS" | grep -qxF "$id"; then continue; fi
  if [ -n "$equiv" ]; then
    rows+=("$id|equivalent|$file|$equiv"); equivalent=$((equivalent + 1))
    printf '%-32s equivalent\n' "$id"; continue
  fi
  cp -p "$ROOT/$file" "$WORK/orig"
  CURRENT_FILE=$file
  apply_mutant "$ROOT/$file" "$find" "$replace" || { restore; echo "cannot apply $id" >&2; exit 2; }
  t0=$(date +%s)
  if ! build; then
    result="not compiled"; nocompile=$((nocompile + 1)); detail=""
  elif (cd "$BUILD" && $NICE timeout "$TIMEOUT" ctest -j "$JOBS" --stop-on-failure > "$WORK/test.log" 2>&1); then
    result="survived"; survived=$((survived + 1)); detail=""
  else
    result="killed"; killed=$((killed + 1))
    detail=$(grep -oE '[0-9]+ - [A-Za-z0-9_./]+ \((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)' "$WORK/test.log" | head -3 | sed 's/^[0-9]* - //' | tr '\n' ' ')
    grep -q "Timeout" "$WORK/test.log" && detail="$detail(timeout)"
  fi
  restore
  printf '%-32s %-13s %4ss  %s\n' "$id" "$result" "$(( $(date +%s) - t0 ))" "$detail"
  rows+=("$id|$result|$file|$why")
  printf '%s\t%s\t%s\t%s\n' "$id" "$result" "$file" "$detail" >> "$RESULTS"
done < "$WORK/list"

# Leave the build matching the restored sources.
build || echo "warning: the rebuild after restoring failed" >&2

echo
printf '%-32s %-13s %-34s %s\n' "mutant" "result" "file" "why"
for r in "${rows[@]}"; do
  IFS='|' read -r id result file why <<< "$r"
  printf '%-32s %-13s %-34s %s\n' "$id" "$result" "$file" "$why"
done
# Counted from RESULTS, so a resumed run's score covers every mutant run so far.
killed=$(cut -f2 "$RESULTS" | grep -cx killed); survived=$(cut -f2 "$RESULTS" | grep -cx survived)
nocompile=$(cut -f2 "$RESULTS" | grep -cx "not compiled")
n=$((killed + survived))
pct=$(python3 -c "print(f'{100*$killed/$n:.1f}' if $n else 'n/a')")
echo
echo "not compiled: $nocompile; equivalent (not run): $equivalent"
echo "score: $killed killed of $n ($pct%)"
