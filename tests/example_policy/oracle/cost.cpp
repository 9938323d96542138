// oracle's cost model: the whole cache stays in HBM; each step scores every cached key (one GEMV per
// KV head) and attends the top budget_tokens of them.
#include <algorithm>

#include "policies/blocks.hpp"
#include "tests/example_policy/oracle/params.hpp"
#include "tests/example_policy/oracle/policy.hpp"

namespace kvsim::policies::oracle {

namespace {
class OraclePolicy final : public Policy {
 public:
  std::string_view name() const override { return "oracle"; }
  std::string_view summary() const override { return "test-only: the exact top-k tokens by q.k every step"; }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  MemoryDemand memory(const Deployment& d, const ParamValues&, double prompt, double output) const override {
    MemoryDemand m;
    m.kv_hbm_per_seq = (prompt + output) * d.kv_bytes_per_token();
    m.hbm_per_seq = m.kv_hbm_per_seq;
    return m;
  }
  void prefill(const Deployment&, const ParamValues&, double, PhaseList&) const override {}
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st,
                        PhaseList& out) const override {
    const Params p = param_table().read(values);
    const double n = st.context();
    const auto s = blocks::shape(d);
    // every query head against every key of its KV head: the keys are read once per KV head
    out.push_back(blocks::score(d, "score_all", st.batch, s.hq, s.hkv, n, s.hd, s.bkv, s.L));
    out.push_back(blocks::attention(d, "attention", st.batch, std::min(n, p.budget_tokens), 0, true));
  }
};
}  // namespace

const Policy& cost_model() {
  static const OraclePolicy p;
  return p;
}

}  // namespace kvsim::policies::oracle
