// Model in the loop: the trace's text decoded by the real model (a GGUF llama, traces/llm/llama.hpp)
// with each policy's attention, compared with the same model under full attention. The trace's tokens
// are teacher-forced: the prompt is prefilled once (full attention, as every policy builds its state
// after prefill), then each generated token is fed in turn to a full-attention session and to one
// session per policy whose AttentionSelector returns the policy's token set per (layer, KV head),
// chosen by the policy's TraceSelector on the trace's recorded q/k (so the trace must come from this
// model and these tokens, e.g. traces/llm/capture.hpp). Layers or KV heads the trace does not store
// attend fully. Mixed-resolution entries cannot be injected into the decoder: tokens represented at
// full resolution (extra_tokens) are attended exactly; coarse summaries are left out.
//
// Metrics per step p (the token at p is fed; the logits predict token p + 1):
//   next-token agreement  argmax(logits_policy) == argmax(logits_full)
//   NLL change            NLL_policy(token p+1) − NLL_full(token p+1), NLL = logsumexp(logits) − logit
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "traces/llm/llama.hpp"
#include "replay/replay.hpp"

namespace kvsim::replay {

struct ModelLoopResult {
  std::string label;
  int64_t steps = 0;
  double agreement = 0;    // fraction of steps whose argmax equals full attention's
  double nll_full = 0;     // mean NLL of the trace's next token under full attention
  double nll_policy = 0;   // the same under the policy
  double nll_change = 0;   // nll_policy - nll_full (mean of per-step differences)
  // Step index (0 = the first generated token fed) of the first step whose argmax differs from full
  // attention's; -1 when every step agrees. Greedy decoding with the policy reproduces full attention's
  // text exactly up to that step: what needle retrieval checks (kvsim replay --answer).
  int64_t first_disagreement = -1;
};

// Checks that the model matches the trace (layers, heads, KV heads, head_dim, vocabulary); throws
// InputError naming `gguf_path` and the field otherwise. max_steps 0 = every generated token that has
// a successor in the trace.
std::vector<ModelLoopResult> run_model_in_the_loop(const llm::LlamaModel& model, const std::string& gguf_path,
                                                   const TraceData& t, const std::vector<PolicyRun>& runs,
                                                   int64_t max_steps = 0, int threads = 1,
                                                   const std::function<void(double)>& progress = {});

}  // namespace kvsim::replay
