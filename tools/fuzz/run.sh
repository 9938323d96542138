#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets with clang in build-fuzz/, writes their seed corpora and
# runs each target for FUZZ_SECONDS (default 60), one after another on one core. Findings (crash-*,
# leak-*, timeout-*, oom-*) land in build-fuzz/findings/<target>/; the exit status is nonzero when any
# target found one. Usage: tools/fuzz/run.sh [TARGET...]   (default: every target)
# Environment: FUZZ_SECONDS, FUZZ_BUILD (build-fuzz), FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_TARGET="${FUZZ_SECONDS:-60}"
BUILD="${FUZZ_BUILD:-build-fuzz}"
ALL=(safetensors trace_meta trace_file gguf scenario library_yaml calibration)
TARGETS=("${@:-${ALL[@]}}")

# clang (with its libFuzzer runtime) is needed only here, not by `make test`: installed on demand.
if ! command -v clang++ >/dev/null 2>&1; then
  KVSIM_WITH_FUZZ=1 bash tools/install-deps.sh
fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DKVSIM_FUZZ=ON -DKVSIM_CUDA=OFF ${FUZZ_CMAKE_FLAGS:-} >/dev/null
cmake --build "$BUILD" --target fuzz_targets -j "${JOBS:-$(nproc)}"

SEEDS="$BUILD/seeds"
rm -rf "$SEEDS"
"$BUILD/fuzz/fuzz_seeds" "$SEEDS" scenarios

status=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t" findings="$BUILD/findings/$t"
  mkdir -p "$corpus" "$findings"
  echo "== fuzz_$t: ${SECONDS_PER_TARGET}s" >&2
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb bounds what a hostile size can allocate.
  # The growing corpus (first directory) keeps what earlier runs learned; the seeds are read-only.
  if ! "$BUILD/fuzz/fuzz_$t" "$corpus" "$SEEDS/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" ${FUZZ_ARGS:-} \
      2>"$BUILD/fuzz_$t.log"; then
    echo "fuzz_$t: FOUND A PROBLEM, see $BUILD/fuzz_$t.log and $findings/" >&2
    status=1
  fi
  grep -E '^stat::number_of_executed_units|^Done|^#[0-9]+.*DONE' "$BUILD/fuzz_$t.log" | tail -2 >&2 || true
done
exit $status
