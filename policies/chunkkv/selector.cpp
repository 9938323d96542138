// chunkkv selector (seed 002, ChunkKV: semantic-preserving KV cache compression).
//
// Prefill (§3.2, Algorithm 1 and the implementation Algorithm in §B "Implementation Details"):
//   * the observation window = the last w prompt queries (w = obs_window, capped by the query rows the
//     trace holds at positions P-w .. P-1); they score every prompt key before the window
//     (ref::obs_window_scores: softmax probabilities summed over the window's queries and over the
//     query heads of the KV head's GQA group);
//   * chunk score = sum of token scores over a chunk of c = chunk_size consecutive tokens
//     (ref::chunk_sum); chunks tile the prefix [0, P - w) (the last one may be partial);
//   * keep the top k = min(floor((L_max - w) / c), #chunks) chunks (ref::topk, original order restored)
//     plus the last w prompt tokens (the window is always kept, Algorithm 1's concatenation);
//     L_max = budget_tokens, or floor(budget_ratio * P) when budget_tokens is 0, clamped to [w, P]
//     as the cost model's kept() does.
//   * Heads: Algorithm 1 is written for one (Q, K) pair and Appendix "index reuse similarity" saves
//     "the indices of the first head", i.e. the seed selects per head. With GQA, one KV head is stored
//     once, so the selection is per (layer, KV head), scored by its group's query heads summed (the
//     kvpress code instead sums over all KV heads so one selection serves the layer; not the seed).
//   * Layer-wise index reuse (§3.3, Algorithm 2): layer l computes its own selection when
//     l mod N_reuse == 0 and otherwise reuses the selection of layer floor(l / N_reuse) * N_reuse.
//     A trace stores a subset of layers, so l here is the STORED layer slot: consecutive stored slots
//     share a selection (with all layers stored this is exactly Algorithm 2).
// Decode: dense attention over the compressed cache = the kept prompt tokens + every generated token.
//
// Statistics: "adjacent_layer_jaccard" (Jaccard similarity of the kept prompt indices of adjacent
// stored layer slots, each computed independently, i.e. without reuse; mean over slot pairs and KV
// heads: the paper's Table "Retained KV Cache Indices Similarity of Adjacent Layers"),
// "kept_fraction" (kept prompt tokens / P), "kept_tokens", "selected_fraction" (attended / (p+1)).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "policies/kernel_selector.hpp"
#include "traces/select/selector.hpp"
#include "policies/chunkkv/params.hpp"
#include "policies/chunkkv/policy.hpp"

namespace kvsim::policies::chunkkv {
using namespace kvsim::replay;

namespace {

class ChunkKvSelector final : public KernelSelector {
 public:
  explicit ChunkKvSelector(const ParamValues& values) {
    const Params p = param_table().read(values);
    chunk_ = std::max(1, int(p.chunk_size));
    ratio_ = p.budget_ratio;
    budget_ = int64_t(p.budget_tokens);
    window_ = std::max<int64_t>(1, int64_t(p.obs_window));
    reuse_ = std::max(1, int(p.reuse_layers));
  }

  void prefill(const TraceData& tr) override {
    const int64_t P = tr.P;
    sel_sum_ = 0, sel_n_ = 0;  // a new trace: statistics start over
    const auto& pos = tr.source->tokens().query_positions;
    // The observation window: the longest run of query rows at positions P-w' .. P-1, w' <= obs_window.
    const auto it = std::lower_bound(pos.begin(), pos.end(), P);
    int64_t last = int64_t(it - pos.begin()) - 1;  // row of the last prompt query
    int64_t w = 0;
    while (last - w >= 0 && w < window_ && pos[size_t(last - w)] == P - 1 - w) ++w;
    if (w == 0) throw std::runtime_error("chunkkv selector: the trace has no query at the last prompt position");
    w_ = w;
    const int64_t s0 = last - w + 1;
    const int64_t lmax_raw = budget_ > 0 ? budget_ : int64_t(std::floor(ratio_ * double(P)));
    lmax_ = std::min(P, std::max(lmax_raw, w));
    const int64_t prefix = P - w;
    const int64_t C = (prefix + chunk_ - 1) / chunk_;
    k_ = std::min<int64_t>((lmax_ - w) / chunk_, C);

    const int L = tr.layers, H = tr.kv_heads, d = tr.d;
    independent_.assign(size_t(L) * H, {});
    std::vector<float> Qw, scores(static_cast<size_t>(prefix)), chunks(static_cast<size_t>(C));
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const auto& group = tr.group_of[size_t(h)];
        std::vector<int32_t> kept;
        if (prefix > 0) {
          const int G = int(group.size());
          std::fill(scores.begin(), scores.end(), 0.f);
          if (G > 0) {
            Qw.resize(size_t(G) * w * d);
            for (int g = 0; g < G; ++g)
              std::copy_n(tr.q(l, group[size_t(g)], s0), size_t(w) * d, Qw.data() + size_t(g) * w * d);
            std::vector<float> full(static_cast<size_t>(P));
            kernels().obs_window_scores({.queries = Qw.data(), .groups = G, .window = int(w), .keys = tr.k(l, h),
                                         .n = P, .d = d, .scale = 1.f / std::sqrt(float(d)), .scores = full.data()});
            std::copy_n(full.data(), prefix, scores.data());
          }
          kernels().chunk_sum({.scores = scores.data(), .n = prefix, .chunk = chunk_, .out = chunks.data()});
          for (int32_t c : kernels().topk({.scores = chunks.data(), .n = C, .k = k_}))
            for (int64_t t = int64_t(c) * chunk_; t < std::min<int64_t>(prefix, (int64_t(c) + 1) * chunk_); ++t)
              kept.push_back(int32_t(t));
        }
        for (int64_t t = prefix; t < P; ++t) kept.push_back(int32_t(t));
        std::sort(kept.begin(), kept.end());
        independent_[size_t(l) * H + h] = std::move(kept);
      }
    // Layer-wise index reuse over stored slots (Algorithm 2).
    kept_.assign(size_t(L) * H, {});
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) kept_[size_t(l) * H + h] = independent_[size_t((l / reuse_) * reuse_) * H + h];

    // Statistics measured at prefill.
    double jac = 0, kept_sum = 0;
    int64_t pairs = 0;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        kept_sum += double(kept_[size_t(l) * H + h].size());
        if (l + 1 < L) {
          jac += jaccard(independent_[size_t(l) * H + h], independent_[size_t(l + 1) * H + h]);
          ++pairs;
        }
      }
    jaccard_ = pairs ? jac / double(pairs) : 0;
    jaccard_pairs_ = pairs;
    kept_mean_ = (L > 0 && H > 0) ? kept_sum / double(L * H) : 0;
    heads_ = int64_t(L) * H;
    P_ = P;
  }

  void select(const TraceData& tr, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t p = tr.position(s);
    for (size_t i = 0; i < out.size() && i < kept_.size(); ++i) {
      auto& t = out[i].tokens;
      t = kept_[i];
      for (int64_t g = tr.P; g <= p; ++g) t.push_back(int32_t(g));
      sel_sum_ += double(t.size()) / double(p + 1);
      ++sel_n_;
    }
  }

  std::map<std::string, Statistic> statistics() const override {
    std::map<std::string, Statistic> m;
    m["adjacent_layer_jaccard"] = {jaccard_, jaccard_pairs_,
                                   "Jaccard similarity of the kept prompt indices of adjacent stored layer slots, "
                                   "each selected independently (no reuse); mean over slot pairs and KV heads"};
    m["kept_tokens"] = {kept_mean_, heads_, "prompt tokens kept per (layer, KV head): top chunks + window"};
    m["kept_fraction"] = {P_ ? kept_mean_ / double(P_) : 0, heads_, "kept prompt tokens / P"};
    m["selected_fraction"] = {sel_n_ ? sel_sum_ / double(sel_n_) : 0, sel_n_,
                              "attended tokens / (p + 1) per decode step, layer and KV head"};
    m[param_table().name(&Params::obs_window)] = {
        double(w_), 1, "observation window used (obs_window capped by the trace's prompt queries)"};
    return m;
  }

 private:
  static double jaccard(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    std::vector<int32_t> i;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(i));
    const double u = double(a.size() + b.size() - i.size());
    return u > 0 ? double(i.size()) / u : 1.0;
  }

  int chunk_ = 10, reuse_ = 2;
  double ratio_ = 0.1;
  int64_t budget_ = 0, window_ = 32, w_ = 0, lmax_ = 0, k_ = 0, P_ = 0;
  std::vector<std::vector<int32_t>> independent_, kept_;  // [l * H + h] sorted prompt tokens
  double jaccard_ = 0, kept_mean_ = 0, sel_sum_ = 0;
  int64_t jaccard_pairs_ = 0, heads_ = 0, sel_n_ = 0;
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) {
  return std::make_unique<ChunkKvSelector>(p);
}

}  // namespace kvsim::policies::chunkkv
