// sentencekv: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): the query against the kept sentences' mean keys (the reference score
// GEMM twin, one call per KV head for its query group), the top sentences (opt::topk), and attention.
// The sentence count is read back from the score phase's FLOPs (the inverse of blocks::score).
#include <cmath>

#include "policies/phase_kernels.hpp"
#include "policies/sentencekv/params.hpp"
#include "policies/sentencekv/policy.hpp"

namespace kvsim::policies::sentencekv {

namespace {
double runs_per_step(const ParamValues& v) {
  const Params p = param_table().read(v);
  return int(p.reselect) == 1 ? 1.0 / p.mean_sentence_tokens : 1.0;  // per_sentence: once per sentence
}
}  // namespace

PhaseKernelLinks phase_kernels() {
  PhaseKernelLinks links;
  PhaseKernelLink score;
  score.phase = "sentence_score";
  score.kernels = "opt::group_scores (every query head against its KV head's mean keys, every KV head in one launch)";
  score.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase& model) {
    const double S = scored_vectors(d, s, model, d.hq, d.model->head_dim) / runs_per_step(v);
    kernel_blocks::group_scores(int(d.hq / d.hkv_cached), int64_t(std::llround(S)), d.model->head_dim,
                                int(d.hkv_cached), false);
  };
  score.runs_per_step = runs_per_step;
  links.push_back(score);
  PhaseKernelLink top;
  top.phase = "sentence_select";
  top.kernels = "opt::topk (one row per KV head)";
  top.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase& model) {
    // blocks::select counts 4 FLOPs per element per group.
    const double S = model.work.flops / (double(d.model->layers) * s.batch * d.hkv_cached * 4) / runs_per_step(v);
    kernel_blocks::topk(int(d.hkv_cached), int64_t(std::llround(S)), int64_t(std::llround(S)));
  };
  top.runs_per_step = runs_per_step;
  links.push_back(top);
  links.push_back(copy_link("load_kv", runs_per_step));
  links.push_back(attention_link("attention", nullptr, false));
  return links;
}

}  // namespace kvsim::policies::sentencekv
