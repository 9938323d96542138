// chess: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): the anchor's score GEMV over the grid, chunk and page vectors and the
// hierarchical select (opt::chess_select), and zero-copy paged attention over the selected page list.
// The selection runs once every reselect_pages pages, which the model amortizes per step.
#include <cmath>

#include "policies/chess/params.hpp"
#include "policies/chess/policy.hpp"
#include "policies/phase_kernels.hpp"

namespace kvsim::policies::chess {

namespace {
void select(const Deployment& d, const ParamValues& v, const StepShape& s) {
  const Params p = param_table().read(v);
  // The vectors span every layer and KV head (the selection is shared by all layers).
  const int dim = int(d.model->layers * d.hkv_cached * d.model->head_dim);
  kernel_blocks::hierarchical_select(int64_t(std::ceil(s.context() / p.page_size)), int(p.chunk_pages),
                                     int(p.grid_chunks), dim, p.rho_grid, p.rho_chunk, p.rho_page);
}
double runs_per_step(const ParamValues& v) {
  const Params p = param_table().read(v);
  return 1.0 / (p.reselect_pages * p.page_size);
}
}  // namespace

PhaseKernelLinks phase_kernels() {
  PhaseKernelLinks links;
  PhaseKernelLink unc;
  unc.phase = "uncertainty";
  unc.kernels = "opt::uncertainty (entropy and varentropy of the logits: slice states, then a warp per row)";
  unc.run = [](const Deployment& d, const ParamValues&, const StepShape& s, const Phase&) {
    kernel_blocks::uncertainty(d.model->vocab, int(s.batch));
  };
  links.push_back(unc);
  PhaseKernelLink gemv;
  gemv.phase = "select_gemv";
  gemv.kernels = "opt::chess_select: the summary score GEMV";
  gemv.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase&) { select(d, v, s); };
  gemv.launches = {"summary_scores_kernel"};
  gemv.runs_per_step = runs_per_step;
  links.push_back(gemv);
  PhaseKernelLink mask = gemv;
  mask.phase = "hier_mask";
  mask.kernels = "opt::chess_select: the three levels' selection";
  mask.launches = {"chess_levels_kernel"};
  links.push_back(mask);
  PhaseKernelLink pv;
  pv.phase = "page_vector";
  pv.kernels = "ref::segment_weighted_mean (the filled page's mean key over every layer and KV head)";
  pv.run = [](const Deployment& d, const ParamValues& v, const StepShape&, const Phase&) {
    const int dim = int(d.model->layers * d.hkv_cached * d.model->head_dim);
    kernel_blocks::segment_means(1, int(param_table().read(v).page_size), dim);
  };
  pv.runs_per_step = [](const ParamValues& v) { return 1.0 / param_table().read(v).page_size; };  // one page per page_size steps
  links.push_back(pv);
  links.push_back(attention_link("paged_attention", [](const ParamValues& v) { return int(param_table().read(v).page_size); }, true));
  return links;
}

}  // namespace kvsim::policies::chess
