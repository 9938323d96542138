// snapkv (SnapKV, Li et al. 2024): at prefill, the last `obs_window` prompt queries score every
// earlier token (attention summed over the window, averaged over each GQA group, smoothed by a 1-D
// pooling of `pool_kernel`); each KV head keeps its top budget_tokens - obs_window tokens plus the
// window itself. Decode attends densely over the compressed cache (plus generated tokens). The
// compaction gathers single tokens: runs of one key row.
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/snapkv/params.hpp"
#include "policies/snapkv/policy.hpp"

namespace kvsim::policies::snapkv {

namespace {

class SnapKvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "snapkv"; }
  std::string_view summary() const override { return "prefill-time top-k tokens per KV head from an observation window (SnapKV)"; }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  static double kept(const Params& p, double prompt) { return std::min(prompt, p.budget_tokens); }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    return blocks::evicted_cache(d, kept(p, prompt), output, prompt);
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    out.push_back(blocks::window_scores(d, "window_scores", prompt, std::min(prompt, p.obs_window), s.L));
    Phase pool{"pool_topk", PhaseKind::select, Device::gpu, ComputeUnit::simt, {}};
    pool.work.flops = s.L * s.hkv * prompt * (p.pool_kernel + s.group + 4);
    pool.work.hbm_bytes = s.L * s.hkv * prompt * 4 * 3;
    // One top-k call per layer over each KV head's pooled scores (the pooling kernel's own launch is
    // small beside the top-k's passes and is not counted apart).
    pool.work.launches = s.L;
    pool.rows = float(s.hkv);
    pool.row_elements = float(std::max(1.0, prompt));
    out.push_back(pool);
    out.push_back(blocks::gather("compact", kept(p, prompt) * s.kv_row, s.key_row, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    out.push_back(blocks::attention(d, "attention", st.batch, kept(p, st.prompt) + st.generated, 0, true));
  }
};
}  // namespace

const Policy& cost_model() {
  static const SnapKvPolicy p;
  return p;
}

}  // namespace kvsim::policies::snapkv
