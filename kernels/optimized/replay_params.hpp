// The parameter structs of the optimized CUDA kernels that complete `kvsim replay --device cuda` (issue #28
// item 3): every step a policy's trace selector calls (kernels/backend/backend.hpp) has a device kernel
// here or in params.hpp. Same conventions as params.hpp: DEVICE pointers, host sizes, scratch as fields.
// Kept apart from params.hpp so the kernels there can change without touching these.
#pragma once
#include <cstdint>

namespace kvsim::opt {

// ---- dedup.cu: sorted unique ids through a bitmap (no sort) ----
struct DedupParams {
  const int32_t* ids = nullptr;  // [n], each in [0, id_bound)
  int64_t n = 0;
  // Ranges of ids added to the set, [range_begin[i], range_end[i]) clipped to [0, id_bound) (CHESS's sink
  // and window pages); host values.
  int64_t range_begin[2] = {0, 0}, range_end[2] = {0, 0};
  int64_t id_bound = 0;       // the bitmap's size in ids (dedup_id_bound finds it)
  int32_t* out = nullptr;     // the sorted unique ids; room for n + the ranges' sizes (at most id_bound)
  unsigned* bitmap = nullptr;  // [ceil(id_bound / 32)] scratch
  int32_t* scratch = nullptr;  // [2] scratch: the ids' min and max, then the output count
};

// ---- position_ids.cu: StreamingLLM's sinks + recent window (and full's 0..n-1) as ids ----
struct PositionIdsParams {
  int64_t n = 0, sinks = 0, window = 0;
  int32_t* out = nullptr;  // [min(sinks, n) + the window's part], ascending
};

// ---- exact_scores.cu: dot or cosine scores in the host reference's summation order ----
struct ExactScoreParams {
  const float* Q = nullptr;  // [m, d]
  int64_t m = 0;
  const float* M = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  bool cosine = false;
  float scale = 1.f;
  float* S = nullptr;  // [m, n]
};

// ---- means.cu: segment means and page means (CHESS's page vectors, tail and group means) ----
struct SegmentMeanParams {
  const float* X = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  const int32_t* starts = nullptr;  // [segments], strictly increasing, starts[0] = 0
  int64_t segments = 0;
  float* out = nullptr;  // [segments, d]
};
struct PageMeanParams {  // out[p, s, :] = mean of rows [p·page_size, min(n, (p+1)·page_size)) of source s
  const float* X = nullptr;  // [sources, n, d]: the sources back to back
  int64_t sources = 1, n = 0;
  int d = 0;
  int64_t page_size = 1;
  float* out = nullptr;  // [ceil(n / page_size), sources, d]
};

// ---- window_scores.cu: observation-window scores, 1-D pooling, chunk sums ----
struct WindowScoreParams {
  const float* queries = nullptr;  // [groups · window, d]
  int groups = 1, window = 0;
  const float* keys = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  float scale = 1.f;
  float* row_max = nullptr;  // [groups · window] scratch
  float* row_inv = nullptr;  // [groups · window] scratch
  float* scores = nullptr;   // [n - window]
};

// ---- quest_pages.cu: Quest's page min/max, page bounds, page selection ----
struct PageMinmaxParams {
  const float* keys = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0, page_size = 1;
  float *kmin = nullptr, *kmax = nullptr;  // [ceil(n / page_size), d]
};
struct PageBoundParams {
  const float* q = nullptr;  // [heads, d]: the query heads of one KV head's group
  const float *kmin = nullptr, *kmax = nullptr;  // [pages, d]
  int64_t pages = 0;
  int d = 0;
  int heads = 1;
  float* bound = nullptr;  // [pages]: the largest of the heads' bounds (std::max from -inf, head order)
};
struct PageSelectParams {  // the last page always, and the best k - 1 of the others; ascending
  const float* bound = nullptr;  // [rows, pages]
  int64_t pages = 0, k = 0;
  int rows = 1;            // independent selections (e.g. every KV head of a layer), one call
  int32_t* out = nullptr;  // [rows, min(k, pages)]
  unsigned long long* workspace = nullptr;  // [quest_select_workspace_words(*this)] (all rows) when > 0
};

// ---- uncertainty.cu: CHESS's uncertainty monitor, entropy and varentropy of softmax(logits) per row ----
struct UncertaintyParams {
  const float* logits = nullptr;  // [rows, vocab]
  int64_t vocab = 0;
  int rows = 1;
  float* out = nullptr;       // [rows, 2]: entropy, varentropy (nats)
  float* partials = nullptr;  // [uncertainty_partials_floats(vocab, rows)] scratch, 16-byte aligned
};

// ---- chess_levels.cu: the hierarchical select over given level scores (survivors scope) ----
struct ChessLevelsParams {
  const float *grid_scores = nullptr, *chunk_scores = nullptr, *page_scores = nullptr;
  int64_t pages = 0;
  int pages_per_chunk = 1, chunks_per_grid = 1;
  double rho_g = 1, rho_c = 1, rho_p = 1;
  int32_t *grids = nullptr, *chunks = nullptr, *kept_pages = nullptr;  // [G], [C], [P]: kept ids, ascending
  int32_t* level_counts = nullptr;  // [3] scratch: the kept counts of the three levels, read back once
  // No longer used (the kept marks live in the select kernel's shared memory); kept so callers
  // written against the earlier multi-launch select still compile.
  unsigned char* level_mask = nullptr;
};

// ---- entry_attention.cu: biased attention over assembled entries, and the merge of two states ----
struct BiasedAttentionParams {
  const float* q = nullptr;  // [rows, d]
  int rows = 0;
  const float *keys = nullptr, *values = nullptr, *bias = nullptr;  // [m, d], [m, d], [m] (bias may be null)
  int64_t m = 0;
  int d = 0;
  float scale = 1.f;
  float *out = nullptr, *lse = nullptr;  // [rows, d], [rows]
};
struct MergeStateParams {  // out may alias out_a or out_b; lse must not alias lse_a or lse_b
  const float *out_a = nullptr, *lse_a = nullptr, *out_b = nullptr, *lse_b = nullptr;
  int rows = 0, d = 0;
  float *out = nullptr, *lse = nullptr;
};

// ---- ctkvr_build.cu: CTKVR's qcIVF build and rerank ----
struct QcivfBuildParams {
  const float* centroids = nullptr;  // [groups, C, d]
  int groups = 1, C = 0;
  const float* keys = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  float scale = 1.f;
  int rho = 0;
  int32_t* ivf = nullptr;  // [C, min(rho, n)]
  float* scores = nullptr;  // [groups, C, n] scratch
  float* max_scores = nullptr;  // [C, n] scratch
  unsigned long long* workspace = nullptr;  // [C · topk_workspace_words({rows C, n, k min(rho, n)})] when > 0
};
struct RerankParams {
  const float* q = nullptr;  // [groups, d]
  int groups = 1;
  const float* keys = nullptr;  // [*, d]: ids index rows
  int d = 0;
  const int32_t* recalled = nullptr;  // [m]
  int64_t m = 0;
  float scale = 1.f;
  int64_t rho_prime = 0;
  int32_t* out = nullptr;  // [min(rho_prime, m)] key ids in rank order
  float* rows = nullptr;    // [m, d] scratch
  float* scores = nullptr;  // [groups, m] scratch
  float* max_scores = nullptr;  // [m] scratch
  int32_t* positions = nullptr;  // [min(rho_prime, m)] scratch
  unsigned long long* workspace = nullptr;  // [topk_workspace_words(..)] when that is > 0
};

// ---- sekv.cu: SEKV's PCA projection, span summaries, routing and zoom ----
struct PcaParams {
  const float* keys = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0, d_proj = 0;
  float* W = nullptr;  // [d, d_proj]
  double* mean = nullptr;  // [d] scratch
  double* cov = nullptr;   // [d, d] scratch
  double* vecs = nullptr;  // [d, d] scratch
  double* vals = nullptr;  // [d] scratch
};
struct SpanSummaryParams {
  const float *keys = nullptr, *values = nullptr;  // [n, d]
  const float* weights = nullptr;  // [n] or null (uniform)
  int d = 0;
  const int32_t *span_begin = nullptr, *span_end = nullptr;  // [spans]
  int64_t spans = 0;
  const float* W = nullptr;  // [d, d_proj]
  int d_proj = 0;
  float *kbar = nullptr, *vbar = nullptr, *summaries = nullptr;  // [spans, d], [spans, d], [spans, d_proj]
};
struct RoutingParams {
  const float* queries = nullptr;  // [rows, d]
  int rows = 0, d = 0;
  const float* W = nullptr;  // [d, d_proj]
  int d_proj = 0;
  const float* summaries = nullptr;  // [spans, d_proj]
  const int32_t* span_len = nullptr;  // [spans]
  int64_t spans = 0;
  float* q_proj = nullptr;  // [rows, d_proj] scratch
  float* best = nullptr;    // [spans]
};
struct ZoomParams {  // `rows` independent zooms over the same spans (e.g. every query head), one call
  const float* gate = nullptr;  // [rows, spans]
  const int32_t *span_len = nullptr, *span_end = nullptr;  // [spans]
  int64_t spans = 0, position = 0;
  double threshold = 0, room = 0;
  int rows = 1;
  int32_t* zoomed = nullptr;   // [rows, spans] out: each row's zoomed span ids in rank order, from its start
  float* keys = nullptr;       // [rows, spans] scratch: the candidates' gates, NaN elsewhere
  int32_t* ranked = nullptr;   // [rows, spans] scratch
  int32_t* count = nullptr;    // [rows, 2] scratch then out: candidates, then zoomed, per row
  double* used = nullptr;      // [rows] out: each row's zoomed spans' tokens
  unsigned long long* workspace = nullptr;  // [sekv_zoom_workspace_words(spans, rows)] when that is > 0
};

// ---- span_svd.cu: truncated SVD factors of span blocks, one thread per block ----
struct SpanSvdParams {
  const float* X = nullptr;  // [n, d]
  int64_t n = 0;
  int d = 0;
  // Outputs for k = min(n, d) singular triplets, descending: sigma[k], us[n, k] = U·Σ, vt[k, d] = Vᵀ.
  double* sigma = nullptr;
  float *us = nullptr, *vt = nullptr;
  double* gram = nullptr;  // [k, k] scratch
  double* vecs = nullptr;  // [k, k] scratch
  double* total = nullptr;  // [1] out: ||X||_F², in double
};

// ---- reconstruct.cu: SEKV's zoomed spans at full resolution, every low-rank block in one launch ----
struct ReconstructParams {
  // `blocks` low-rank blocks (a zoomed span's K or V for one KV head): block b is us [rows[b], rank[b]]
  // (U·Σ, span_svd.cu's us) at factors + factor_offset[b], its vt [rank[b], d] right after it, and
  // X = us·vt goes to out rows [out_row[b], out_row[b] + rows[b]).
  const float* factors = nullptr;
  const int64_t* factor_offset = nullptr;  // [blocks], in floats
  const int32_t* rows = nullptr;           // [blocks]
  const int32_t* rank = nullptr;           // [blocks]
  const int64_t* out_row = nullptr;        // [blocks]
  int blocks = 0, d = 0;                   // d <= 256
  float* out = nullptr;                    // [sum of rows, d]
};

}  // namespace kvsim::opt
