// streaming (StreamingLLM, Xiao et al. 2024): keep the first `sinks` tokens (attention sinks) and the
// most recent `window` tokens; everything else is evicted. Each decode step attends densely over at
// most sinks + window tokens, so TPOT is flat in context. Baseline, no seed paper.
#include "model/policies/blocks.hpp"
#include "model/policy.hpp"

namespace kvsim {

namespace {
enum P { kSinks, kWindow };

class StreamingPolicy final : public Policy {
 public:
  std::string_view name() const override { return "streaming"; }
  std::string_view summary() const override { return "attention sinks + a sliding window of recent tokens (StreamingLLM)"; }
  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> p = {
        {"sinks", 4, Range::between(0, 1e7), true,
         "initial tokens always kept (StreamingLLM: 4 attention sinks)"},
        {"window", 1020, Range::between(1, 1e8), true,
         "most recent tokens kept; sinks + window = 1024, the budget the seeds compare baselines at"},
    };
    return p;
  }
  static double kept(const ParamValues& p, double tokens) { return std::min(tokens, p[kSinks] + p[kWindow]); }
  MemoryDemand memory(const Deployment& d, const ParamValues& p, double prompt, double output) const override {
    return blocks::evicted_cache(d, kept(p, prompt + output), 0, prompt);
  }
  void prefill(const Deployment& d, const ParamValues& p, double prompt, PhaseList& out) const override {
    // Eviction keeps two contiguous ranges: a compaction of the kept tokens (long runs).
    const auto s = blocks::shape(d);
    out.push_back(blocks::gather("evict_compact", kept(p, prompt) * s.kv_row, p[kWindow] * s.key_row, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& p, const StepShape& st, PhaseList& out) const override {
    out.push_back(blocks::attention(d, "attention", st.batch, kept(p, st.context()), 0, true));
  }
};
}  // namespace

const Policy& streaming_policy() {
  static const StreamingPolicy p;
  return p;
}

}  // namespace kvsim
