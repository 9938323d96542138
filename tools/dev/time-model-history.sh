#!/usr/bin/env bash
# The kernel time model against a kernel as it was when a GPU measured it (issue 42 item 3: "old
# versions included: rebuild them from git history"). In a scratch worktree of HEAD, the named kernel
# sources are put back as they were at KERNEL_COMMIT (their interface must still match today's
# launchers), kvsim is built without nvcc, and `kvsim validate --device emu --predict GPU` runs the
# cases FILTER picks against the measured calibration as it was at MEASURED_COMMIT. Nothing in this tree
# is written except OUTDIR.
#   tools/dev/time-model-history.sh KERNEL_COMMIT MEASURED_COMMIT GPU FILTER OUTDIR FILE...
# Example (the paged decode of the first H200 session, 0.35 of HBM at 128K tokens):
#   tools/dev/time-model-history.sh 744a1df 744a1df h200 paged docs/validation/runs/2026-12-07-time-model \
#     kernels/optimized/paged_decode.cu
set -euo pipefail
[ $# -ge 6 ] || { sed -n 2,11p "$0"; exit 2; }
kc=$1 mc=$2 gpu=$3 filter=$4 out=$5
shift 5
root=$(git rev-parse --show-toplevel)
mkdir -p "$out"
out=$(cd "$out" && pwd)
wt=$(mktemp -d)/kvsim-history
git -C "$root" worktree add --detach "$wt" HEAD >/dev/null
trap 'git -C "$root" worktree remove --force "$wt"' EXIT
for f in "$@"; do git -C "$root" show "$kc:$f" > "$wt/$f"; done
git -C "$root" show "$mc:scenarios/calibration/$gpu-measured.yaml" > "$out/$gpu-measured-at-$mc.yaml"
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=Release -DKVSIM_CUDA=OFF >/dev/null
cmake --build "$wt/build" -j "$(nproc)" --target kvsim >/dev/null
cd "$wt"
cp "$out/$gpu-measured-at-$mc.yaml" .  # a relative path, so the report names no machine's directories
./build/kvsim validate --device emu --predict "$gpu" --filter "$filter" \
  --measurements "$gpu-measured-at-$mc.yaml" --format json --report "$out/$gpu-$filter-kernels-at-$kc.json" \
  > "$out/$gpu-$filter-kernels-at-$kc.md"
cat "$out/$gpu-$filter-kernels-at-$kc.md"
