// ctkvr's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include <algorithm>
#include <cmath>

#include "model/param_table.hpp"

namespace kvsim::policies::ctkvr {

struct Params {
  double centroids, probes, per_centroid, budget_tokens, init_tokens, local_tokens, dedup, rerank_on;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"ctkvr", {
      {&Params::centroids, {"centroids", 1024, Range::between(0, 1e6), true, "C: last prompt queries kept as centroids (App. C.2: the system experiments' C = 1024); 0 = the accuracy setup's C = min(2048, n/16) for an n-token prompt (§4.1.1)"}},
      {&Params::probes, {"probes", 4, Range::between(1, 1e6), true, "C': centroids probed per KV head per step (§4.1.1: C' = 4)"}},
      {&Params::per_centroid, {"per_centroid", 0, Range::between(0, 1e8), true, "rho: key ids per centroid per KV head; 0 = 2.5 rho' (§4.1.1: rho = 2.5 rho', 2560 at rho' = 1024, App. C.2's default)"}},
      {&Params::budget_tokens, {"budget_tokens", 1024, Range::between(1, 1e8), true, "rho': tokens reranked into the CPU attention (§4.1.1: 1024 or 512)"}, CarryRule::scale_context},
      {&Params::init_tokens, {"init_tokens", 128, Range::between(0, 1e8), true, "initial tokens kept on the GPU (count not given; with local_tokens, ~5% of a 128K context as §3.1.1 states)"}, CarryRule::scale_context},
      {&Params::local_tokens, {"local_tokens", 6400, Range::between(0, 1e8), true, "recent tokens kept on the GPU (count not given; init + local = 6528 = 5% of 131072, §3.1.1)"}, CarryRule::scale_context},
      {&Params::dedup, {"dedup", 0.5, Range{0, 1, true}, false, "alpha: fraction of the rho C' recalled ids left after dedup (footnote 6, App. C.2: 0.5 or less)"}},
      {&Params::rerank_on, {"rerank_on", 0, Range::between(0, 1), true, "where the rerank and sparse attention run: cpu (the paper) or gpu (recalled keys copied to the GPU)", {"cpu", "gpu"}}},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::probes, KnobGrid::of({1, 2, 4, 8, 16, 32})},
       {&Params::budget_tokens, KnobGrid::of({256, 512, 1024, 2048, 4096})}}};
  return table;
}

// The number of centroids for an n-token prompt: `centroids` (by default App. C.2's C = 1024, the
// setting of the paper's system experiments), or, with 0, the accuracy setup of §4.1.1: "CTKVR is
// configured with C = min(2048, dataset length / 16)", floor(n/16) and at least 1. Never more than the
// prompt's n queries (Algorithm 1 line 1 takes the last C of them). The cost model (cost.cpp) and the
// trace selector (selector.cpp) both read C through this function.
inline double centroid_count(const Params& p, double prompt) {
  const double c = p.centroids > 0 ? p.centroids : std::max(1.0, std::min(2048.0, std::floor(prompt / 16.0)));
  return std::max(0.0, std::min(c, prompt));
}

// rho, the key ids per centroid and KV head in the qcIVF: `per_centroid` when set, else (0, the
// default) §4.1.1's rho = 2.5 rho', rounded up, so the index follows the rerank budget budget_tokens.
// The cost model and the selector both read rho through this function.
inline double centroid_ids(const Params& p) {
  return p.per_centroid > 0 ? p.per_centroid : std::ceil(2.5 * p.budget_tokens);
}

}  // namespace kvsim::policies::ctkvr
