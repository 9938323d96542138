// Kernel models: what a GPU phase costs when no measured curve covers its kernel.
//
// The roofline divides a phase's bytes by a ceiling. For the phases that make one policy differ from
// another (a top-k over a few thousand page scores, a GEMV over summaries, a gather of scattered
// tokens, a copy of a few hundred short runs over PCIe) that is the most optimistic time there is:
// those kernels are bound by launches, by how few of the GPU's SMs one row keeps busy, by passes over
// the data and by a fixed cost per copy. A kernel model says how the kernel a deployment runs spends
// its time, in terms of the hardware file's ceilings and constants measured elsewhere:
//
//   t = launches x t_launch                                     (the hardware file's kernel latency)
//     + passes x bytes / (C x e_class(bytes) x phi)             (phi = busy SMs / SMs, at most 1)
//     + max(0, passes x iterations x t_load - that streaming term) when one block walks a row alone
//     + calls x t_call                                          (a copy's per-call cost)
//
// and it is applied through the same two numbers the roofline and the simulator already use — an
// efficiency per ceiling (e_class x phi / passes) and a fixed time — so a phase alone takes exactly
// this time in both (model/resources.cpp).
//
// The models, one per kernel class (KernelModelId; docs/validation/kernel-models.md has the rule, the
// constants with their sources, and each model against published kernel timings):
//   torch_topk    kind select: PyTorch's torch.topk (what the seeds' code calls). Below PyTorch's
//                 multi-block threshold (should_use_multiblock, a table of rows x row length) one
//                 block of up to 1024 threads selects each row by a radix select of 2-bit digits:
//                 16 counting passes and one gather over the row, each pass ceil(n / 1024) dependent
//                 loads per thread; rows run one per SM. Above it, 8-bit digits over many blocks:
//                 4 counting passes and a gather over the whole GPU, 15 kernels per call.
//                 A sort of the k chosen (sorted output) is one more kernel.
//   gemv_scoring  kind score: a batched GEMV of queries against stored vectors (summaries,
//                 centroids, page bounds, routing keys): the calibration's measured GEMV curve
//                 (kind gemm, ceiling hbm) at the phase's bytes; a GEMM on tensor cores (window
//                 scores at prefill) reads the gemm curves by the ridge rule of phase_efficiency.
//   stream_pass   kinds gather, build, reconstruct, elementwise, select without rows: a kernel that
//                 streams its bytes once: the calibration's measured memory-bound curve (kind
//                 elementwise, ceiling hbm) at the phase's bytes, times the share of the sectors a
//                 gather's runs use (a run of r bytes occupies ceil(r / 32) sectors), or the
//                 calibration's gather estimate r / (r + half_run) where that is lower (so no model
//                 prices a gather faster than the bound printed beside it).
//   copy_calls    kind copy: one cudaMemcpyAsync per declared launch (a policy declares the calls
//                 its implementation issues; the seeds' code packs runs and copies once per layer):
//                 calls x t_call, plus the bytes at the hardware file's measured link rate times the
//                 calibration's gather share for runs (r / (r + half_run), each run in its own TLPs).
//
// A model whose class curve is missing from the calibration (a GPU with no published memory-bound
// or GEMV measurement) still prices launches, passes, parallelism and calls, at the class's constant:
// the plan says so (ModeledPhase::class_curve).
#pragma once
#include <array>
#include <string_view>

#include "model/calibration.hpp"
#include "model/phase.hpp"

namespace kvsim {

struct Machine;

enum class KernelModelId : uint8_t { none, torch_topk, gemv_scoring, stream_pass, copy_calls, count };
inline constexpr std::array<std::string_view, size_t(KernelModelId::count)> kKernelModelNames = {
    "none", "torch_topk", "gemv_scoring", "stream_pass", "copy_calls"};
inline std::string_view to_string(KernelModelId k) { return kKernelModelNames[size_t(k)]; }

// The constants every model shares, each a measurement or a code fact with its source (the comment);
// docs/validation/kernel-models.md lists them again with the points they were checked on.
namespace kernel_constants {
// PyTorch aten/src/ATen/native/cuda/SortingRadixSelect.cuh: RADIX_BITS = 2 in the single-block radix
// select, so 32-bit keys take 16 counting passes; the gather of the chosen is one more pass.
inline constexpr double kSingleBlockPasses = 16 + 1;
// PyTorch TensorTopK.cu (mbtopk): RADIX_BITS = 8: 4 counting passes, then the gather.
inline constexpr double kMultiBlockPasses = 4 + 1;
// mbtopk launches, per call in PyTorch 2.4-2.8: one fill, radixFindKthValues and
// computeBlockwiseWithinKCounts per pass (4 passes), computeBlockwiseKthCounts, two cub scans of two
// kernels each, and gatherTopK: 15 kernels (read from the source and the 2.4-2.8 wheels' kernel names;
// two memsets beside them are not counted). The single-block path is one kernel (gatherTopK).
inline constexpr double kMultiBlockLaunches = 1 + 4 * 2 + 1 + 2 * 2 + 1;
// The sort of the k chosen per row (torch.topk's default sorted=True): one segmented sort kernel.
inline constexpr double kSortLaunches = 1;
// sbtopk launches min(1024, round_up(n, 32)) threads per row (TensorTopK.cu, the block size).
inline constexpr double kSingleBlockThreads = 1024;
// One dependent global load's round trip that a single-block pass waits for per iteration of its
// loop (a warp ballot and a block barrier follow every load). A row re-read 17 times stays in L2, so an
// L2 hit; a block's lines are spread over both L2 partitions, so the far partition's latency bounds the
// round trip: measured: H100 PCIe at 1755 MHz, far-L2 hits 461-478 cycles = 263-272 ns (near 151 ns,
// HBM 367-375 ns; te42kyfo/gpu-benches `gpu-latency`, HEAD 1c36d509). The same figure for every GPU:
// A100's far-L2 latency in the same benchmark is ~302 ns (within 15%).
inline constexpr double kLoadLatencyS = 265e-9;
// A GPU sector: 32 bytes (CUDA C++ Programming Guide, device memory accesses: "device memory is accessed
// via 32-, 64-, or 128-byte memory transactions"; caps-tum/mt4g measures a 32-byte fetch granularity on
// H100 and A100).
inline constexpr double kSectorBytes = 32;
// One cudaMemcpyAsync call's fixed cost for a short host-to-device run: measured: about 2.3 us per call
// for 256-byte chunks on an H20 (taco-project/FlexKV PR #193).
inline constexpr double kCopyCallS = 2.3e-6;
}  // namespace kernel_constants

// Which model prices phase p (none for host phases and for the kinds that always have curves:
// gemm, attention, prefill_attention, allreduce).
KernelModelId kernel_model_for(const Phase& p);

// The efficiency the model gives ceiling c of phase p (passes, parallelism, the class curve):
// what phase_efficiency returns when no curve of p's own covers c and its constant is not measured.
// *outside as Calibration::efficiency (a class curve read outside its range); *class_curve whether
// the class curve exists.
double kernel_model_efficiency(const Phase& p, Ceiling c, const Machine& m, bool* outside, bool* class_curve);

// The model's fixed time beyond the phase's declared launches x kernel latency (extra kernels of the
// implementation, latency-bound passes, per-call copy costs). 0 for a phase no model prices, or when
// the calibration is the uncalibrated roofline (the bound stays a bound).
double kernel_model_extra_s(const Phase& p, const Machine& m);

// Each model's check against published kernel timings (`kvsim validate --kernel-models --out`,
// scenarios/measurements/kernel-model-checks.yaml in the library): what the plan prints beside a phase a
// model priced. Read once; a model with no entry has points = 0 (no evidence: the plan says so).
struct KernelModelCheck {
  int points = 0, counted = 0, sources = 0;
  double median_abs_error = 0;
  // The counted points' signed errors (predicted / measured - 1): their 10th and 90th percentiles, what
  // a plan's range takes for a phase this model priced (model/uncertainty.hpp).
  double p10 = 0, p90 = 0;
};
const KernelModelCheck& kernel_model_check(KernelModelId model);

// Whether kernel models price this phase on this machine: they are on, the calibration is not the bare
// roofline, and the phase's binding ceiling has no curve of its own and no measured constant.
bool kernel_model_applies(const Phase& p, Ceiling c, const Machine& m);

// Kernel models are on by default; KVSIM_KERNEL_MODELS=0 in the environment turns them off for a run
// (the fallback constants again, listed as unmeasured: what plans printed before them), and
// set_kernel_models for this process (the tests and `kvsim validate --kernel-models`, before any phase
// is priced).
void set_kernel_models(bool on);
bool kernel_models_on();

}  // namespace kvsim
