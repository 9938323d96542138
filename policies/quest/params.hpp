// quest's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::quest {

struct Params {
  double page_size, budget_tokens;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"quest", {
      {&Params::page_size, {"page_size", 16, Range::between(1, 65536), true, "tokens per page (Quest's chunk size 16; SentenceKV seed §A.4 evaluates 16 and 32)"}},
      {&Params::budget_tokens, {"budget_tokens", 2048, Range::between(1, 1e8), true, "tokens attended per step, as whole pages (CHESS seed Table 1: Quest's best budget 2048)"}, CarryRule::scale_context},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::budget_tokens, KnobGrid::tokens()}}};
  return table;
}

}  // namespace kvsim::policies::quest
