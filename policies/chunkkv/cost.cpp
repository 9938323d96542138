// chunkkv (seed 002, ChunkKV: semantic-preserving KV compression).
// Prefill (§3.2, Algorithms 1 and 3): the last w prompt queries score every key; scores are summed
// per chunk of c consecutive tokens (and, as in the public kvpress code, over KV heads, so one
// selection serves every head of a layer); the top floor((L_max - w) / c) chunks are kept in their
// original order plus the last w tokens. Layer-wise index reuse (§3.3, Algorithm 2): the selection is
// computed on one layer of every N_reuse and reused by the next N_reuse - 1 layers, so the scoring
// cost is divided by N_reuse (§B.1.1); every layer still compacts its own K, V. Decode attends
// densely over the compressed cache. The compaction gathers whole chunks: runs of c key rows.
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/chunkkv/params.hpp"
#include "policies/chunkkv/policy.hpp"

namespace kvsim::policies::chunkkv {

namespace {

class ChunkKvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "chunkkv"; }
  std::string_view summary() const override {
    return "prefill-time top chunks of c tokens from an observation window, layer-wise index reuse (seed 002)";
  }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  static double kept(const Params& p, double prompt) {
    const double lmax = p.budget_tokens > 0 ? p.budget_tokens : std::floor(p.budget_ratio * prompt);
    return std::min(prompt, std::max(lmax, std::min(prompt, p.obs_window)));
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    return blocks::evicted_cache(d, kept(p, prompt), output, prompt);
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double scored_layers = std::ceil(s.L / p.reuse_layers);
    out.push_back(blocks::window_scores(d, "window_scores", prompt, std::min(prompt, p.obs_window), scored_layers));
    const double chunks = std::ceil(prompt / p.chunk_size);
    Phase sel = blocks::select("chunk_topk", 1, 1, chunks, chunks, scored_layers);
    sel.work.flops += scored_layers * s.hq * prompt;  // chunk sums over the window and heads
    out.push_back(sel);
    out.push_back(blocks::gather("compact", kept(p, prompt) * s.kv_row, p.chunk_size * s.key_row, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    out.push_back(blocks::attention(d, "attention", st.batch, kept(p, st.prompt) + st.generated, 0, true));
  }
};
}  // namespace

const Policy& cost_model() {
  static const ChunkKvPolicy p;
  return p;
}

}  // namespace kvsim::policies::chunkkv
