// The parameter structs of the optimized CUDA kernels (kernels/optimized/*.cu), one per kernel, in the
// style of FlashInfer's Params: a launcher takes one struct instead of a long list of raw pointers, so a
// call site names every field and a new field does not reorder every caller. Pointers are DEVICE
// pointers (or mapped pinned host memory where a field says so); plain ints are host values the
// launcher plans with. No CUDA header is needed here, and the .cu files (C++17) include it too.
#pragma once
#include <cstdint>

namespace kvsim::opt {

// Split-KV paged decode attention with GQA (paged_decode.cu). The cache and page table are FlashInfer's
// (kernels/reference/paged.hpp): k_pages, v_pages [num_pages, page_size, num_kv_heads, head_dim] (NHD);
// request b owns pages indices[indptr[b] .. indptr[b+1]), all full but the last, which holds
// last_page_len[b] tokens. Sparse page-list attention is the same call with a rewritten indices list.
struct PagedDecodeParams {
  const float* q = nullptr;  // [batch, num_qo_heads, head_dim]
  const float* k_pages = nullptr;
  const float* v_pages = nullptr;
  const int32_t* indptr = nullptr;         // [batch + 1]
  const int32_t* indices = nullptr;        // page ids
  const int32_t* last_page_len = nullptr;  // [batch], 1..page_size
  float* out = nullptr;                    // [batch, num_qo_heads, head_dim]
  float* lse = nullptr;                    // [batch, num_qo_heads], natural log
  int batch = 0, num_qo_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 0;
  float scale = 1.f;
  // Planning (host values; FlashInfer's plan() reads them from a host copy of indptr):
  int max_pages_per_request = 0;  // an upper bound of indptr[b+1] - indptr[b]
  int pages_per_split = 0;        // KV pages per split; 0 = pick so the grid fills the GPU
  // Floats of the head dimension each lane holds (kernels/optimized/README.md): 4 (one float4) or 8 (two:
  // half the lanes per token, so a warp takes twice the tokens per instruction); 0 = the default.
  // Benchmarks compare them on a GPU.
  int lane_floats = 0;
  // Partial states of the splits: the channels [batch, num_qo_heads, splits, head_dim], then the lse
  // [batch, num_qo_heads, splits] (so each partial row is float4-aligned); 16-byte aligned, required when
  // the plan has more than one split (paged_decode_workspace_floats says how many).
  float* workspace = nullptr;
};

// Top-k / quantile selection per row (topk.cu): the exact ranking of kvsim::ref::topk (higher score
// first, ties by the lower index, NaN last, -0 = +0).
struct TopkParams {
  const float* scores = nullptr;  // [rows, n]
  int32_t* out = nullptr;         // [rows, out_stride]: each row's min(k, n) ids first
  int rows = 0;
  int64_t out_stride = 0;     // ids between two rows' outputs (0: min(k, n), rows back to back)
  int64_t scores_stride = 0;  // scores between two rows' starts (0: n); a row may sit in a longer one
  int64_t n = 0, k = 0;
  bool rank_order = true;  // true: best first (topk); false: ascending index (quantile_select's kept set)
  // Optional candidate filter (CHESS's survivors of a level): element i competes only when
  // parent_kept[i / group_size] != 0; k must not exceed the number of such candidates.
  const unsigned char* parent_kept = nullptr;
  int64_t group_size = 1;
  // Elements of a row per block (0 or above 4096: 4096). A row longer than that is split over several
  // blocks, in every launch for all rows (grid_select.cuh); tests shorten it to split small rows.
  int64_t block_elems = 0;
  // [rows · topk_workspace_words(p)] words; required when topk_workspace_words(p) > 0 (rows split over
  // blocks: their select state, slice counts and, in rank order, the merge sort's buffers).
  unsigned long long* workspace = nullptr;
};

// Gather of offloaded KV rows into a staging buffer as runs of adjacent rows (gather_runs.cu). Run r
// copies rows [src_row[r], src_row[r] + rows[r]) of src to rows [dst_row[r], ...) of dst; run_planner.hpp
// builds the runs from a page list on the host.
struct GatherRunsParams {
  const float* src = nullptr;  // [*, row_elems]; may be mapped pinned host memory (zero-copy gather)
  // [Σ rows, row_elems]; e.g. the pinned staging buffer. The launcher does not wait for the copy: a
  // host reader of a pinned dst synchronizes first (cudaStreamSynchronize / an event), device readers
  // on the same stream need nothing.
  float* dst = nullptr;
  const int32_t* src_row = nullptr;  // [num_runs]
  const int32_t* dst_row = nullptr;  // [num_runs]
  const int32_t* rows = nullptr;     // [num_runs]
  int64_t num_runs = 0;
  int64_t row_elems = 0;
};

// CTKVR centroid recall + dedup (centroid_recall.cu): kvsim::ref::ctkvr_recall.
// `heads` independent recalls in one call (every KV head of a layer: each its own group, centroids and
// lists); every array below gains a leading [heads] dimension, C' = min(c_prime, C).
struct CentroidRecallParams {
  const float* q = nullptr;          // [heads, G, d], each KV head's GQA group's queries
  const float* centroids = nullptr;  // [heads, G, C, d]
  const int32_t* ivf = nullptr;      // [heads, C, rho], key ids in [0, num_keys)
  int32_t* out = nullptr;            // [heads, C'·rho]: each head's sorted unique recalled ids, from its start
  int32_t* chosen = nullptr;         // [heads, C']: the chosen centroid ids, in rank order
  int G = 0, C = 0, d = 0, rho = 0, c_prime = 0;
  int heads = 1;
  int64_t num_keys = 0;  // the bitmap's size: every ivf id is below it
  float* centroid_scores = nullptr;  // [heads, C] scratch: cosine per centroid, max over the group
  int32_t* count = nullptr;          // [heads] scratch then out: the recalled counts, read back by the launcher
  // No longer used (the dedup bitmap now lives in the recall kernel's shared memory); kept so callers
  // written against the earlier global-bitmap recall still compile.
  unsigned* bitmap = nullptr;
};

// CHESS selection (chess_select.cu): the anchor's scores over every summary vector of the three levels
// in one launch, then the hierarchical quantile select of the regular hierarchy (page p in chunk
// p / pages_per_chunk, chunk c in grid c / chunks_per_grid), as policies/chess/selector.cpp does it.
struct ChessSelectParams {
  const float* anchor = nullptr;     // [d]
  const float* summaries = nullptr;  // [G + C + P, d]: grid, chunk and page vectors, concatenated
  float* scores = nullptr;           // [G + C + P]: the scores, written (dot · scale)
  int64_t num_pages = 0;             // P; C = ceil(P / pages_per_chunk), G = ceil(C / chunks_per_grid)
  int pages_per_chunk = 0, chunks_per_grid = 0, d = 0;
  float scale = 1.f;
  double rho_g = 1, rho_c = 1, rho_p = 1;
  bool masked_all = false;  // QuantileScope::masked_all instead of survivors (kernels/reference/select.hpp)
  int32_t *grids = nullptr, *chunks = nullptr, *pages = nullptr;  // [G], [C], [P]: kept ids, ascending
  int32_t* level_counts = nullptr;  // [3] scratch: the kept counts of the three levels, read back once
  // No longer used (the kept marks now live in the select kernel's shared memory); kept so callers
  // written against the earlier multi-launch select still compile.
  unsigned char* level_mask = nullptr;
};


// SEKV's routing as a deployment runs it (route_gates.cu): every query head's gate over every span in one
// launch, fp32 (the replay keeps sekv.cu's exact twin of the host's double arithmetic). Head h projects
// its query with its summary set's W (set h / group: group 1 = a W and summaries per query head, SEKV
// eq. 3) and scores that set's summaries: gate = sigmoid(q W · s / sqrt(d_proj) + log |S|) (eq. 4-5).
struct RouteGatesParams {
  const float* q = nullptr;             // [heads, d]
  const float* W = nullptr;             // [heads / group, d, d_proj]
  const float* summaries = nullptr;     // [heads / group, spans, d_proj], 16-byte aligned
  const int32_t* span_len = nullptr;    // [spans]
  float* gates = nullptr;               // [heads, spans] out
  int heads = 0, group = 1, d = 0, d_proj = 0;  // d <= 256; d_proj a power of two in [4, 128]
  int64_t spans = 0;
};


// Every query head's scores over its KV head's stored vectors, one launch for every KV head at batch 1
// (group_scores.cu): the score GEMV a deployment runs for SentenceKV's sentence scores (dot·scale
// against the mean keys) and Quest's page bounds (Σ_c max(q_c·min_c, q_c·max_c) when `hi` is given,
// `vectors` then holding each page's channel minima).
struct GroupScoreParams {
  const float* q = nullptr;        // [kv_heads · group, d]: query head h belongs to KV head h / group
  const float* vectors = nullptr;  // [kv_heads, n, d], 16-byte aligned
  const float* hi = nullptr;       // null, or [kv_heads, n, d] (Quest: the channel maxima)
  float* out = nullptr;            // [kv_heads · group, n]
  int kv_heads = 0, group = 1, d = 0;  // group <= 32; d / 4 a power of two, d <= 256
  int64_t n = 0;
  float scale = 1.f;  // applied to the dot (not to a bound)
};

}  // namespace kvsim::opt
