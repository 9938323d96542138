// sekv: the CUDA kernels that implement its GPU phases (`kvsim validate --device emu`,
// policies/phase_kernels.hpp): routing (each query head's projection and its gates over the span
// summaries, opt::route_gates: the deployment's kernel, not the replay's exact opt::sekv_routing), the zoom (threshold, then the budget in decreasing gate,
// opt::sekv_zoom), the reconstruction (opt::sekv_reconstruct), the factors' fetch and the two attention
// stages. Each shape is read back from its phase's FLOPs and bytes (the inverse of cost.cpp's counts).
#include <algorithm>
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
  // At the probe's 16K tokens the paper's budget (10% of the prompt) is spent on the full-resolution
  // set, the coarse entries and the summaries: no room to zoom, so fetch_factors, reconstruct and
  // fine_attention would have no work to check (docs/validation/phase-bytes.md, rule 6).
  links.probe = [](ParamValues& v) {
    if (v.empty()) v = param_table().values(param_table().read(v));
    v[param_table().index(&Params::budget_ratio)] = 0.2;
  };
  links.probe_why = "sekv runs at budget_ratio 0.2 (default 0.1): at the probe's default 16K tokens the default budget leaves no room to "
                    "zoom, and fetch_factors, reconstruct and fine_attention would have no work";
  PhaseKernelLink route;
  route.phase = "route";
  route.kernels = "opt::route_gates (every query head in one launch: its projection, then a warp per 32 summaries)";
  route.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase& model) {
    // The deployment's kernel; the replay runs opt::sekv_routing, the host's double arithmetic repeated.
    kernel_blocks::sekv_route_gates(int(d.hq), d.model->head_dim, int(param_table().read(v).routing_dim),
                                    int64_t(spans_of(d, v, s, model)));
  };
  links.push_back(route);
  PhaseKernelLink zoom;
  zoom.phase = "zoom_select";
  zoom.kernels = "opt::sekv_zoom (every query head in one call; up to 4096 spans one block per head in shared memory: "
                 "candidates over the threshold, their ranking, the budget)";
  zoom.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase& model) {
    // blocks::select counts 4 FLOPs per element per query head; its chosen ids are the zoomed spans
    // (hbm bytes: L B (hq (spans + chosen) 4 + spans 8), cost.cpp), so the budget is those spans' tokens.
    const double per = double(d.model->layers) * s.batch;
    const int64_t spans = std::llround(model.work.flops / (per * d.hq * 4));
    const double chosen = std::max(0.0, (model.work.hbm_bytes / per - double(spans) * 8) / (d.hq * 4) - double(spans));
    const int span = int(param_table().read(v).mean_span_tokens);
    kernel_blocks::sekv_zoom(spans, 0.5, int(d.hq), span, std::round(chosen) * span);
  };
  links.push_back(zoom);
  links.push_back(copy_link("fetch_factors"));
  links.push_back(attention_link("coarse_attention", nullptr, false));
  PhaseKernelLink rec;
  rec.phase = "reconstruct";
  rec.kernels = "opt::sekv_reconstruct (every zoomed span's K and V of every KV head from its factors, one launch)";
  rec.run = [](const Deployment& d, const ParamValues& v, const StepShape& s, const Phase& model) {
    // cost.cpp: 4 rank d FLOPs per reconstructed token, KV head and matrix pair; whole spans.
    const Params p = param_table().read(v);
    const double hd = d.model->head_dim, span = p.mean_span_tokens;
    const double rank = std::max(1.0, std::round(p.rank_ratio * std::min({span, hd, p.max_rank})));
    const double tokens = model.work.flops / (double(d.model->layers) * s.batch * d.hkv_cached * 4 * rank * hd);
    kernel_blocks::sekv_reconstruct(std::llround(tokens / span), int(span), int(rank), int(hd), int(d.hkv_cached));
  };
  links.push_back(rec);
  links.push_back(attention_link("fine_attention", nullptr, false));
  return links;
}

}  // namespace kvsim::policies::sekv
