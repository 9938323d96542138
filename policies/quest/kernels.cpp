// quest: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): the page bound per query head (opt::group_scores, the deployment's
// kernel; the replay runs the exact opt::quest_page_bound), the page select (opt::quest_select_pages,
// as the replay does) and attention over the chosen page list.
#include <cmath>

#include "policies/phase_kernels.hpp"
#include "policies/quest/params.hpp"
#include "policies/quest/policy.hpp"

namespace kvsim::policies::quest {

namespace {
double pages(const ParamValues& v, const StepShape& s) { return std::ceil(s.context() / param_table().read(v).page_size); }
}  // namespace

PhaseKernelLinks phase_kernels() {
  PhaseKernelLinks links;
  PhaseKernelLink bound;
  bound.phase = "page_bound";
  bound.kernels = "opt::group_scores (every query head's page bounds over its KV head's min and max keys, one launch)";
  bound.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase&) {
    // The deployment's kernel; the replay runs opt::quest_page_bound, the host's order repeated.
    kernel_blocks::group_scores(int(d.hq / d.hkv), int64_t(pages(v, s)), d.model->head_dim, int(d.hkv), true);
  };
  links.push_back(bound);
  PhaseKernelLink top;
  top.phase = "topk_pages";
  top.kernels = "opt::quest_select_pages (every query head in one call: opt::topk ascending + the last page)";
  top.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase&) {
    const Params p = param_table().read(v);
    const double P = pages(v, s);
    kernel_blocks::page_select(int64_t(P), int64_t(std::min(P, std::ceil(p.budget_tokens / p.page_size))), int(d.hq));
  };
  links.push_back(top);
  links.push_back(attention_link("sparse_attention", [](const ParamValues& v) { return int(param_table().read(v).page_size); }, true));
  return links;
}

}  // namespace kvsim::policies::quest
