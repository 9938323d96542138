// sekv's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::sekv {

// zoom_rate's default: no fixed rate, the zoomed spans fill the reconstruction room (any value < 0).
inline constexpr double kFillBudget = -1;

struct Params {
  double budget_ratio, max_rank, routing_dim, alpha, min_span, local_window, mean_span_tokens, anchor_ratio, zoom_rate, rank_ratio;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"sekv", {
      {&Params::budget_ratio, {"budget_ratio", 0.1, Range{0, 1, true}, false, "GPU-resident budget as a fraction of the prompt's KV (token-equivalents per layer and KV head), anchors, coarse entries and summaries included (§4.1: 10%)"}},
      {&Params::max_rank, {"max_rank", 32, Range::between(1, 4096), true, "R_max: SVD rank cap (§4.1, App. A: R = 32)"}},
      {&Params::routing_dim, {"routing_dim", 32, Range::between(1, 4096), true, "d': routing summary dimension (§3.2: d' = 32)"}},
      {&Params::alpha, {"alpha", 1.0, Range::between(0, 100), false, "boundary sensitivity: H_t > mu + alpha sigma (§3.1, Table 7: 1.0); used by trace replay, which measures anchor_ratio and mean_span_tokens"}},
      {&Params::min_span, {"min_span", 16, Range::between(1, 1e6), true, "L_min: shorter spans stay full resolution on the GPU (App. A: 16)"}},
      {&Params::local_window, {"local_window", 512, Range::between(0, 1e8), true, "w: recent tokens at full resolution (§4.1, Table 7: 512)"}},
      {&Params::mean_span_tokens, {"mean_span_tokens", 32, Range::between(1, 1e6), false, "mean length of a compressed span (data-dependent: estimate; trace replay measures it)"}},
      {&Params::anchor_ratio, {"anchor_ratio", 0.03, Range::between(0, 1), false, "fraction of prompt tokens kept full resolution: anchors and spans shorter than L_min (estimate; trace replay measures it)"}},
      {&Params::zoom_rate, {"zoom_rate", kFillBudget, Range::between(-1, 1), false, "< 0 (default -1): zoom spans in decreasing routing score until the GPU-resident budget is filled (§3.3, §4.1); 0..1: override, the fraction of compressed tokens whose spans are zoomed per step, per layer and KV head, still capped by the budget (trace replay measures it)"}},
      {&Params::rank_ratio, {"rank_ratio", 0.5, Range{0, 1, true}, false, "mean effective rank as a fraction of min(|S|, d, R_max) (stand-in for the trained rank gates, §3.2 eq. 7-8)"}},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::budget_ratio, KnobGrid::ratios()}, {&Params::max_rank, KnobGrid::of({8, 16, 32, 64, 128})}}};
  return table;
}

// The reconstruction room, in token-equivalents per layer and KV head: what the GPU-resident budget
// beta P leaves after the full-resolution set F (anchors, short spans, local window), the m coarse
// entries k-bar, v-bar (one token-equivalent each) and the routing summaries (d' per query head, g per
// KV head: g d' / (2 d) token-equivalents per span). §3.3 counts all of these in the budget ("peak
// GPU-resident KV ... including persistent anchors, summaries, coarse means, and any spans
// reconstructed at that step"); §3.3 and §4.1 expand spans "in decreasing routing-score order until
// the GPU-resident KV budget is reached". One formula for the cost model (cost.cpp) and the trace
// selector (selector.cpp). Negative when the resident set alone exceeds the budget.
inline double reconstruction_room(const Params& p, double prompt, double full_tokens, double spans, double group,
                                  double head_dim) {
  return p.budget_ratio * prompt - full_tokens - spans - spans * group * p.routing_dim / (2 * head_dim);
}

}  // namespace kvsim::policies::sekv
