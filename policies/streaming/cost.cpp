// streaming (StreamingLLM, Xiao et al. 2024): keep the first `sinks` tokens (attention sinks) and the
// most recent `window` tokens; everything else is evicted. Each decode step attends densely over at
// most sinks + window tokens, so TPOT is flat in context. Baseline, no seed paper.
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/streaming/params.hpp"
#include "policies/streaming/policy.hpp"

namespace kvsim::policies::streaming {

namespace {

class StreamingPolicy final : public Policy {
 public:
  std::string_view name() const override { return "streaming"; }
  std::string_view summary() const override { return "attention sinks + a sliding window of recent tokens (StreamingLLM)"; }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  static double kept(const Params& p, double tokens) { return std::min(tokens, p.sinks + p.window); }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    return blocks::evicted_cache(d, kept(p, prompt + output), 0, prompt);
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    // Eviction keeps two contiguous ranges: a compaction of the kept tokens (long runs).
    const auto s = blocks::shape(d);
    out.push_back(blocks::gather("evict_compact", kept(p, prompt) * s.kv_row, p.window * s.key_row, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    out.push_back(blocks::attention(d, "attention", st.batch, kept(p, st.context()), 0, true));
  }
};
}  // namespace

const Policy& cost_model() {
  static const StreamingPolicy p;
  return p;
}

}  // namespace kvsim::policies::streaming
