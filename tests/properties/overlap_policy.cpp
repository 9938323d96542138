#include "tests/properties/overlap_policy.hpp"

#include <algorithm>

#include "model/param_table.hpp"
#include "policies/blocks.hpp"

namespace kvsim::props::overlap {
using namespace kvsim::replay;

namespace {
struct Params {
  double stride, sinks, window;
};

const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"overlap", {
      {&Params::stride, {"stride", 7, Range::between(1, 1e6), true, "every stride-th token is selected (test policy)"}},
      {&Params::sinks, {"sinks", 4, Range::between(0, 1e6), true, "first tokens added as extra entries"}},
      {&Params::window, {"window", 16, Range::between(0, 1e6), true, "last tokens added as extra entries"}},
  }};
  return table;
}

class OverlapPolicy final : public Policy {
 public:
  std::string_view name() const override { return "overlap"; }
  std::string_view summary() const override { return "test-only: a strided selection with sink and window extras over it"; }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  MemoryDemand memory(const Deployment& d, const ParamValues&, double prompt, double output) const override {
    MemoryDemand m;
    m.kv_hbm_per_seq = m.hbm_per_seq = (prompt + output) * d.kv_bytes_per_token();
    return m;
  }
  void prefill(const Deployment&, const ParamValues&, double, PhaseList&) const override {}
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st,
                        PhaseList& out) const override {
    const Params p = param_table().read(values);
    const double n = st.context();
    out.push_back(blocks::attention(d, "attention", st.batch, std::min(n, n / p.stride + p.sinks + p.window), 0, true));
  }
};

class OverlapSelector final : public TraceSelector {
 public:
  explicit OverlapSelector(const Params& p)
      : stride_(int64_t(p.stride)), sinks_(int64_t(p.sinks)), window_(int64_t(p.window)) {}
  void prefill(const TraceData&) override {}
  void select(const TraceData& t, int64_t s, std::vector<HeadSelection>& out) override {
    const int64_t n = t.position(s) + 1;
    for (int l = 0; l < t.layers; ++l)
      for (int h = 0; h < t.kv_heads; ++h) {
        HeadSelection& sel = out[size_t(l) * t.kv_heads + h];
        for (int64_t i = 0; i < n; i += stride_) sel.tokens.push_back(int32_t(i));
        auto extra = [&](int64_t i) {
          sel.extra_tokens.push_back(int32_t(i));
          sel.extra_k.insert(sel.extra_k.end(), t.k(l, h) + i * t.d, t.k(l, h) + (i + 1) * t.d);
          sel.extra_v.insert(sel.extra_v.end(), t.v(l, h) + i * t.d, t.v(l, h) + (i + 1) * t.d);
          sel.extra_bias.push_back(0.f);
        };
        for (int64_t i = 0; i < std::min(sinks_, n); ++i) extra(i);
        for (int64_t i = std::max(sinks_, n - window_); i < n; ++i) extra(i);
      }
  }

 private:
  int64_t stride_, sinks_, window_;
};
}  // namespace

const Policy& cost_model() {
  static const OverlapPolicy p;
  return p;
}

std::unique_ptr<TraceSelector> make_selector(const ParamValues& p) {
  return std::make_unique<OverlapSelector>(param_table().read(p));
}

}  // namespace kvsim::props::overlap
