// quest: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): the page bound and the page select per query head (the kernels
// `kvsim replay --device cuda` runs: opt::quest_page_bound, opt::quest_select_pages), and attention over
// the chosen page list.
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
  bound.kernels = "opt::quest_page_bound (one launch per KV head, its group's query heads together)";
  bound.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase&) {
    const int group = int(d.hq / d.hkv);
    for (int h = 0; h < int(d.hkv); ++h) kernel_blocks::page_bound(int64_t(pages(v, s)), d.model->head_dim, group);
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
