// oracle's selector: per (layer, KV head), the budget_tokens tokens with the largest q.k summed over
// the group's query heads, in position order.
#include <algorithm>
#include <numeric>

#include "tests/example_policy/oracle/params.hpp"
#include "tests/example_policy/oracle/policy.hpp"

namespace kvsim::policies::oracle {
using namespace kvsim::replay;

namespace {
class OracleSelector final : public TraceSelector {
 public:
  explicit OracleSelector(const Params& p) : budget_(int64_t(p.budget_tokens)) {}
  void prefill(const TraceData&) override {}
  void select(const TraceData& t, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t n = t.position(s) + 1;
    for (int l = 0; l < t.layers; ++l)
      for (int h = 0; h < t.kv_heads; ++h) {
        HeadSelection& sel = out[size_t(l) * t.kv_heads + h];
        if (n <= budget_) {
          sel.all = true;
          continue;
        }
        score_.assign(size_t(n), 0.0);
        for (int qh : t.group_of[size_t(h)])
          for (int64_t i = 0; i < n; ++i)
            score_[size_t(i)] += std::inner_product(t.q(l, qh, s), t.q(l, qh, s) + t.d, t.k(l, h) + i * t.d, 0.0);
        order_.resize(size_t(n));
        std::iota(order_.begin(), order_.end(), 0);
        std::partial_sort(order_.begin(), order_.begin() + budget_, order_.end(),
                          [&](int32_t a, int32_t b) { return score_[size_t(a)] > score_[size_t(b)]; });
        sel.tokens.assign(order_.begin(), order_.begin() + budget_);
        std::sort(sel.tokens.begin(), sel.tokens.end());
      }
  }

 private:
  int64_t budget_;
  std::vector<double> score_;
  std::vector<int32_t> order_;
};
}  // namespace

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) {
  return std::make_unique<OracleSelector>(param_table().read(p));
}

bool set_budget(ParamValues& v, int64_t, int64_t budget) {
  Params p = param_table().read(v);
  p.budget_tokens = double(budget);
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::oracle
