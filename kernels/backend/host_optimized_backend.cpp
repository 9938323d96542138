// The optimized host backend: the kvsim::host kernels where they exist (kernels/host/README.md), the
// reference (HostBackend) for every other step, and a memo of observation-window scores.
#include "kernels/backend/host_backend.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <future>
#include <map>
#include <mutex>

#include "kernels/host/host.hpp"
#include "kernels/reference/ivf.hpp"

namespace kvsim::kernels {

// The memo: key = every input's content (a 64-bit hash over the bytes of the window's queries and of
// the keys, with the sizes and the scale); value = the scores, computed once (a shared_future, so a
// second policy asking while the first computes waits instead of computing again). At most kMaxEntries
// entries; beyond that it starts over. Hashing the keys reads them once, ~1/50 of the scoring's work.
struct HostOptimizedBackend::WindowMemo {
  static constexpr size_t kMaxEntries = 512;
  std::mutex mu;
  std::map<std::array<uint64_t, 4>, std::shared_future<std::shared_ptr<const std::vector<float>>>> entries;
};

namespace {
uint64_t hash_bytes(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}
}  // namespace

HostOptimizedBackend::HostOptimizedBackend() : memo_(std::make_unique<WindowMemo>()) {}
HostOptimizedBackend::~HostOptimizedBackend() = default;

void HostOptimizedBackend::do_obs_window_scores(const WindowScoreParams& p) const {
  if (p.window <= 0 || p.window > p.n) {  // the kernel's own error
    host::obs_window_scores(p.queries, p.groups, p.window, p.keys, p.n, p.d, p.scale, p.scores);
    return;
  }
  const size_t out_n = size_t(p.n - p.window);
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &p.scale, 4);
  const std::array<uint64_t, 4> key = {
      hash_bytes(p.queries, size_t(p.groups) * p.window * p.d * sizeof(float), 1469598103934665603ull),
      hash_bytes(p.keys, size_t(p.n) * p.d * sizeof(float), 0x84222325cbf29ce4ull),
      (uint64_t(uint32_t(p.groups)) << 32) | uint32_t(p.window), (uint64_t(p.n) << 24) ^ (uint64_t(p.d) << 8) ^ scale_bits};
  std::promise<std::shared_ptr<const std::vector<float>>> mine;
  std::shared_future<std::shared_ptr<const std::vector<float>>> f;
  bool compute = false;
  {
    std::lock_guard<std::mutex> lock(memo_->mu);
    auto it = memo_->entries.find(key);
    if (it == memo_->entries.end()) {
      if (memo_->entries.size() >= WindowMemo::kMaxEntries) memo_->entries.clear();
      f = mine.get_future().share();
      memo_->entries.emplace(key, f);
      compute = true;
    } else {
      f = it->second;
    }
  }
  if (compute) {
    try {
      auto v = std::make_shared<std::vector<float>>(out_n);
      host::obs_window_scores(p.queries, p.groups, p.window, p.keys, p.n, p.d, p.scale, v->data());
      mine.set_value(std::move(v));
    } catch (...) {
      mine.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(memo_->mu);
      memo_->entries.erase(key);
    }
  }
  const auto& v = *f.get();
  std::copy(v.begin(), v.end(), p.scores);
}
std::vector<int32_t> HostOptimizedBackend::do_topk(const TopkParams& p) const { return host::topk(p.scores, p.n, p.k); }
void HostOptimizedBackend::do_quest_page_bound(const PageBoundParams& p) const {
  group_page_bound(p, [&](int h, float* out) {
    host::quest_page_bound(p.q + int64_t(h) * p.d, p.kmin, p.kmax, p.pages, p.d, out);
  });
}
std::vector<int32_t> HostOptimizedBackend::do_quest_select_pages(const PageSelectParams& p) const {
  // ref::quest_select_pages with the optimized top-k: the last page, then the best k - 1 of the others.
  if (p.pages <= 0 || p.k <= 0) return {};
  std::vector<int32_t> all;
  const int64_t others = std::min(p.k - 1, p.pages - 1);
  for (int r = 0; r < p.rows; ++r) {
    std::vector<int32_t> kept = {int32_t(p.pages - 1)};
    kept.resize(size_t(1 + others));
    host::topk_indices(p.bound + int64_t(r) * p.pages, p.pages - 1, others, kept.data() + 1);
    std::sort(kept.begin(), kept.end());
    all.insert(all.end(), kept.begin(), kept.end());
  }
  return all;
}
void HostOptimizedBackend::do_gather_attention(const GatherAttentionParams& p) const {
  host::attend_rows({.queries = p.queries, .rows = p.rows, .keys = p.keys, .values = p.values, .idx = p.idx,
                     .bias = nullptr, .m = p.m, .n = p.resident_rows, .d = p.d, .scale = p.scale, .out = p.out,
                     .lse = p.lse});
}
void HostOptimizedBackend::do_biased_attention(const BiasedAttentionParams& p) const {
  host::attend_rows({.queries = p.queries, .rows = p.rows, .keys = p.keys, .values = p.values, .idx = nullptr,
                     .bias = p.bias, .m = p.m, .n = p.m, .d = p.d, .scale = p.scale, .out = p.out, .lse = p.lse});
}
int HostOptimizedBackend::do_qcivf_build(const QcivfBuildParams& p) const {
  return host::qcivf_build(p.centroids, p.groups, p.C, p.keys, p.n, p.d, p.scale, p.rho, p.ivf);
}
std::vector<int32_t> HostOptimizedBackend::do_ctkvr_recall(const CtkvrRecallParams& p) const {
  return ref::ctkvr_recall(p.q, p.groups, p.centroids, p.C, p.d, p.ivf, p.rho, p.c_prime, nullptr,
                           &host::dedup_inplace);
}
std::vector<int32_t> HostOptimizedBackend::do_dedup(const DedupParams& p) const {
  std::vector<int32_t> ids(p.ids, p.ids + p.n);
  ids.resize(size_t(host::dedup_inplace(ids.data(), p.n)));
  return ids;
}
ChessKept HostOptimizedBackend::do_chess_select(const ChessSelectParams& p) const {
  auto s = host::chess_select(p.grid_scores, p.chunk_scores, p.page_scores, p.pages, p.pages_per_chunk,
                              p.chunks_per_grid, p.rho_g, p.rho_c, p.rho_p);
  return {std::move(s.grids), std::move(s.chunks), std::move(s.pages)};
}
std::vector<int32_t> HostOptimizedBackend::do_ctkvr_rerank(const CtkvrRerankParams& p) const {
  return host::ctkvr_rerank(p.q, p.groups, p.keys, p.n, p.d, p.recalled, p.m, p.scale, p.rho_prime);
}
void HostOptimizedBackend::do_score_gemv(const ScoreGemvParams& p) const {
  if (p.cosine) return HostBackend::do_score_gemv(p);
  host::exact_dots(p.q, 1, p.d, p.M, nullptr, p.n, p.d, p.scale, p.scores, p.n);
}
void HostOptimizedBackend::do_score_gemm(const ScoreGemmParams& p) const {
  host::exact_dots(p.Q, int(p.m), p.d, p.M, nullptr, p.n, p.d, p.scale, p.S, p.n);
}
std::vector<float> HostOptimizedBackend::do_pca_projection(const PcaParams& p) const {
  return host::pca_projection(p.keys, p.n, p.d, p.d_proj);
}
ref::LowRankFactors HostOptimizedBackend::do_truncated_svd(const SvdParams& p) const {
  return host::truncated_svd(p.X, p.n, p.d, p.energy_fraction, p.r_max);
}

std::string HostOptimizedBackend::kernels(Step s) const {
  switch (s) {  // the steps overridden above: kvsim::host (quest_select_pages and ctkvr_recall compose it)
    case Step::window_scores:
    case Step::topk:
    case Step::page_bound:
    case Step::page_select:
    case Step::gather_attention:
    case Step::biased_attention:
    case Step::qcivf_build:
    case Step::ctkvr_recall:
    case Step::dedup:
    case Step::ctkvr_rerank:
    case Step::chess_select:
    case Step::score_gemm:
    case Step::pca_projection:
    case Step::truncated_svd: return "kvsim::host::" + std::string(step_name(s));
    case Step::score_gemv: return "kvsim::host::exact_dots (dot), kvsim::ref::score_gemv (cosine)";
    default: return HostBackend::kernels(s);
  }
}

std::unique_ptr<Backend> make_host_optimized_backend() { return std::make_unique<HostOptimizedBackend>(); }

const Backend& host_optimized_backend() {
  static const HostOptimizedBackend b;
  return b;
}

}  // namespace kvsim::kernels
