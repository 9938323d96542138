// chunkkv (seed 002, ChunkKV: semantic-preserving KV compression).
// Prefill (§3.2, Algorithms 1 and 3): the last w prompt queries score every key; scores are summed
// per chunk of c consecutive tokens (and, as in the public kvpress code, over KV heads, so one
// selection serves every head of a layer); the top floor((L_max - w) / c) chunks are kept in their
// original order plus the last w tokens. Layer-wise index reuse (§3.3, Algorithm 2): the selection is
// computed on one layer of every N_reuse and reused by the next N_reuse - 1 layers, so the scoring
// cost is divided by N_reuse (§B.1.1); every layer still compacts its own K, V. Decode attends
// densely over the compressed cache. The compaction gathers whole chunks: runs of c key rows.
#include "model/policies/blocks.hpp"
#include "model/policy.hpp"

namespace kvsim {

namespace {
enum P { kChunk, kRatio, kBudget, kWindow, kReuse };

class ChunkKvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "chunkkv"; }
  std::string_view summary() const override {
    return "prefill-time top chunks of c tokens from an observation window, layer-wise index reuse (seed 002)";
  }
  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> p = {
        {"chunk_size", 10, Range::between(1, 1e6), true, "c: tokens per chunk (§4.4: 10 'as a robust default')"},
        {"budget_ratio", 0.1, Range{0, 1, true}, false,
         "L_max as a fraction of the prompt when budget_tokens is 0 (§4.2: 10% compression ratio in the main results)"},
        {"budget_tokens", 0, Range::between(0, 1e8), true, "L_max in tokens; 0 = use budget_ratio"},
        {"obs_window", 32, Range::between(1, 1e6), true, "w: observation window (§3.2: 'usually set to {4, 8, 16, 32}')"},
        {"reuse_layers", 2, Range::between(1, 1024), true, "N_reuse: layers sharing one selection (§4.3: reuse layer 2)"},
    };
    return p;
  }
  static double kept(const ParamValues& p, double prompt) {
    const double lmax = p[kBudget] > 0 ? p[kBudget] : std::floor(p[kRatio] * prompt);
    return std::min(prompt, std::max(lmax, std::min(prompt, p[kWindow])));
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& p, double prompt, double output) const override {
    return blocks::evicted_cache(d, kept(p, prompt), output, prompt);
  }
  void prefill(const Deployment& d, const ParamValues& p, double prompt, PhaseList& out) const override {
    const auto s = blocks::shape(d);
    const double scored_layers = std::ceil(s.L / p[kReuse]);
    out.push_back(blocks::window_scores(d, "window_scores", prompt, std::min(prompt, p[kWindow]), scored_layers));
    const double chunks = std::ceil(prompt / p[kChunk]);
    Phase sel = blocks::select("chunk_topk", 1, 1, chunks, chunks, scored_layers);
    sel.work.flops += scored_layers * s.hq * prompt;  // chunk sums over the window and heads
    out.push_back(sel);
    out.push_back(blocks::gather("compact", kept(p, prompt) * s.kv_row, p[kChunk] * s.key_row, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& p, const StepShape& st, PhaseList& out) const override {
    out.push_back(blocks::attention(d, "attention", st.batch, kept(p, st.prompt) + st.generated, 0, true));
  }
};
}  // namespace

const Policy& chunkkv_policy() {
  static const ChunkKvPolicy p;
  return p;
}

}  // namespace kvsim
