// quest (Quest, Tang et al. 2024): the KV cache stays in HBM, paged; each page keeps the per-channel
// min and max of its (post-RoPE) keys. Each decode step, every query head bounds each page's score by
// sum_i max(q_i max_i, q_i min_i), the top budget_tokens / page_size pages are chosen (the last page
// always), and attention runs over those pages only. Baseline, no seed paper.
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/quest/params.hpp"
#include "policies/quest/policy.hpp"

namespace kvsim::policies::quest {

namespace {

class QuestPolicy final : public Policy {
 public:
  std::string_view name() const override { return "quest"; }
  std::string_view summary() const override { return "query-aware top-k pages by a min/max key bound, KV in HBM (Quest)"; }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  static double pages(const Params& p, double n) { return std::ceil(n / p.page_size); }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    MemoryDemand m;
    m.kv_hbm_per_seq = (prompt + output) * d.kv_bytes_per_token();
    // min and max key per page, per KV head and layer
    m.hbm_per_seq = m.kv_hbm_per_seq + pages(p, prompt + output) * s.L * s.hkv * 2 * s.key_row;
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    Phase b{"page_minmax", PhaseKind::build, Device::gpu, ComputeUnit::simt, {}};
    b.work.flops = s.L * s.hkv * prompt * s.hd * 2;
    b.work.hbm_bytes = s.L * s.hkv * (prompt * s.key_row + pages(p, prompt) * 2 * s.key_row);
    b.work.launches = s.L;
    out.push_back(b);
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double n = st.context(), P = pages(p, n);
    const double chosen = std::min(P, std::ceil(p.budget_tokens / p.page_size));
    // Each query head reads its KV head's min and max per page: 2 d elements, 4 d FLOPs per page.
    Phase sc = blocks::score(d, "page_bound", st.batch, s.hq, s.hkv, P, 2 * s.hd, s.bkv, s.L);
    out.push_back(sc);
    out.push_back(blocks::select("topk_pages", st.batch, s.hq, P, chosen, s.L));
    out.push_back(blocks::attention(d, "sparse_attention", st.batch, std::min(n, chosen * p.page_size),
                                    p.page_size * s.key_row, true));
  }
};
}  // namespace

const Policy& cost_model() {
  static const QuestPolicy p;
  return p;
}

}  // namespace kvsim::policies::quest
