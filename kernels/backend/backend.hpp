// A kernel backend: the selection and attention kernels that trace replay runs, behind one interface, so
// a policy's selector is written once and runs either on the host kernels (kvsim::ref, kvsim::host) or on
// the optimized CUDA kernels (kernels/optimized/: kvsim::opt::cuda on a GPU, kvsim::opt::cuda_emu on the
// CPU through the emulator). `kvsim replay --device cuda` (docs/replay.md) compares the two.
//
// Every call takes one parameter struct (FlashInfer's Params style: named fields instead of a long list
// of raw pointers, which is where argument-order mistakes hide) holding HOST pointers; a device backend
// uploads, launches and downloads, so the selectors never see device memory. Every step of the CUDA
// backend runs on the device; each backend keeps a log of which steps it ran where, how often and
// through which kernels (kernels()), so the replay report says exactly what ran instead of implying it.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/reference/lowrank.hpp"

namespace kvsim::kernels {

// The steps a backend provides. The name is what the replay report prints.
enum class Step {
  window_scores,     // obs_window_scores
  pool1d,            // pool1d
  chunk_sum,         // chunk_sum
  topk,              // topk
  page_minmax,       // quest_page_minmax
  page_bound,        // quest_page_bound
  page_select,       // quest_select_pages
  gather_attention,  // gqa_gather_attention
  biased_attention,  // biased_attention
  merge_state,       // merge_state
  qcivf_build,       // CTKVR qcivf_build
  ctkvr_recall,      // CTKVR ctkvr_recall
  ctkvr_rerank,      // CTKVR ctkvr_rerank
  score_gemv,        // score_gemv (dot or cosine)
  segment_mean,      // segment_mean
  dedup,             // dedup
  chess_select,      // chess_hierarchical_select (the regular hierarchy)
  page_vectors,      // chess_page_vectors
  tail_mean,         // tail_mean
  group_mean,        // group_mean
  context_pages,     // chess_context_pages
  pca_projection,    // pca_projection (SEKV's routing projection)
  truncated_svd,     // truncated_svd (SEKV's span factors)
  score_gemm,        // score_gemm, dot (many query rows against the same keys)
  position_ids,      // the token ids a position rule keeps (StreamingLLM's sinks + window; full's 0..p)
  sekv_summaries,    // SEKV's span means k-bar, v-bar (eq. 2) and routing summaries (eq. 3)
  sekv_routing,      // SEKV's query projection q·W and routing gate (eq. 4-5), max over the GQA group
  sekv_zoom,         // SEKV's zoom: threshold, then spans by decreasing gate until the budget is full
};
const char* step_name(Step s);

enum class Where { host, device };
const char* where_name(Where w);  // "host" or "device"

// ---- parameters, one struct per kernel (host pointers) ----
struct WindowScoreParams {  // ref::obs_window_scores
  const float* queries = nullptr;  // [groups, window, d]: the window's query rows of each head of the group
  int groups = 1, window = 0;
  const float* keys = nullptr;     // [n, d]
  int64_t n = 0;
  int d = 0;
  float scale = 1;
  float* scores = nullptr;         // [n - window]
};
struct Pool1dParams {  // ref::pool1d, max or avg
  const float* in = nullptr;
  int64_t n = 0;
  int kernel = 1;
  bool is_max = true;
  float* out = nullptr;  // [n]
};
struct ChunkSumParams {  // ref::chunk_sum
  const float* scores = nullptr;
  int64_t n = 0;
  int chunk = 1;
  float* out = nullptr;  // [ceil(n / chunk)]
};
struct TopkParams {  // ref::topk: rank order, ties by the lower index, NaN last
  const float* scores = nullptr;
  int64_t n = 0, k = 0;
};
struct PageMinmaxParams {  // ref::quest_page_minmax
  const float* keys = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0, page_size = 1;
  float *kmin = nullptr, *kmax = nullptr;  // [ceil(n / page_size), d]
};
struct PageBoundParams {  // ref::quest_page_bound, for every query head of one KV head's group
  const float* q = nullptr;  // [heads, d]
  const float *kmin = nullptr, *kmax = nullptr;  // [pages, d]
  int64_t pages = 0;
  int d = 0;
  // The group's query heads: bound[pg] is the largest of their bounds (Quest's page score under GQA),
  // each head's bound summed in the reference's channel order; max keeps the first on a NaN, as
  // std::max(score, bound) from -inf does.
  int heads = 1;
  float* bound = nullptr;  // [pages]
};
// The group's page scores from one call per query head: `bound_one(h, out)` writes head h's bounds;
// the scores start at -inf and take std::max(score, bound) per head, in head order (the selector's rule
// before the grouped call). Shared by the host backends.
template <class BoundOne>
void group_page_bound(const PageBoundParams& p, BoundOne&& bound_one) {
  thread_local std::vector<float> one;  // one head's bounds; reused (a call per KV head, layer and step)
  one.resize(static_cast<size_t>(p.pages));
  for (int64_t i = 0; i < p.pages; ++i) p.bound[i] = -std::numeric_limits<float>::infinity();
  for (int h = 0; h < p.heads; ++h) {
    bound_one(h, one.data());
    for (int64_t i = 0; i < p.pages; ++i) p.bound[i] = p.bound[i] < one[size_t(i)] ? one[size_t(i)] : p.bound[i];
  }
}
struct PageSelectParams {  // ref::quest_select_pages (the last page always kept), for each of `rows`
  const float* bound = nullptr;  // [rows, pages]
  int64_t pages = 0, k = 0;
  int rows = 1;  // independent selections in one call: the result is rows x min(k, pages) ids, row by row
};
struct GatherAttentionParams {  // ref::gqa_gather_attention
  const float* queries = nullptr;  // [rows, d]: the query heads of one GQA group
  int rows = 0;
  // keys/values [resident_rows, d]: the whole stored K/V of one (layer, KV head). A device backend keeps
  // them resident across calls (keyed by the host pointer), as a KV cache is: the trace's arrays do not
  // change during a replay, and resident_rows >= every index.
  const float *keys = nullptr, *values = nullptr;
  int64_t resident_rows = 0;
  int d = 0;
  const int32_t* idx = nullptr;  // [m] token ids to attend
  int64_t m = 0;
  float scale = 1;
  float *out = nullptr, *lse = nullptr;  // [rows, d], [rows]
};
struct BiasedAttentionParams {  // ref::biased_attention, each query row over the same entries
  const float* queries = nullptr;  // [rows, d]
  int rows = 0;
  const float *keys = nullptr, *values = nullptr, *bias = nullptr;  // [m, d], [m, d], [m]
  int64_t m = 0;
  int d = 0;
  float scale = 1;
  float *out = nullptr, *lse = nullptr;  // [rows, d], [rows]
};
struct MergeStateParams {  // ref::merge_state, row-wise; out may alias a (as the replay merges in place)
  const float *out_a = nullptr, *lse_a = nullptr, *out_b = nullptr, *lse_b = nullptr;
  int rows = 0, d = 0;
  float *out = nullptr, *lse = nullptr;
};

struct QcivfBuildParams {  // ref::qcivf_build
  const float* centroids = nullptr;  // [groups, C, d]
  int groups = 1, C = 0;
  const float* keys = nullptr;       // [n, d]
  int64_t n = 0;
  int d = 0;
  float scale = 1;
  int rho = 0;
  int32_t* ivf = nullptr;            // [C, min(rho, n)]
};
struct CtkvrRecallParams {  // ref::ctkvr_recall: the sorted, unique union of the top c_prime lists
  const float* q = nullptr;          // [groups, d]
  int groups = 1;
  const float* centroids = nullptr;  // [groups, C, d]
  int C = 0, d = 0;
  const int32_t* ivf = nullptr;      // [C, rho]
  int rho = 0, c_prime = 0;
};
struct CtkvrRerankParams {  // ref::ctkvr_rerank: recalled ids in rank order, the first rho_prime
  const float* q = nullptr;          // [groups, d]
  int groups = 1;
  const float* keys = nullptr;       // [resident_rows, d], kept resident by a device backend
  int64_t n = 0;                     // ids must be < n
  int64_t resident_rows = 0;         // >= n: the whole array, so one upload serves every step
  int d = 0;
  const int32_t* recalled = nullptr;
  int64_t m = 0;
  float scale = 1;
  int rho_prime = 0;
};

struct ScoreGemvParams {  // ref::score_gemv
  const float* q = nullptr;  // [d]
  const float* M = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  bool cosine = false;
  float scale = 1;
  float* scores = nullptr;   // [n]
};
struct ScoreGemmParams {  // ref::score_gemm, dot: S[m, n] = scale · Q·Mᵀ, each element as score_gemv's
  const float* Q = nullptr;  // [m, d]
  int64_t m = 0;
  const float* M = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  float scale = 1;
  float* S = nullptr;        // [m, n]
};
struct SegmentMeanParams {  // ref::segment_mean
  const float* X = nullptr;         // [n, d]
  int64_t n = 0;
  int d = 0;
  const int32_t* starts = nullptr;  // [segments], strictly increasing, starts[0] = 0
  int64_t segments = 0;
  float* out = nullptr;             // [segments, d]
};
struct DedupParams {  // ref::dedup: sorted, unique
  const int32_t* ids = nullptr;
  int64_t n = 0;
};

struct ChessSelectParams {  // ref::chess_hierarchical_select over the regular hierarchy, survivors scope
  const float *grid_scores = nullptr, *chunk_scores = nullptr, *page_scores = nullptr;
  int64_t pages = 0;  // chunks = ceil(pages / pages_per_chunk), grids = ceil(chunks / chunks_per_grid)
  int pages_per_chunk = 1, chunks_per_grid = 1;
  double rho_g = 1, rho_c = 1, rho_p = 1;
};
struct ChessKept {  // kept ids per level, ascending
  std::vector<int32_t> grids, chunks, pages;
};
struct PageVectorsParams {  // ref::chess_page_vectors
  const float* const* sources = nullptr;  // [count] key rows of every (layer, KV head), each [n, d]
  int64_t count = 0, n = 0;
  int d = 0, page_size = 1;
  float* out = nullptr;
};
struct TailMeanParams {  // ref::tail_mean: mean of the last w rows of X[m, d]
  const float* X = nullptr;
  int64_t m = 0;
  int d = 0;
  int64_t w = 0;
  float* out = nullptr;  // [d]
};
struct GroupMeanParams {  // ref::group_mean: out[ceil(m / group), d]
  const float* X = nullptr;
  int64_t m = 0;
  int d = 0, group = 1;
  float* out = nullptr;
};
struct ContextPagesParams {  // ref::chess_context_pages
  const int32_t* selected = nullptr;
  int64_t count = 0, num_pages = 0, sink_pages = 0, window_pages = 0;
};

struct PositionIdsParams {  // ids [0, min(sinks, n)) then [max(that, n - window), n), ascending
  int64_t n = 0, sinks = 0, window = 0;
};
struct SekvSummaryParams {  // per span: k-bar, v-bar = the weighted means of its rows (ref::segment_weighted_mean),
                            // summary = normalize(k-bar · W)
  const float *keys = nullptr, *values = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  const float* weights = nullptr;  // [n] per-token weights (surprisal), or null: uniform
  const int32_t *span_begin = nullptr, *span_end = nullptr;  // [spans], tokens [begin, end), end <= n
  int64_t spans = 0;
  const float* W = nullptr;  // [d, d_proj]
  int d_proj = 0;
  float *kbar = nullptr, *vbar = nullptr, *summaries = nullptr;  // [spans, d], [spans, d], [spans, d_proj]
};
struct SekvRoutingParams {  // best[s] = max over the rows of sekv_route((q_r·W)·summary_s, |S_s|), from -1
  const float* queries = nullptr;  // [rows, d]: the query heads of one GQA group
  int rows = 0, d = 0;
  const float* W = nullptr;  // [d, d_proj]
  int d_proj = 0;
  const float* summaries = nullptr;  // [spans, d_proj]
  const int32_t* span_len = nullptr;  // [spans]
  int64_t spans = 0;
  float* best = nullptr;  // [spans]
};
struct SekvZoomParams {  // spans with span_end - 1 <= position and gate > threshold, by decreasing gate (ties
                         // by the lower span), taken while their tokens fit in room (+1e-9); the first misfit stops
  const float* gate = nullptr;       // [spans]
  const int32_t* span_len = nullptr;  // [spans]
  const int32_t* span_end = nullptr;  // [spans]
  int64_t spans = 0, position = 0;
  double threshold = 0;  // compared in double, as gate > tau is on the host
  double room = 0;
  double* used = nullptr;  // out: the zoomed spans' tokens
};

struct PcaParams {  // ref::pca_projection: W[d, d_proj] row-major
  const float* keys = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0, d_proj = 0;
};
struct SvdParams {  // ref::truncated_svd with the energy rank rule
  const float* X = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  double energy_fraction = 1;
  int r_max = 0;
};

// Which steps ran where, and how often (thread-safe: replay's attention runs on worker threads).
class StepLog {
 public:
  struct Entry {
    Where where = Where::host;
    int64_t calls = 0;
  };
  void record(Step s, Where w);
  std::map<Step, Entry> entries() const;

 private:
  mutable std::mutex mu_;
  std::map<Step, Entry> entries_;
};

// The interface. Public calls are non-virtual and log the step; implementations override the do_*
// functions and where(). Const calls may run concurrently from several threads.
class Backend {
 public:
  virtual ~Backend() = default;
  // "host", "cuda (emulated on the CPU)" or "cuda (<device name>)".
  virtual std::string name() const = 0;
  virtual Where where(Step s) const = 0;
  // The kernel functions a step runs on this backend, in launch order ("opt::topk (...)", ...): what the
  // replay report lists per policy and phase next to the step log (a backend's kernels per step are fixed,
  // so the log need not copy them per call). The host backends name their kvsim::ref / kvsim::host calls.
  virtual std::string kernels(Step s) const;
  // Whether timings from this backend say anything about a GPU (false on the host and the emulator).
  virtual bool timing_meaningful() const { return false; }
  // A backend of the same kind with its own empty step log, sharing what it keeps resident: one per
  // policy, so each policy's report lists only its own steps.
  virtual std::unique_ptr<Backend> fork() const = 0;

  void obs_window_scores(const WindowScoreParams& p) const { log(Step::window_scores), do_obs_window_scores(p); }
  void pool1d(const Pool1dParams& p) const { log(Step::pool1d), do_pool1d(p); }
  void chunk_sum(const ChunkSumParams& p) const { log(Step::chunk_sum), do_chunk_sum(p); }
  std::vector<int32_t> topk(const TopkParams& p) const { return log(Step::topk), do_topk(p); }
  void quest_page_minmax(const PageMinmaxParams& p) const { log(Step::page_minmax), do_quest_page_minmax(p); }
  void quest_page_bound(const PageBoundParams& p) const { log(Step::page_bound), do_quest_page_bound(p); }
  std::vector<int32_t> quest_select_pages(const PageSelectParams& p) const {
    return log(Step::page_select), do_quest_select_pages(p);
  }
  void gather_attention(const GatherAttentionParams& p) const { log(Step::gather_attention), do_gather_attention(p); }
  void biased_attention(const BiasedAttentionParams& p) const { log(Step::biased_attention), do_biased_attention(p); }
  void merge_state(const MergeStateParams& p) const { log(Step::merge_state), do_merge_state(p); }
  int qcivf_build(const QcivfBuildParams& p) const { return log(Step::qcivf_build), do_qcivf_build(p); }
  std::vector<int32_t> ctkvr_recall(const CtkvrRecallParams& p) const {
    return log(Step::ctkvr_recall), do_ctkvr_recall(p);
  }
  std::vector<int32_t> ctkvr_rerank(const CtkvrRerankParams& p) const {
    return log(Step::ctkvr_rerank), do_ctkvr_rerank(p);
  }

  void score_gemv(const ScoreGemvParams& p) const { log(Step::score_gemv), do_score_gemv(p); }
  void score_gemm(const ScoreGemmParams& p) const { log(Step::score_gemm), do_score_gemm(p); }
  void segment_mean(const SegmentMeanParams& p) const { log(Step::segment_mean), do_segment_mean(p); }
  std::vector<int32_t> dedup(const DedupParams& p) const { return log(Step::dedup), do_dedup(p); }

  ChessKept chess_select(const ChessSelectParams& p) const { return log(Step::chess_select), do_chess_select(p); }
  void chess_page_vectors(const PageVectorsParams& p) const { log(Step::page_vectors), do_chess_page_vectors(p); }
  void tail_mean(const TailMeanParams& p) const { log(Step::tail_mean), do_tail_mean(p); }
  void group_mean(const GroupMeanParams& p) const { log(Step::group_mean), do_group_mean(p); }
  std::vector<int32_t> chess_context_pages(const ContextPagesParams& p) const {
    return log(Step::context_pages), do_chess_context_pages(p);
  }

  std::vector<float> pca_projection(const PcaParams& p) const { return log(Step::pca_projection), do_pca_projection(p); }
  ref::LowRankFactors truncated_svd(const SvdParams& p) const { return log(Step::truncated_svd), do_truncated_svd(p); }

  std::vector<int32_t> position_ids(const PositionIdsParams& p) const {
    return log(Step::position_ids), do_position_ids(p);
  }
  void sekv_summaries(const SekvSummaryParams& p) const { log(Step::sekv_summaries), do_sekv_summaries(p); }
  void sekv_routing(const SekvRoutingParams& p) const { log(Step::sekv_routing), do_sekv_routing(p); }
  std::vector<int32_t> sekv_zoom(const SekvZoomParams& p) const { return log(Step::sekv_zoom), do_sekv_zoom(p); }

  const StepLog& steps() const { return *log_; }

 protected:
  virtual void do_obs_window_scores(const WindowScoreParams& p) const = 0;
  virtual void do_pool1d(const Pool1dParams& p) const = 0;
  virtual void do_chunk_sum(const ChunkSumParams& p) const = 0;
  virtual std::vector<int32_t> do_topk(const TopkParams& p) const = 0;
  virtual void do_quest_page_minmax(const PageMinmaxParams& p) const = 0;
  virtual void do_quest_page_bound(const PageBoundParams& p) const = 0;
  virtual std::vector<int32_t> do_quest_select_pages(const PageSelectParams& p) const = 0;
  virtual void do_gather_attention(const GatherAttentionParams& p) const = 0;
  virtual void do_biased_attention(const BiasedAttentionParams& p) const = 0;
  virtual void do_merge_state(const MergeStateParams& p) const = 0;
  virtual int do_qcivf_build(const QcivfBuildParams& p) const = 0;
  virtual std::vector<int32_t> do_ctkvr_recall(const CtkvrRecallParams& p) const = 0;
  virtual std::vector<int32_t> do_ctkvr_rerank(const CtkvrRerankParams& p) const = 0;
  virtual void do_score_gemv(const ScoreGemvParams& p) const = 0;
  virtual void do_score_gemm(const ScoreGemmParams& p) const = 0;
  virtual void do_segment_mean(const SegmentMeanParams& p) const = 0;
  virtual std::vector<int32_t> do_dedup(const DedupParams& p) const = 0;
  virtual ChessKept do_chess_select(const ChessSelectParams& p) const = 0;
  virtual void do_chess_page_vectors(const PageVectorsParams& p) const = 0;
  virtual void do_tail_mean(const TailMeanParams& p) const = 0;
  virtual void do_group_mean(const GroupMeanParams& p) const = 0;
  virtual std::vector<int32_t> do_chess_context_pages(const ContextPagesParams& p) const = 0;
  virtual std::vector<float> do_pca_projection(const PcaParams& p) const = 0;
  virtual ref::LowRankFactors do_truncated_svd(const SvdParams& p) const = 0;
  virtual std::vector<int32_t> do_position_ids(const PositionIdsParams& p) const = 0;
  virtual void do_sekv_summaries(const SekvSummaryParams& p) const = 0;
  virtual void do_sekv_routing(const SekvRoutingParams& p) const = 0;
  virtual std::vector<int32_t> do_sekv_zoom(const SekvZoomParams& p) const = 0;

 private:
  void log(Step s) const { log_->record(s, where(s)); }
  std::unique_ptr<StepLog> log_ = std::make_unique<StepLog>();
};

// The host reference kernels (kvsim::ref). host_backend() is a shared instance for callers that do not
// need a step log of their own (a selector's default).
std::unique_ptr<Backend> make_host_backend();
const Backend& host_backend();

// The optimized host kernels (kvsim::host, kernels/host/README.md) where one exists, the reference
// elsewhere. Every score a selection is made from is bit-identical to the reference's, so selections
// are the same; attention outputs agree to float rounding. What `kvsim replay` runs by default.
std::unique_ptr<Backend> make_host_optimized_backend();
const Backend& host_optimized_backend();

// "reference" or "optimized" -> the backend above; anything else throws std::invalid_argument.
const Backend& host_backend_named(const std::string& kernels);

// The optimized CUDA kernels (kernels/optimized/) for every step: on a GPU when nvcc built the kernels
// and a device is present, else on the CPU through the emulator. `why` (when not null) says why the
// emulator was chosen. Never null.
std::unique_ptr<Backend> make_cuda_backend(std::string* why = nullptr);

}  // namespace kvsim::kernels
