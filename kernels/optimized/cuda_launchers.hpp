// The launchers of the optimized CUDA kernels (kernels/optimized/*.cu), in the namespace
// kvsim::opt::KVSIM_CUDA_LAUNCHERS_NS. Include kernels/optimized/cuda.hpp, which includes this file once
// per build of the .cu sources (deliberately no include guard). Each launcher takes its kernel's
// parameter struct (params.hpp), launches on the default stream, and throws std::runtime_error on a
// launch error or on a shape the kernel does not support (under the emulator also on a kernel that
// would hang or is undefined on a GPU). A launcher synchronizes with the host only where it must read a
// result back (chess_select: the three kept counts; centroid_recall: the recalled count, each one
// blocking copy); the others return with the work queued, so an error while a kernel runs on a GPU
// surfaces at the caller's next synchronizing call (its copy of the results), stream order keeping
// every later launch behind it. Device memory: kvsim::ref::<same>::DeviceBuffer (kernels/reference/cuda.hpp,
// included by cuda.hpp before this file).
#include <cstdint>

#include "kernels/optimized/params.hpp"

namespace kvsim::opt::KVSIM_CUDA_LAUNCHERS_NS {

// ---- paged_decode.cu: split-KV paged decode attention, GQA, float4 loads ----
// The number of KV splits the launcher will use for p (1 = no merge kernel, no workspace).
int paged_decode_splits(const PagedDecodeParams& p);
// Floats of workspace p needs (0 for one split).
int64_t paged_decode_workspace_floats(const PagedDecodeParams& p);
void paged_decode_attention(const PagedDecodeParams& p);

// ---- topk.cu: radix select + bitonic sort, one block per row; returns min(k, n) ----
int64_t topk_workspace_words(int64_t k, int64_t n);
int64_t topk(const TopkParams& p);

// ---- gather_runs.cu: runs of adjacent rows copied with float4 loads, one block per run ----
void gather_runs(const GatherRunsParams& p);

// ---- centroid_recall.cu: CTKVR recall (cosines; top-C' + bitmap dedup in one block); returns the count ----
int64_t centroid_recall(const CentroidRecallParams& p);

// ---- chess_select.cu: one warp per summary vector (float4, shuffles), then the three levels in one block ----
::kvsim::ref::KVSIM_CUDA_LAUNCHERS_NS::LevelCounts chess_select(const ChessSelectParams& p);

}  // namespace kvsim::opt::KVSIM_CUDA_LAUNCHERS_NS
