// snapkv (SnapKV, Li et al. 2024): at prefill, the last `obs_window` prompt queries score every
// earlier token (attention summed over the window, averaged over each GQA group, smoothed by a 1-D
// pooling of `pool_kernel`); each KV head keeps its top budget_tokens - obs_window tokens plus the
// window itself. Decode attends densely over the compressed cache (plus generated tokens). The
// compaction gathers single tokens: runs of one key row.
#include "model/policies/blocks.hpp"
#include "model/policy.hpp"

namespace kvsim {

namespace {
enum P { kBudget, kWindow, kPool };

class SnapKvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "snapkv"; }
  std::string_view summary() const override { return "prefill-time top-k tokens per KV head from an observation window (SnapKV)"; }
  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> p = {
        {"budget_tokens", 1024, Range::between(1, 1e8), true,
         "tokens kept per KV head, observation window included (SentenceKV seed Table 4 compares SnapKV 1024)"},
        {"obs_window", 32, Range::between(1, 1e6), true, "prompt queries that score the rest (SnapKV default 32)"},
        {"pool_kernel", 5, Range::between(1, 1025), true, "1-D pooling kernel over the scores (SnapKV repository default 5)"},
    };
    return p;
  }
  static double kept(const ParamValues& p, double prompt) { return std::min(prompt, p[kBudget]); }
  MemoryDemand memory(const Deployment& d, const ParamValues& p, double prompt, double output) const override {
    return blocks::evicted_cache(d, kept(p, prompt), output, prompt);
  }
  void prefill(const Deployment& d, const ParamValues& p, double prompt, PhaseList& out) const override {
    const auto s = blocks::shape(d);
    out.push_back(blocks::window_scores(d, "window_scores", prompt, std::min(prompt, p[kWindow]), s.L));
    Phase pool{"pool_topk", PhaseKind::select, Device::gpu, ComputeUnit::simt, {}};
    pool.work.flops = s.L * s.hkv * prompt * (p[kPool] + s.group + 4);
    pool.work.hbm_bytes = s.L * s.hkv * prompt * 4 * 3;
    pool.work.launches = s.L * 2;
    out.push_back(pool);
    out.push_back(blocks::gather("compact", kept(p, prompt) * s.kv_row, s.key_row, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& p, const StepShape& st, PhaseList& out) const override {
    out.push_back(blocks::attention(d, "attention", st.batch, kept(p, st.prompt) + st.generated, 0, true));
  }
};
}  // namespace

const Policy& snapkv_policy() {
  static const SnapKvPolicy p;
  return p;
}

}  // namespace kvsim
