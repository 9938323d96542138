// A budget knob: one of a policy's parameters that buys quality with cost, and the grid of values the
// target search (`kvsim plan --target-*`, sweep/target_search.hpp) and capacity planning under a quality
// floor (`kvsim capacity --min-recall`) walk for it. Each policy declares its knobs in its own folder,
// next to its parameter table (policies/<name>/params.hpp, model/param_table.hpp), in the order the
// search nests them: the last knob is bisected for each setting of the others.
//
// Values ascend: more budget keeps more tokens and moves more bytes, so quality and cost both grow
// along every knob (the monotonicity the search relies on).
#pragma once
#include <cstdint>
#include <vector>

namespace kvsim {

struct KnobGrid {
  enum class Kind {
    values,   // the listed values
    tokens,   // token counts: powers of two from 64 below the context, and the context itself
  };
  Kind kind = Kind::values;
  std::vector<double> list;

  static KnobGrid of(std::vector<double> v) { return {Kind::values, std::move(v)}; }
  static KnobGrid tokens() { return {Kind::tokens, {}}; }
  // Fractions of the context (or of a policy's pool) from 2% to all of it.
  static KnobGrid ratios() { return of({0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0}); }

  // The grid at a context length, before the parameter's range is applied.
  std::vector<double> at(int64_t context) const {
    if (kind == Kind::values) return list;
    std::vector<double> g;
    for (double x = 64; x < double(context); x *= 2) g.push_back(x);
    g.push_back(double(context));
    return g;
  }
};

// A knob as the Policy interface hands it out: the parameter's position in ParamValues and its grid.
struct BudgetKnob {
  int param = -1;
  KnobGrid grid;
};

}  // namespace kvsim
