// oracle's parameters (a test-only policy: tests/example_policy/README.md).
#pragma once
#include "model/param_table.hpp"

namespace kvsim::policies::oracle {

struct Params {
  double budget_tokens;
};

inline const ParamTable<Params>& param_table() {
  static const ParamTable<Params> table{"oracle", {
      {&Params::budget_tokens, {"budget_tokens", 256, Range::between(1, 1e8), true,
                                "tokens attended per step: the exact top-k by the group's q.k (test policy)"}, CarryRule::scale_context},
  },
      // budget knobs (model/budget_knob.hpp): the grids the target search and capacity planning walk
      {{&Params::budget_tokens, KnobGrid::tokens()}}};
  return table;
}

}  // namespace kvsim::policies::oracle
