// The host backend: every step on the reference kernels (kvsim::ref), exactly the calls the selectors
// made before the backend existed, so `kvsim replay --device cpu` is unchanged bit for bit.
#include <span>

#include "kernels/backend/backend.hpp"
#include "kernels/reference/reference.hpp"

namespace kvsim::kernels {

namespace {
class HostBackend final : public Backend {
 public:
  std::string name() const override { return "host"; }
  Where where(Step) const override { return Where::host; }
  std::unique_ptr<Backend> fork() const override { return std::make_unique<HostBackend>(); }

 protected:
  void do_obs_window_scores(const WindowScoreParams& p) const override {
    ref::obs_window_scores(p.queries, p.groups, p.window, p.keys, p.n, p.d, p.scale, p.scores);
  }
  void do_pool1d(const Pool1dParams& p) const override {
    ref::pool1d(p.in, p.n, p.kernel, p.is_max ? ref::Pool1D::max : ref::Pool1D::avg, p.out);
  }
  void do_chunk_sum(const ChunkSumParams& p) const override { ref::chunk_sum(p.scores, p.n, p.chunk, p.out); }
  std::vector<int32_t> do_topk(const TopkParams& p) const override {
    return ref::topk(std::span<const float>(p.scores, size_t(p.n)), p.k);
  }
  void do_quest_page_minmax(const PageMinmaxParams& p) const override {
    ref::quest_page_minmax(p.keys, p.n, p.d, p.page_size, p.kmin, p.kmax);
  }
  void do_quest_page_bound(const PageBoundParams& p) const override {
    ref::quest_page_bound(p.q, p.kmin, p.kmax, p.pages, p.d, p.bound);
  }
  std::vector<int32_t> do_quest_select_pages(const PageSelectParams& p) const override {
    return ref::quest_select_pages(p.bound, p.pages, p.k);
  }
  void do_gather_attention(const GatherAttentionParams& p) const override {
    ref::gqa_gather_attention(p.queries, p.rows, p.keys, p.values, p.resident_rows, p.d, p.idx, p.m, p.scale, p.out,
                              p.lse);
  }
  void do_biased_attention(const BiasedAttentionParams& p) const override {
    std::vector<ref::AttnEntry> entries(size_t(p.m));
    for (int64_t e = 0; e < p.m; ++e)
      entries[size_t(e)] = {p.keys + size_t(e) * p.d, p.values + size_t(e) * p.d, p.bias[size_t(e)]};
    for (int r = 0; r < p.rows; ++r)
      p.lse[r] = ref::biased_attention(p.queries + size_t(r) * p.d, entries, p.d, p.scale, p.out + size_t(r) * p.d);
  }
  void do_merge_state(const MergeStateParams& p) const override {
    for (int r = 0; r < p.rows; ++r) {
      const size_t o = size_t(r) * p.d;
      p.lse[r] = ref::merge_state(p.out_a + o, p.lse_a[r], p.out_b + o, p.lse_b[r], p.d, p.out + o);
    }
  }
  int do_qcivf_build(const QcivfBuildParams& p) const override {
    return ref::qcivf_build(p.centroids, p.groups, p.C, p.keys, p.n, p.d, p.scale, p.rho, p.ivf);
  }
  std::vector<int32_t> do_ctkvr_recall(const CtkvrRecallParams& p) const override {
    return ref::ctkvr_recall(p.q, p.groups, p.centroids, p.C, p.d, p.ivf, p.rho, p.c_prime);
  }
  std::vector<int32_t> do_ctkvr_rerank(const CtkvrRerankParams& p) const override {
    return ref::ctkvr_rerank(p.q, p.groups, p.keys, p.n, p.d, std::span<const int32_t>(p.recalled, size_t(p.m)),
                             p.scale, p.rho_prime);
  }
  void do_score_gemv(const ScoreGemvParams& p) const override {
    ref::score_gemv(p.q, p.M, p.n, p.d, p.scores, p.cosine ? ref::ScoreKind::cosine : ref::ScoreKind::dot, p.scale);
  }
  void do_segment_mean(const SegmentMeanParams& p) const override {
    ref::segment_mean(p.X, p.n, p.d, std::span<const int32_t>(p.starts, size_t(p.segments)), p.out);
  }
  std::vector<int32_t> do_dedup(const DedupParams& p) const override {
    return ref::dedup(std::span<const int32_t>(p.ids, size_t(p.n)));
  }
  ChessKept do_chess_select(const ChessSelectParams& p) const override {
    const int64_t chunks = (p.pages + p.pages_per_chunk - 1) / p.pages_per_chunk;
    const int64_t grids = (chunks + p.chunks_per_grid - 1) / p.chunks_per_grid;
    auto s = ref::chess_hierarchical_select(
        std::span<const float>(p.grid_scores, size_t(grids)), std::span<const float>(p.chunk_scores, size_t(chunks)),
        std::span<const float>(p.page_scores, size_t(p.pages)), p.pages_per_chunk, p.chunks_per_grid, p.rho_g,
        p.rho_c, p.rho_p);
    return {std::move(s.grids), std::move(s.chunks), std::move(s.pages)};
  }
  void do_chess_page_vectors(const PageVectorsParams& p) const override {
    ref::chess_page_vectors(std::span<const float* const>(p.sources, size_t(p.count)), p.n, p.d, p.page_size, p.out);
  }
  void do_tail_mean(const TailMeanParams& p) const override { ref::tail_mean(p.X, p.m, p.d, p.w, p.out); }
  void do_group_mean(const GroupMeanParams& p) const override { ref::group_mean(p.X, p.m, p.d, p.group, p.out); }
  std::vector<int32_t> do_chess_context_pages(const ContextPagesParams& p) const override {
    return ref::chess_context_pages(std::span<const int32_t>(p.selected, size_t(p.count)), p.num_pages,
                                    p.sink_pages, p.window_pages);
  }
};
}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

const Backend& host_backend() {
  static const HostBackend b;
  return b;
}

}  // namespace kvsim::kernels
