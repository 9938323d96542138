// quest (Quest, Tang et al. 2024). The cache is paged (page_size tokens); each page keeps the
// per-channel min and max of its post-RoPE keys (ref::quest_page_minmax). At decode row p, every query
// head of the GQA group bounds each page by Σ_i max(q_i·max_i, q_i·min_i) (ref::quest_page_bound); the
// KV head's page score is the max of its query heads' bounds (one page list per KV head, as a sparse
// paged kernel reads it; the max keeps Quest's upper-bound property for every head of the group); the
// top ceil(budget_tokens / page_size) pages are attended, the last (current) page always
// (ref::quest_select_pages), clipped to tokens 0..p.
//
// Pages of generated tokens join as they fill: the min/max of complete pages is computed once over the
// whole trace at prefill (a complete page only holds tokens <= p, so the values are the ones Quest has at
// step p), and the partial last page's min/max is recomputed from its tokens 0..p at every step.
#include <algorithm>
#include <cmath>

#include "policies/kernel_selector.hpp"
#include "traces/select/selector.hpp"
#include "policies/quest/params.hpp"
#include "policies/quest/policy.hpp"

namespace kvsim::policies::quest {
using namespace kvsim::replay;

namespace {
class QuestSelector final : public KernelSelector {
 public:
  explicit QuestSelector(const Params& p)
      : page_(int(p.page_size)), budget_(int64_t(p.budget_tokens)) {}

  void prefill(const TraceData& t) override {
    const int64_t pages = (t.T + page_ - 1) / page_;
    minmax_.assign(size_t(t.layers) * t.kv_heads, {});
    for (int l = 0; l < t.layers; ++l)
      for (int h = 0; h < t.kv_heads; ++h) {
        auto& mm = minmax_[size_t(l) * t.kv_heads + h];
        mm.resize(size_t(2 * pages) * t.d);
        kernels().quest_page_minmax({.keys = t.k(l, h), .n = t.T, .d = t.d, .page_size = page_, .kmin = mm.data(),
                                     .kmax = mm.data() + size_t(pages) * t.d});
      }
  }

  void select(const TraceData& t, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t p = t.position(s), n = p + 1;
    const int64_t pages = (n + page_ - 1) / page_, all_pages = (t.T + page_ - 1) / page_;
    const int64_t k = std::min<int64_t>(pages, (budget_ + page_ - 1) / page_);
    const int64_t last = pages - 1, last_len = n - last * page_;
    ++steps_;
    for (int l = 0; l < t.layers; ++l) {
      if (k >= pages) {
        for (int h = 0; h < t.kv_heads; ++h)
          for (int64_t i = 0; i < n; ++i) out[size_t(l) * t.kv_heads + h].tokens.push_back(int32_t(i));
        continue;
      }
      // Every KV head's bound row, then one select call for the layer (rows = KV heads: one launch
      // sequence for all of them on a GPU, where a call per head paid its launches per head).
      score_.resize(size_t(t.kv_heads) * size_t(pages));
      for (int h = 0; h < t.kv_heads; ++h) {
        const auto& mm = minmax_[size_t(l) * t.kv_heads + h];
        kmin_.assign(mm.begin(), mm.begin() + pages * t.d);
        kmax_.assign(mm.begin() + all_pages * t.d, mm.begin() + (all_pages + pages) * t.d);
        // The partial last page: min/max of the tokens that exist at step p.
        kernels().quest_page_minmax({.keys = t.k(l, h) + last * page_ * t.d, .n = last_len, .d = t.d,
                                     .page_size = page_, .kmin = kmin_.data() + last * t.d,
                                     .kmax = kmax_.data() + last * t.d});
        // The group's queries side by side: one bound call per KV head, each page's min/max read once.
        const auto& group = t.group_of[size_t(h)];
        qg_.resize(group.size() * size_t(t.d));
        for (size_t g = 0; g < group.size(); ++g) std::copy_n(t.q(l, group[g], s), t.d, qg_.begin() + long(g * size_t(t.d)));
        kernels().quest_page_bound({.q = qg_.data(), .kmin = kmin_.data(), .kmax = kmax_.data(), .pages = pages,
                                    .d = t.d, .heads = int(group.size()), .bound = score_.data() + h * pages});
      }
      const std::vector<int32_t> chosen =
          kernels().quest_select_pages({.bound = score_.data(), .pages = pages, .k = k, .rows = t.kv_heads});
      const size_t per = chosen.size() / size_t(t.kv_heads);  // min(k, pages) = k here
      for (int h = 0; h < t.kv_heads; ++h) {
        HeadSelection& sel = out[size_t(l) * t.kv_heads + h];
        for (size_t j = size_t(h) * per; j < size_t(h + 1) * per; ++j) {
          const int64_t a = int64_t(chosen[j]) * page_, b = std::min<int64_t>(n, a + page_);
          for (int64_t i = a; i < b; ++i) sel.tokens.push_back(int32_t(i));
        }
        pages_chosen_ += double(per);
        ++heads_;
      }
    }
  }

  std::map<std::string, Statistic> statistics() const override {
    if (heads_ == 0) return {};
    return {{"pages_selected", {pages_chosen_ / double(heads_), heads_, "pages attended per (layer, KV head) and step"}}};
  }

 private:
  int page_;
  int64_t budget_;
  std::vector<std::vector<float>> minmax_;  // [layer * kv_heads + h]: kmin [pages, d] then kmax [pages, d]
  std::vector<float> kmin_, kmax_, qg_, score_;
  double pages_chosen_ = 0;
  int64_t heads_ = 0, steps_ = 0;
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) { return std::make_unique<QuestSelector>(param_table().read(p)); }

}  // namespace kvsim::policies::quest
