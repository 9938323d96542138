// The host backend: every step on the reference kernels (kvsim::ref), exactly the calls the selectors
// made before the backend existed.
#include "kernels/backend/host_backend.hpp"
#include "kernels/reference/hd.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>

#include "kernels/reference/reference.hpp"

namespace kvsim::kernels {

void HostBackend::do_obs_window_scores(const WindowScoreParams& p) const {
  ref::obs_window_scores(p.queries, p.groups, p.window, p.keys, p.n, p.d, p.scale, p.scores);
}
void HostBackend::do_pool1d(const Pool1dParams& p) const {
  ref::pool1d(p.in, p.n, p.kernel, p.is_max ? ref::Pool1D::max : ref::Pool1D::avg, p.out);
}
void HostBackend::do_chunk_sum(const ChunkSumParams& p) const { ref::chunk_sum(p.scores, p.n, p.chunk, p.out); }
std::vector<int32_t> HostBackend::do_topk(const TopkParams& p) const {
  return ref::topk(std::span<const float>(p.scores, size_t(p.n)), p.k);
}
void HostBackend::do_quest_page_minmax(const PageMinmaxParams& p) const {
  ref::quest_page_minmax(p.keys, p.n, p.d, p.page_size, p.kmin, p.kmax);
}
void HostBackend::do_quest_page_bound(const PageBoundParams& p) const {
  group_page_bound(p, [&](int h, float* out) {
    ref::quest_page_bound(p.q + int64_t(h) * p.d, p.kmin, p.kmax, p.pages, p.d, out);
  });
}
std::vector<int32_t> HostBackend::do_quest_select_pages(const PageSelectParams& p) const {
  std::vector<int32_t> all;
  for (int r = 0; r < p.rows; ++r) {
    const auto row = ref::quest_select_pages(p.bound + int64_t(r) * p.pages, p.pages, p.k);
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}
void HostBackend::do_gather_attention(const GatherAttentionParams& p) const {
  ref::gqa_gather_attention(p.queries, p.rows, p.keys, p.values, p.resident_rows, p.d, p.idx, p.m, p.scale, p.out,
                            p.lse);
}
void HostBackend::do_biased_attention(const BiasedAttentionParams& p) const {
  std::vector<ref::AttnEntry> entries(size_t(p.m));
  for (int64_t e = 0; e < p.m; ++e)
    entries[size_t(e)] = {p.keys + size_t(e) * p.d, p.values + size_t(e) * p.d, p.bias[size_t(e)]};
  for (int r = 0; r < p.rows; ++r)
    p.lse[r] = ref::biased_attention(p.queries + size_t(r) * p.d, entries, p.d, p.scale, p.out + size_t(r) * p.d);
}
void HostBackend::do_merge_state(const MergeStateParams& p) const {
  for (int r = 0; r < p.rows; ++r) {
    const size_t o = size_t(r) * p.d;
    p.lse[r] = ref::merge_state(p.out_a + o, p.lse_a[r], p.out_b + o, p.lse_b[r], p.d, p.out + o);
  }
}
int HostBackend::do_qcivf_build(const QcivfBuildParams& p) const {
  return ref::qcivf_build(p.centroids, p.groups, p.C, p.keys, p.n, p.d, p.scale, p.rho, p.ivf);
}
std::vector<int32_t> HostBackend::do_ctkvr_recall(const CtkvrRecallParams& p) const {
  return ref::ctkvr_recall(p.q, p.groups, p.centroids, p.C, p.d, p.ivf, p.rho, p.c_prime);
}
std::vector<int32_t> HostBackend::do_ctkvr_rerank(const CtkvrRerankParams& p) const {
  return ref::ctkvr_rerank(p.q, p.groups, p.keys, p.n, p.d, std::span<const int32_t>(p.recalled, size_t(p.m)),
                           p.scale, p.rho_prime);
}
void HostBackend::do_score_gemv(const ScoreGemvParams& p) const {
  ref::score_gemv(p.q, p.M, p.n, p.d, p.scores, p.cosine ? ref::ScoreKind::cosine : ref::ScoreKind::dot, p.scale);
}
void HostBackend::do_segment_mean(const SegmentMeanParams& p) const {
  ref::segment_mean(p.X, p.n, p.d, std::span<const int32_t>(p.starts, size_t(p.segments)), p.out);
}
std::vector<int32_t> HostBackend::do_dedup(const DedupParams& p) const {
  return ref::dedup(std::span<const int32_t>(p.ids, size_t(p.n)));
}
ChessKept HostBackend::do_chess_select(const ChessSelectParams& p) const {
  const int64_t chunks = (p.pages + p.pages_per_chunk - 1) / p.pages_per_chunk;
  const int64_t grids = (chunks + p.chunks_per_grid - 1) / p.chunks_per_grid;
  auto s = ref::chess_hierarchical_select(
      std::span<const float>(p.grid_scores, size_t(grids)), std::span<const float>(p.chunk_scores, size_t(chunks)),
      std::span<const float>(p.page_scores, size_t(p.pages)), p.pages_per_chunk, p.chunks_per_grid, p.rho_g,
      p.rho_c, p.rho_p);
  return {std::move(s.grids), std::move(s.chunks), std::move(s.pages)};
}
void HostBackend::do_chess_page_vectors(const PageVectorsParams& p) const {
  ref::chess_page_vectors(std::span<const float* const>(p.sources, size_t(p.count)), p.n, p.d, p.page_size, p.out);
}
void HostBackend::do_tail_mean(const TailMeanParams& p) const { ref::tail_mean(p.X, p.m, p.d, p.w, p.out); }
void HostBackend::do_group_mean(const GroupMeanParams& p) const { ref::group_mean(p.X, p.m, p.d, p.group, p.out); }
std::vector<int32_t> HostBackend::do_chess_context_pages(const ContextPagesParams& p) const {
  return ref::chess_context_pages(std::span<const int32_t>(p.selected, size_t(p.count)), p.num_pages,
                                  p.sink_pages, p.window_pages);
}
void HostBackend::do_score_gemm(const ScoreGemmParams& p) const {
ref::score_gemm(p.Q, p.m, p.M, p.n, p.d, p.S, ref::ScoreKind::dot, p.scale);
}
std::vector<float> HostBackend::do_pca_projection(const PcaParams& p) const {
return ref::pca_projection(p.keys, p.n, p.d, p.d_proj);
}
ref::LowRankFactors HostBackend::do_truncated_svd(const SvdParams& p) const {
return ref::truncated_svd(p.X, p.n, p.d, p.energy_fraction, p.r_max);
}

std::vector<int32_t> HostBackend::do_position_ids(const PositionIdsParams& p) const {
  const int64_t sink_end = std::clamp<int64_t>(p.sinks, 0, std::max<int64_t>(p.n, 0));
  const int64_t recent_begin = std::max(sink_end, p.n - std::max<int64_t>(p.window, 0));
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < sink_end; ++i) ids.push_back(int32_t(i));
  for (int64_t i = recent_begin; i < p.n; ++i) ids.push_back(int32_t(i));
  return ids;
}
void HostBackend::do_sekv_summaries(const SekvSummaryParams& p) const {
  const int32_t zero[1] = {0};
  std::vector<float> ones;
  for (int64_t i = 0; i < p.spans; ++i) {
    const int64_t b = p.span_begin[i], n = p.span_end[i] - b;
    const float* wts = p.weights ? p.weights + b : (ones.assign(size_t(n), 1.f), ones.data());
    // eq. 2: w_t = H_t / sum H_k; k-bar = sum w_t K_t, v-bar likewise.
    ref::segment_weighted_mean(p.keys + b * p.d, wts, n, p.d, zero, p.kbar + i * p.d);
    ref::segment_weighted_mean(p.values + b * p.d, wts, n, p.d, zero, p.vbar + i * p.d);
    // eq. 3: W (sum w_t K_t), normalized.
    ref::hd::sekv_summary(p.kbar + i * p.d, p.W, p.d, p.d_proj, p.summaries + i * p.d_proj);
  }
}
void HostBackend::do_sekv_routing(const SekvRoutingParams& p) const {
  std::vector<float> qp(size_t(p.d_proj)), a(size_t(p.spans));
  std::fill_n(p.best, p.spans, -1.f);
  for (int r = 0; r < p.rows; ++r) {
    const float* q = p.queries + size_t(r) * p.d;
    for (int j = 0; j < p.d_proj; ++j) {  // eq. 4: q' = q·W, in double, rounded once
      double acc = 0;
      for (int c = 0; c < p.d; ++c) acc += double(q[c]) * p.W[size_t(c) * p.d_proj + j];
      qp[size_t(j)] = float(acc);
    }
    if (p.spans) ref::sekv_routing_scores(qp.data(), p.summaries, p.spans, p.d_proj, p.span_len, a.data());
    for (int64_t i = 0; i < p.spans; ++i) p.best[i] = std::max(p.best[i], a[size_t(i)]);
  }
}
std::vector<int32_t> HostBackend::do_sekv_zoom(const SekvZoomParams& p) const {
  std::vector<int32_t> cand, zoomed;
  for (int64_t i = 0; i < p.spans; ++i)
    if (p.span_end[i] - 1 <= p.position && p.gate[i] > p.threshold) cand.push_back(int32_t(i));
  std::stable_sort(cand.begin(), cand.end(), [&](int32_t x, int32_t y) { return p.gate[x] > p.gate[y]; });
  double used = 0;
  for (int32_t i : cand) {
    if (used + p.span_len[i] > p.room + 1e-9) break;
    used += p.span_len[i];
    zoomed.push_back(i);
  }
  if (p.used) *p.used = used;
  return zoomed;
}

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

const Backend& host_backend() {
  static const HostBackend b;
  return b;
}

const Backend& host_backend_named(const std::string& kernels) {
if (kernels == "reference") return host_backend();
if (kernels == "optimized") return host_optimized_backend();
throw std::invalid_argument("kernels '" + kernels + "': allowed reference, optimized");
}

}  // namespace kvsim::kernels
