// sentencekv (seed 001, SentenceKV: sentence-level semantic KV caching).
// Prefill (§4.1; pseudocode: App. A.2, Algorithm 1): the prompt is split into sentences at punctuation; the last obs_window
// prompt queries score every token (summed over the window and all heads); the top floor(r * tau)
// tokens over the whole prompt are kept (§A.7: global, not per sentence); per (layer, KV head,
// sentence) the mean key of its kept tokens stays on the GPU (eq. 1). Decode (§4.2): the mean query of
// the sentence being generated (eq. 2) scores every sentence vector; sentences are taken in score order
// until tau tokens, and attention runs over them plus the sinks, recent and generated tokens (eq. 3).
// Counting (§4.1: tau is "the maximum number of tokens we can keep in GPU memory during decoding"; eq. 3
// attends "only these retrieved tokens"): tau and floor(r tau) both include the always-resident sinks and
// recent prompt tokens (a = min(n_p, sinks + recent)), as the public code's
// `token_budget - recent_budget - start_budget` does. So c = min(n_p, floor(r tau)) - a kept tokens can be
// retrieved, and tau - a of them are per selection.
// Storage (`kept_kv_on`): cpu = the paper (§4.1 "offload them to CPU memory"; Algorithm 1 line 18 "Load
// keys and values of the corresponding tau tokens to GPU from CPU"): the c retrievable tokens live in
// pinned host memory and the selected ones are copied CPU -> GPU per selection. gpu = the public code:
// the kept KV stays in HBM and attention is dense over all of it with a mask (no PCIe copy, more HBM).
// Ambiguity: Algorithm 1 recomputes the mean query and reloads tau tokens every step, while §4.2's
// prose builds the query from a completed sentence. `reselect` models both: per_step (Algorithm 1)
// and per_sentence (select, and copy or mask, once per generated sentence of mean_sentence_tokens tokens,
// the selection staying in place in between).
#include "policies/blocks.hpp"
#include "model/policy.hpp"
#include "policies/sentencekv/params.hpp"
#include "policies/sentencekv/policy.hpp"

namespace kvsim::policies::sentencekv {

namespace {
double resident_tokens(const Params& p, double prompt) { return std::min(prompt, p.sinks + p.recent); }

double pool_tokens(const Params& p, double prompt) {
  return std::max(0.0, std::min(prompt, std::floor(p.keep_factor * p.token_budget)) - resident_tokens(p, prompt));
}

double retrieved_tokens(const Params& p, double prompt) {
  return std::min(std::max(0.0, p.token_budget - resident_tokens(p, prompt)), pool_tokens(p, prompt));
}

// Expected occupied sentences when c kept tokens fall uniformly over the n' = n_p - a candidate tokens,
// cut into sentences of s tokens: (n'/s) (1 - (1 - c/n')^s), the occupancy of n'/s buckets (the chance
// that none of a sentence's s tokens is kept is (1 - c/n')^s). It lies between c/s (every token kept) and
// c (one kept token per sentence).
double estimated_kept_sentences(const Params& p, double prompt) {
  const double c = pool_tokens(p, prompt), n = prompt - resident_tokens(p, prompt), s = p.mean_sentence_tokens;
  if (c <= 0 || n <= 0) return 0;
  const double f = std::min(1.0, c / n);
  return std::min(c, n / s * (1 - std::pow(1 - f, s)));
}

double kept_sentences(const Params& p, double prompt) {
  const double c = pool_tokens(p, prompt);
  if (p.kept_sentences <= 0) return estimated_kept_sentences(p, prompt);
  const double all = std::ceil(std::max(0.0, prompt - resident_tokens(p, prompt)) / p.mean_sentence_tokens);
  return std::min({p.kept_sentences, c, all});
}

enum Reselect { kPerStep = 0, kPerSentence = 1 };
enum KeptOn { kCpu = 0, kGpu = 1 };

class SentenceKvPolicy final : public Policy {
 public:
  std::string_view name() const override { return "sentencekv"; }
  std::string_view summary() const override {
    return "sentence vectors on GPU, kept tokens on CPU (or HBM, kept_kv_on=gpu); top sentences up to tau tokens per step "
           "(seed 001)";
  }
  const std::vector<ParamSpec>& params() const override { return param_table().specs(); }
  const std::vector<BudgetKnob>& budget_knobs() const override { return param_table().knobs(); }
  static bool on_gpu(const Params& p) { return int(p.kept_kv_on) == kGpu; }
  // Contiguous tokens per sentence bucket on the CPU: the retrievable kept tokens over the sentences
  // that hold them.
  static double run_tokens(const Params& p, double prompt) {
    const double S = kept_sentences(p, prompt);
    return S > 0 ? std::clamp(pool_tokens(p, prompt) / S, 1.0, std::max(1.0, p.mean_sentence_tokens)) : 1.0;
  }
  MemoryDemand memory(const Deployment& d, const ParamValues& values, double prompt, double output) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    MemoryDemand m;
    const double a = resident_tokens(p, prompt), c = pool_tokens(p, prompt);
    // cpu: sinks + recent + the staging buffer of the retrieved tokens; gpu: every kept token.
    const double gpu_tokens = (on_gpu(p) ? a + c : a + retrieved_tokens(p, prompt)) + output;
    m.kv_hbm_per_seq = gpu_tokens * d.kv_bytes_per_token();
    m.hbm_per_seq = m.kv_hbm_per_seq + kept_sentences(p, prompt) * s.L * s.hkv * s.key_row;
    m.kv_dram_per_seq = on_gpu(p) ? 0 : c * d.kv_bytes_per_token();
    m.dram_per_seq = m.kv_dram_per_seq;
    m.hbm_fixed = blocks::prompt_layer_kv(d, prompt);
    return m;
  }
  void prefill(const Deployment& d, const ParamValues& values, double prompt, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double a = resident_tokens(p, prompt), c = pool_tokens(p, prompt), S = kept_sentences(p, prompt);
    out.push_back(blocks::window_scores(d, "window_scores", prompt, std::min(prompt, p.obs_window), s.L));
    out.push_back(blocks::select("topk_tokens", 1, 1, prompt, c, s.L));
    Phase mean{"sentence_means", PhaseKind::build, Device::gpu, ComputeUnit::simt, {}};
    mean.work.flops = s.L * s.hkv * c * s.hd;
    mean.work.hbm_bytes = s.L * s.hkv * (c + S) * s.key_row;
    mean.work.launches = s.L;
    out.push_back(mean);
    if (on_gpu(p)) {
      // Compact every kept token (sinks and recent included) into the dense cache that stays in HBM.
      out.push_back(blocks::gather("pack_kept", (a + c) * s.kv_row, s.key_row, s.L));
    } else {
      // Pack the retrievable kept tokens by sentence (token-granular gather), then offload them in one copy.
      out.push_back(blocks::gather("pack_kept", c * s.kv_row, s.key_row, s.L));
      out.push_back(blocks::copy("offload", false, 1, c * s.kv_row, 0, s.L));
    }
  }
  void decode_attention(const Deployment& d, const ParamValues& values, const StepShape& st, PhaseList& out) const override {
    const Params p = param_table().read(values);
    const auto s = blocks::shape(d);
    const double B = st.batch, S = kept_sentences(p, st.prompt), a = resident_tokens(p, st.prompt);
    const double c = pool_tokens(p, st.prompt), t = retrieved_tokens(p, st.prompt);
    // per_sentence: the query of a finished sentence selects once; the selection serves its tokens.
    const double every = int(p.reselect) == kPerSentence ? 1.0 / p.mean_sentence_tokens : 1.0;
    Phase sc = blocks::score(d, "sentence_score", B, s.hq, s.hkv, S, s.hd, s.bkv, s.L);  // 0
    Phase sel = blocks::select("sentence_select", B, s.hkv, S, S, s.L);                   // 1
    std::vector<Phase> selection{sc, sel};
    if (on_gpu(p)) {
      // The public code's mask over the dense kept cache: one byte per (KV head, cached token) written.
      Phase mask = blocks::layer_phase("sentence_mask", PhaseKind::select, Device::gpu, ComputeUnit::simt, Stream::gpu, s.L);
      mask.work.hbm_bytes = s.L * B * s.hkv * (a + c + st.generated);
      mask.work.launches = s.L;
      selection.push_back(mask);  // 2
    } else {
      selection.push_back(blocks::copy("load_kv", true, B, t * s.kv_row, run_tokens(p, st.prompt) * s.key_row, s.L));  // 2
    }
    for (Phase& ph : selection) {
      Work& w = ph.work;
      w.flops *= every, w.hbm_bytes *= every, w.dram_bytes *= every, w.h2d_bytes *= every, w.launches *= every;
    }
    selection[0].work.flops += s.L * B * s.hq * s.hd * 2;  // running mean of the sentence's queries, every step
    selection[2].after = {1, -1, -1};
    for (Phase& ph : selection) out.push_back(ph);
    // gpu: dense attention over every kept token and the generated ones, masked to the selection (it
    // reads all of them and the mask). cpu: attention over the retrieved tokens + sinks + recent prompt
    // tokens + generated tokens (contiguous staging buffer), after the copy.
    const double attended = (on_gpu(p) ? a + c : a + t) + st.generated;
    Phase att = blocks::attention(d, "attention", B, attended, 0, true);
    if (on_gpu(p)) att.work.hbm_bytes += s.L * B * s.hkv * attended;
    att.after = {2, -1, -1};
    out.push_back(att);
  }
};
}  // namespace

const Policy& cost_model() {
  static const SentenceKvPolicy p;
  return p;
}

}  // namespace kvsim::policies::sentencekv
