// snapkv (SnapKV, Li et al. 2024). At prefill, per stored (layer, KV head): the last obs_window prompt
// queries of every query head of the GQA group score each earlier prompt token (softmax probability
// summed over the window, ref::obs_window_scores; summed over the group, which ranks like SnapKV's group
// mean), the scores are max-pooled with pool_kernel (ref::pool1d, stride 1, padding k/2, as the SnapKV
// repository's max_pool1d), and the top budget_tokens - obs_window tokens are kept together with the
// window itself. At decode the head attends those prompt tokens plus every generated token so far
// (SnapKV compresses the prompt once; generated tokens are appended uncompressed).
//
// The window is the trace's own prompt query rows: those at positions P - w .. P - 1 (a contiguous run
// ending at P - 1, at most obs_window long). A trace recorded with a shorter window uses what it has and
// reports it as the statistic "obs_window_rows"; the kept count stays budget_tokens.
#include <algorithm>
#include <cmath>

#include "core/parallel.hpp"

#include "policies/kernel_selector.hpp"
#include "traces/select/selector.hpp"
#include "policies/snapkv/params.hpp"
#include "policies/snapkv/policy.hpp"

namespace kvsim::policies::snapkv {
using namespace kvsim::replay;

namespace {
class SnapKvSelector final : public KernelSelector {
 public:
  explicit SnapKvSelector(const Params& p)
      : budget_(int64_t(p.budget_tokens)),
        window_(int64_t(p.obs_window)),
        pool_(int(p.pool_kernel)) {}

  void prefill(const TraceData& t) override {
    const int64_t P = t.P;
    // The window: the longest run of query rows at positions P-1, P-2, ... (at most window_).
    const auto& pos = t.source->tokens().query_positions;
    int64_t first = -1, w = 0;
    for (int64_t s = int64_t(pos.size()) - 1; s >= 0; --s) {
      if (pos[size_t(s)] >= P) continue;
      if (pos[size_t(s)] != P - 1 - w || w >= window_) break;
      first = s;
      ++w;
    }
    w_ = w;
    kept_.assign(size_t(t.layers) * t.kv_heads, {});
    const float scale = 1.0f / std::sqrt(float(t.d));
    // Every (layer, KV head) scores its own window: in parallel.
    parallel_for(t.layers * t.kv_heads, [&](int pair, int) {
        const int l = pair / t.kv_heads, h = pair % t.kv_heads;
        std::vector<float> Qw, scores, pooled;
        std::vector<int32_t>& keep = kept_[size_t(pair)];
        if (budget_ >= P) {  // everything fits
          for (int64_t i = 0; i < P; ++i) keep.push_back(int32_t(i));
          return;
        }
        if (w == 0) {  // no window in the trace: nothing to score with; keep the most recent tokens
          for (int64_t i = P - budget_; i < P; ++i) keep.push_back(int32_t(i));
          return;
        }
        const auto& grp = t.group_of[size_t(h)];
        const int G = int(grp.size());
        Qw.resize(size_t(G) * w * t.d);
        for (int j = 0; j < G; ++j)
          std::copy_n(t.q(l, grp[size_t(j)], first), size_t(w) * t.d, Qw.data() + size_t(j) * w * t.d);
        const int64_t n = P - w;
        scores.assign(size_t(n), 0.0f);
        pooled.assign(size_t(n), 0.0f);
        if (n > 0) {
          kernels().obs_window_scores({.queries = Qw.data(), .groups = G, .window = int(w), .keys = t.k(l, h),
                                       .n = P, .d = t.d, .scale = scale, .scores = scores.data()});
          for (float& x : scores) x /= float(G);  // SnapKV's group mean
          kernels().pool1d({.in = scores.data(), .n = n, .kernel = pool_, .is_max = true, .out = pooled.data()});
        }
        keep = kernels().topk({.scores = pooled.data(), .n = n, .k = std::max<int64_t>(0, budget_ - w)});
        for (int64_t i = n; i < P; ++i) keep.push_back(int32_t(i));
        std::sort(keep.begin(), keep.end());
    });
  }

  void select(const TraceData& t, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t p = t.position(s);
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].tokens = kept_[i];
      for (int64_t g = t.P; g <= p; ++g) out[i].tokens.push_back(int32_t(g));
    }
  }

  std::map<std::string, Statistic> statistics() const override {
    return {{"obs_window_rows", {double(w_), 1, "prompt query rows the observation window had in the trace"}}};
  }

 private:
  int64_t budget_, window_;
  int pool_;
  int64_t w_ = 0;
  std::vector<std::vector<int32_t>> kept_;  // [layer * kv_heads + h] kept prompt tokens, ascending
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) { return std::make_unique<SnapKvSelector>(param_table().read(p)); }

}  // namespace kvsim::policies::snapkv
