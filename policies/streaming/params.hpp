// streaming's parameters, declared once: the ParamSpec rows (name, paper default, range, doc with the seed
// section) and the typed struct the cost model (cost.cpp), the trace selector (selector.cpp) and the
// budget mapping read them through (model/param_table.hpp). The row order is the order of ParamValues.
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::streaming {

struct Params {
  double sinks, window;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"streaming", {
      {&Params::sinks, {"sinks", 4, Range::between(0, 1e7), true, "initial tokens always kept (StreamingLLM: 4 attention sinks)"}},
      {&Params::window, {"window", 1020, Range::between(1, 1e8), true, "most recent tokens kept; sinks + window = 1024, the budget the seeds compare baselines at"}},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::window, KnobGrid::tokens()}}};
  return table;
}

}  // namespace kvsim::policies::streaming
