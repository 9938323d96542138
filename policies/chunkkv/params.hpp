// chunkkv's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::chunkkv {

struct Params {
  double chunk_size, budget_ratio, budget_tokens, obs_window, reuse_layers;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"chunkkv", {
      {&Params::chunk_size, {"chunk_size", 10, Range::between(1, 1e6), true, "c: tokens per chunk (§4.4: 10 'as a robust default')"}},
      {&Params::budget_ratio, {"budget_ratio", 0.1, Range{0, 1, true}, false, "L_max as a fraction of the prompt when budget_tokens is 0 (§4.2: 10% compression ratio in the main results)"}},
      {&Params::budget_tokens, {"budget_tokens", 0, Range::between(0, 1e8), true, "L_max in tokens; 0 = use budget_ratio"}, CarryRule::scale_context},
      {&Params::obs_window, {"obs_window", 32, Range::between(1, 1e6), true, "w: observation window (§3.2: 'usually set to {4, 8, 16, 32}')"}},
      {&Params::reuse_layers, {"reuse_layers", 2, Range::between(1, 1024), true, "N_reuse: layers sharing one selection (§4.3: reuse layer 2)"}},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::budget_ratio, KnobGrid::ratios()}}};
  return table;
}

}  // namespace kvsim::policies::chunkkv
