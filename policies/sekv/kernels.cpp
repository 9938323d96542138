// sekv: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): routing (each query head's projection and its gates over the span
// summaries, opt::sekv_routing), the zoom (threshold, then the budget in decreasing gate,
// opt::sekv_zoom), and the two attention stages. The span count is read back from the route phase's
// FLOPs (the inverse of its count in cost.cpp).
#include <cmath>

#include "policies/phase_kernels.hpp"
#include "policies/sekv/params.hpp"
#include "policies/sekv/policy.hpp"

namespace kvsim::policies::sekv {

namespace {
// Spans routed per query head: cost.cpp counts blocks::score over the spans (2 d' + 2 FLOPs each) plus
// the projection of q (2 d' d).
double spans_of(const Deployment& d, const ParamValues& v, const StepShape& s, const Phase& route) {
  const double dp = param_table().read(v).routing_dim, hd = d.model->head_dim;
  const double per_head = route.work.flops / (double(d.model->layers) * s.batch * d.hq);
  return std::max(0.0, std::round((per_head - 2 * dp * hd) / (2 * dp + 2)));
}
}  // namespace

PhaseKernelLinks phase_kernels() {
  PhaseKernelLinks links;
  PhaseKernelLink route;
  route.phase = "route";
  route.kernels = "opt::sekv_routing (per query head: its projection, then its gates over the summaries)";
  route.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase& model) {
    const int64_t spans = int64_t(spans_of(d, v, s, model));
    for (int h = 0; h < int(d.hq); ++h)
      kernel_blocks::sekv_route(1, d.model->head_dim, int(param_table().read(v).routing_dim), spans);
  };
  links.push_back(route);
  PhaseKernelLink zoom;
  zoom.phase = "zoom_select";
  zoom.kernels = "opt::sekv_zoom (every query head in one call: candidates over the threshold, their rank, the budget)";
  zoom.run = [](const Deployment& d, const ParamValues&, const StepShape& s, const Phase& model) {
    // The spans it selects among: blocks::select counts 4 FLOPs per element per query head.
    const int64_t spans = std::llround(model.work.flops / (double(d.model->layers) * s.batch * d.hq * 4));
    kernel_blocks::sekv_zoom(spans, 0.5, int(d.hq));
  };
  zoom.low = 0.45, zoom.high = 3;
  zoom.why = "blocks::select charges two reads of the gates; the zoom (written for exactness) also reads the spans' "
             "lengths and ends (once for every head, one call) and writes and re-reads every span's rank key and "
             "its ranking: about five arrays of the spans per head";
  links.push_back(zoom);
  links.push_back(copy_link("fetch_factors"));
  links.push_back(attention_link("coarse_attention", nullptr, false));
  PhaseKernelLink fine = attention_link("fine_attention", nullptr, false);
  fine.high = 1.3;
  fine.why = "at the probe's shape the budget leaves no room to reconstruct, so the model charges only q in and the "
             "output; the kernel attends at least one token and reads its K and V";
  links.push_back(fine);
  return links;
}

}  // namespace kvsim::policies::sekv
