// full: the whole KV cache stays in HBM and every decode step attends densely over it. The baseline
// every selection policy is compared against.
#include "model/policy.hpp"
#include "policies/full/policy.hpp"

namespace kvsim::policies::full {

namespace {
class FullPolicy final : public Policy {
 public:
  std::string_view name() const override { return "full"; }
  std::string_view summary() const override { return "dense attention over the whole KV cache in HBM"; }
  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> none;
    return none;
  }
  const std::vector<BudgetKnob>& budget_knobs() const override {
    static const std::vector<BudgetKnob> none;  // no budget: it keeps everything
    return none;
  }
  MemoryDemand memory(const Deployment& d, const ParamValues&, double prompt, double output) const override {
    MemoryDemand m;
    m.kv_hbm_per_seq = (prompt + output) * d.kv_bytes_per_token();
    m.hbm_per_seq = m.kv_hbm_per_seq;
    return m;
  }
  void prefill(const Deployment&, const ParamValues&, double, PhaseList&) const override {}
  void decode_attention(const Deployment& d, const ParamValues&, const StepShape& s, PhaseList& out) const override {
    add_dense_attention(d, s.batch, s.context(), out);
  }
};
}  // namespace

const Policy& cost_model() {
  static const FullPolicy p;
  return p;
}

}  // namespace kvsim::policies::full
