// snapkv's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::snapkv {

struct Params {
  double budget_tokens, obs_window, pool_kernel;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"snapkv", {
      {&Params::budget_tokens, {"budget_tokens", 1024, Range::between(1, 1e8), true, "tokens kept per KV head, observation window included (SentenceKV seed Table 4 compares SnapKV 1024)"}, CarryRule::scale_context},
      {&Params::obs_window, {"obs_window", 32, Range::between(1, 1e6), true, "prompt queries that score the rest (SnapKV default 32)"}},
      {&Params::pool_kernel, {"pool_kernel", 5, Range::between(1, 1025), true, "1-D pooling kernel over the scores (SnapKV repository default 5)"}},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::budget_tokens, KnobGrid::tokens()}}};
  return table;
}

}  // namespace kvsim::policies::snapkv
