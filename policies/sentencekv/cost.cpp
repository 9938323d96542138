// sentencekv (seed 001, SentenceKV: sentence-level semantic KV caching).
// Prefill (§4.1; pseudocode: App. A.2, Algorithm 1): the prompt is split into sentences at punctuation; the last obs_window
// prompt queries score every token (summed over the window and all heads); the top floor(r * tau)
// tokens over the whole prompt are kept (§A.7: global, not per sentence) and offloaded to pinned CPU
// memory grouped by sentence; per (layer, KV head, sentence) the mean key of its kept tokens stays
// on the GPU (eq. 1). Decode (§4.2): the mean query of the sentence being generated (eq. 2) scores
// every sentence vector; sentences are taken in score order until tau tokens; their K, V are copied
// CPU -> GPU and attention runs over them plus the sinks and recent tokens (eq. 3).
// Ambiguity: Algorithm 1 recomputes the mean query and reloads tau tokens every step, while §4.2's
// prose builds the query from a completed sentence. `reselect` models both: per_step (Algorithm 1)
// and per_sentence (select and copy once per generated sentence of mean_sentence_tokens tokens,
// the tau tokens staying in HBM in between).
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/sentencekv/params.hpp"
#include "policies/sentencekv/policy.hpp"

namespace kvsim::policies::sentencekv {

namespace {
enum Reselect { kPerStep = 0, kPerSentence = 1 };

class SentenceKvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "sentencekv"; }
  std::string_view summary() const override {
    return "sentence vectors on GPU, kept tokens on CPU; top sentences up to tau tokens copied per step (seed 001)";
  }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  static double kept(const Params& p, double prompt) { return std::min(prompt, std::floor(p.keep_factor * p.token_budget)); }
  // Sentences that keep at least one token (each has a vector): at most one per kept token.
  static double sentences(const Params& p, double prompt) {
    return std::min(std::ceil(prompt / p.mean_sentence_tokens), kept(p, prompt));
  }
  // Contiguous tokens per sentence bucket on the CPU: kept tokens spread over the prompt's sentences.
  static double run_tokens(const Params& p, double prompt) {
    return std::clamp(kept(p, prompt) * p.mean_sentence_tokens / std::max(prompt, 1.0), 1.0, p.mean_sentence_tokens);
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    MemoryDemand m;
    const double gpu_tokens = std::min(prompt, p.sinks + p.recent + p.token_budget) + output;
    m.kv_hbm_per_seq = gpu_tokens * d.kv_bytes_per_token();
    m.hbm_per_seq = m.kv_hbm_per_seq + sentences(p, prompt) * s.L * s.hkv * s.key_row;
    m.kv_dram_per_seq = kept(p, prompt) * d.kv_bytes_per_token();
    m.dram_per_seq = m.kv_dram_per_seq;
    m.hbm_fixed = blocks::prompt_layer_kv(d, prompt);
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double k = kept(p, prompt);
    out.push_back(blocks::window_scores(d, "window_scores", prompt, std::min(prompt, p.obs_window), s.L));
    out.push_back(blocks::select("topk_tokens", 1, 1, prompt, k, s.L));
    Phase mean{"sentence_means", PhaseKind::build, Device::gpu, ComputeUnit::simt, {}};
    mean.work.flops = s.L * s.hkv * k * s.hd;
    mean.work.hbm_bytes = s.L * s.hkv * (k + sentences(p, prompt)) * s.key_row;
    mean.work.launches = s.L;
    out.push_back(mean);
    // Pack the kept tokens by sentence (token-granular gather), then offload them in one copy.
    out.push_back(blocks::gather("pack_kept", k * s.kv_row, s.key_row, s.L));
    out.push_back(blocks::copy("offload", false, 1, k * s.kv_row, 0, s.L));
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double B = st.batch, S = sentences(p, st.prompt), tau = std::min(p.token_budget, kept(p, st.prompt));
    // per_sentence: the query of a finished sentence selects once; the selection serves its tokens.
    const double every = int(p.reselect) == kPerSentence ? 1.0 / p.mean_sentence_tokens : 1.0;
    Phase sc = blocks::score(d, "sentence_score", B, s.hq, s.hkv, S, s.hd, s.bkv, s.L);  // 0
    Phase sel = blocks::select("sentence_select", B, s.hkv, S, S, s.L);                   // 1
    Phase cp = blocks::copy("load_kv", true, B, tau * s.kv_row, run_tokens(p, st.prompt) * s.key_row, s.L);  // 2
    for (Phase* ph : {&sc, &sel, &cp}) {
      Work& w = ph->work;
      w.flops *= every, w.hbm_bytes *= every, w.dram_bytes *= every, w.h2d_bytes *= every, w.launches *= every;
    }
    sc.work.flops += s.L * B * s.hq * s.hd * 2;  // running mean of the sentence's queries, every step
    out.push_back(sc);
    out.push_back(sel);
    cp.after = {1, -1, -1};
    out.push_back(cp);
    // Attention over tau loaded tokens + sinks + recent prompt tokens + generated tokens (contiguous
    // staging buffer), after the copy.
    Phase a = blocks::attention(d, "attention", B, tau + std::min(st.prompt, p.sinks + p.recent) + st.generated,
                                0, true);
    a.after = {2, -1, -1};
    out.push_back(a);
  }
};
}  // namespace

const Policy& cost_model() {
  static const SentenceKvPolicy p;
  return p;
}

}  // namespace kvsim::policies::sentencekv
