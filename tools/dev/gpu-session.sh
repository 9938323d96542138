#!/usr/bin/env bash
# One short session on a borrowed GPU machine that has the CUDA driver but none of kvsim's Debian
# libraries: run with binaries built elsewhere (for sm_90 here) and their shared libraries beside
# them. Everything it measures goes to OUTDIR; nothing in the tree is written.
#   tools/dev/gpu-session.sh OUTDIR [LIBDIR]
# It runs, each step under its own time limit and each logged to OUTDIR/log.txt:
#   1. nvidia-smi;
#   2. the CUDA kernels' correctness tests on the real GPU (the *CudaGpu* cases: every reference and
#      optimized kernel against the host reference) and the device/backend tests;
#   3. the GPU kit (docs/validation/gpu-kit.md) -> OUTDIR/measured.yaml and OUTDIR/measured.md, then the
#      kernel time model's committed predictions for this GPU (docs/validation/runs/*-time-model/<gpu>.json,
#      `kvsim validate --device emu --predict <gpu> --format json`) beside them -> OUTDIR/predicted-vs-measured.md;
#   4. the card's measured ceilings through PyTorch (tools/measure/gpu_ceilings.py) -> OUTDIR/ceilings.json;
#   5. the CUDA benchmarks (tools/bench/bench_cuda.cpp: paged decode against its split count) -> OUTDIR/bench.json,
#      and Nsight Compute's speed-of-light, occupancy and warp-stall sections of one paged decode at 128K
#      tokens (in log.txt), where ncu is installed;
#   6. `kvsim replay --device cuda`, one policy at a time, on a 4K-token synthetic needle trace (in log.txt).
# Environment: STEPS (default "smi tests kit predict ceilings bench ncu replay": the steps to run, in that order),
# BENCH_FILTER (default BM_Cuda), NCU_LOOPS (default 0: the decode lane widths to profile, as
# lane_floats values), POLICIES (default: all nine).
set -u
out=${1:?usage: gpu-session.sh OUTDIR [LIBDIR]}
lib=${2:-.gpu/lib}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/$lib:${LD_LIBRARY_PATH:-}" KVSIM_DATA_DIR="$PWD/scenarios"
# The test binary looks for the tree where it was built (KVSIM_SOURCE_DIR, compiled in): KVSIM_BUILT_AT.
src=${KVSIM_BUILT_AT:-/work/main}
[ ! -e "$src" ] && mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
log="$out/log.txt"
step() { local t=$1; shift; echo "=== $(date -u +%T) $* (limit ${t}s)" | tee -a "$log";
         timeout "$t" "$@" >>"$log" 2>&1; echo "=== rc=$?" | tee -a "$log"; }
steps=" ${STEPS:-smi tests kit predict ceilings bench ncu replay} "
want() { [[ "$steps" == *" $1 "* ]]; }
want smi && step 20 nvidia-smi
want tests && step 40 ./build/kvsim_tests --gtest_filter='*CudaGpu*:CudaDevice*:CudaBackend*:GpuKit*:*cuda*' --gtest_brief=1
want kit && step 110 ./build/kvsim validate --device cuda --kit --out "$out/measured.yaml" --report "$out/measured.md"
# The predictions were computed before the session (the emulator's counts do not depend on the GPU).
if want predict && [ -f "$out/measured.yaml" ]; then
  gpu=$(sed -n 's/^name: \(.*\)-measured$/\1/p' "$out/measured.yaml")
  # The newest by the run folder's date (a fresh clone's mtimes are all the checkout's).
  pred=$(ls docs/validation/runs/*-time-model/"$gpu".json 2>/dev/null | sort | tail -1)
  if [ -n "$pred" ]; then
    step 20 python3 tools/dev/compare_predictions.py "$pred" "$out/measured.yaml" "$out/predicted-vs-measured.md"
  else
    echo "=== no committed time-model predictions for '$gpu'" | tee -a "$log"
  fi
fi
want ceilings && step 30 python3 tools/measure/gpu_ceilings.py "$out/ceilings.json"
want bench && step 120 ./build/kvsim bench --benchmark_filter="${BENCH_FILTER:-BM_Cuda}" --benchmark_min_time=0.2 \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
# One paged decode at 128K tokens per lane width (NCU_LOOPS: lane_floats values, 0 = the default).
if want ncu && [ -n "$ncu" ]; then
  for loop in ${NCU_LOOPS:-0}; do
    step 60 "$ncu" --clock-control none --kernel-name regex:split_kv --launch-skip 0 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      ./build/kvsim bench --benchmark_filter="BM_CudaPagedDecode/tokens:131072/splits:0/lane_floats:${loop}/" \
      --benchmark_min_time=0.001
  done
fi
if want replay; then
  step 30 ./build/kvsim trace gen --preset needle --tokens 4096 -o /tmp/needle4k.safetensors
  # One policy at a time, so one that hangs or crawls on the device is named by its own time limit.
  for pol in ${POLICIES:-full streaming snapkv quest chess sentencekv chunkkv sekv ctkvr}; do
    step 12 ./build/kvsim replay /tmp/needle4k.safetensors --device cuda --max-steps 2 --policy "$pol"
  done
fi
tail -c 3000 "$log"
