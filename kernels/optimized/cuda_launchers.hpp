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

// ---- topk.cu: radix select + ordered compaction + sort, one block per row or per slice of a long row
// (grid_select.cuh); returns min(k, n) ----
// Workspace words per row for p (its n, k, rank_order and block_elems); 0 when none is needed.
int64_t topk_workspace_words(const TopkParams& p);
// The device operations (launches and memsets) topk(p) queues.
int topk_launches(const TopkParams& p);
int64_t topk(const TopkParams& p);

// ---- gather_runs.cu: runs of adjacent rows copied with float4 loads, one block per run ----
void gather_runs(const GatherRunsParams& p);

// ---- centroid_recall.cu: CTKVR recall (cosines; top-C' + bitmap dedup in one block per head); returns the
// count, summed over the heads ----
int64_t centroid_recall(const CentroidRecallParams& p);

// ---- chess_select.cu: one warp per summary vector (float4, shuffles), then the three levels in one block ----
::kvsim::ref::KVSIM_CUDA_LAUNCHERS_NS::LevelCounts chess_select(const ChessSelectParams& p);

// ---- route_gates.cu: SEKV's routing for deployment, every query head in one launch, a warp per 32 spans ----
void route_gates(const RouteGatesParams& p);

// ---- group_scores.cu: every query head's scores (dot or Quest bound) over its KV head's vectors, one launch ----
void group_scores(const GroupScoreParams& p);

}  // namespace kvsim::opt::KVSIM_CUDA_LAUNCHERS_NS

// ---- The kernels that complete `kvsim replay --device cuda` (replay_params.hpp; issue #28 item 3) ----
#include "kernels/optimized/replay_params.hpp"

namespace kvsim::opt::KVSIM_CUDA_LAUNCHERS_NS {

// dedup.cu: one past the largest id of p.ids (0 when n = 0), found on the device; throws on a negative id.
int64_t dedup_id_bound(const DedupParams& p);
// dedup.cu: the sorted unique ids of p.ids and the ranges into p.out through a bitmap; returns the count.
int64_t dedup(const DedupParams& p);
// position_ids.cu: returns the count written.
int64_t position_ids(const PositionIdsParams& p);
// exact_scores.cu: one thread per score, the reference's sequential dot (selections stay identical).
void exact_scores(const ExactScoreParams& p);
// means.cu
void segment_mean(const SegmentMeanParams& p);
void page_mean(const PageMeanParams& p);
// window_scores.cu
void obs_window_scores(const WindowScoreParams& p);
void pool1d(const float* in, int64_t n, int kernel, bool is_max, float* out);
void chunk_sum(const float* scores, int64_t n, int chunk, float* out);
// quest_pages.cu
void quest_page_minmax(const PageMinmaxParams& p);
void quest_page_bound(const PageBoundParams& p);
int64_t quest_select_workspace_words(const PageSelectParams& p);  // words of p.workspace (0: none)
int64_t quest_select_pages(const PageSelectParams& p);  // returns the count per row
// chess_levels.cu
::kvsim::ref::KVSIM_CUDA_LAUNCHERS_NS::LevelCounts chess_levels(const ChessLevelsParams& p);
// entry_attention.cu
void biased_attention(const BiasedAttentionParams& p);
void merge_state(const MergeStateParams& p);
// ctkvr_build.cu
int qcivf_build(const QcivfBuildParams& p);        // returns min(rho, n)
int64_t ctkvr_rerank(const RerankParams& p);        // returns min(rho_prime, m)
// sekv.cu
void pca_projection(const PcaParams& p);
void span_summaries(const SpanSummaryParams& p);
void sekv_routing(const RoutingParams& p);
int64_t uncertainty_partials_floats(int64_t vocab, int rows);
void uncertainty(const UncertaintyParams& p);  // uncertainty.cu: two launches, no host synchronization
int64_t sekv_zoom_workspace_words(int64_t spans, int rows = 1);  // words of ZoomParams::workspace (0: none)
int64_t sekv_zoom(const ZoomParams& p);  // returns the zoomed count (summed over the rows)
// span_svd.cu
void span_svd(const SpanSvdParams& p);
// reconstruct.cu
void sekv_reconstruct(const ReconstructParams& p);  // one launch, no host synchronization

}  // namespace kvsim::opt::KVSIM_CUDA_LAUNCHERS_NS
