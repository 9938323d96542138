// One declaration of a policy's parameters. Each row binds a ParamSpec (name, paper default, range,
// doc with the seed section) to a field of the policy's own Params struct, so the row order is the
// order of ParamValues everywhere (scenario files, sweeps, `kvsim policy show`) and every file — the
// cost model, the trace selector, the budget mapping — reads a value through its field:
//
//   struct Params { double chunk_size, budget_ratio; };
//   const ParamTable<Params> table{{&Params::chunk_size, {"chunk_size", 10, ...}}, ...};
//   const Params p = table.read(values);   // p.chunk_size
//
// Reordering, adding or removing a row therefore cannot make another file read the wrong value, which
// positional enums copied by hand into two files could.
//
// The table also says, per parameter, how a statistic measured on a trace carries over to it (a row's
// third member, CarryRule: as measured, or scaled with the context), and which parameters are the
// policy's budget knobs with their search grids (the second list, model/budget_knob.hpp):
//
//   const ParamTable<Params> table{"quest", {
//       {&Params::budget_tokens, {"budget_tokens", 2048, ...}, CarryRule::scale_context}, ...},
//       {{&Params::budget_tokens, KnobGrid::tokens()}}};
#pragma once
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/policy.hpp"

namespace kvsim {

template <typename Params>
class ParamTable {
 public:
  using Field = double Params::*;
  struct Row {
    Field field;
    ParamSpec spec;
    CarryRule carry = CarryRule::as_is;
  };
  struct Knob {
    Field field;
    KnobGrid grid;
  };

  ParamTable(std::string policy, std::initializer_list<Row> rows, std::initializer_list<Knob> knobs = {})
      : policy_(std::move(policy)) {
    for (const Row& r : rows) {
      fields_.push_back(r.field);
      specs_.push_back(r.spec);
      specs_.back().carry = r.carry;
      defaults_.*r.field = r.spec.default_value;
    }
    for (const Knob& k : knobs) knobs_.push_back({int(index(k.field)), k.grid});
  }

  const std::vector<ParamSpec>& specs() const { return specs_; }
  const std::vector<BudgetKnob>& knobs() const { return knobs_; }

  // The values as the struct; an empty vector means every default. A vector of another length is a
  // programming error (values always come from this table's specs()), hence std::logic_error.
  Params read(const ParamValues& v) const {
    if (v.empty()) return defaults_;
    if (v.size() != fields_.size()) {
      throw std::logic_error(policy_ + ": " + std::to_string(v.size()) + " parameter values for " +
                             std::to_string(fields_.size()) + " parameters");
    }
    Params p{};
    for (size_t i = 0; i < fields_.size(); ++i) p.*fields_[i] = v[i];
    return p;
  }

  // The values of `p`, in row order (the inverse of read()).
  ParamValues values(const Params& p) const {
    ParamValues v(fields_.size());
    for (size_t i = 0; i < fields_.size(); ++i) v[i] = p.*fields_[i];
    return v;
  }

  // The position of a field in ParamValues (for code that edits values in place, e.g. budgets).
  size_t index(Field f) const {
    for (size_t i = 0; i < fields_.size(); ++i)
      if (fields_[i] == f) return i;
    throw std::logic_error(policy_ + ": a field with no row in its parameter table");
  }
  const ParamSpec& spec(Field f) const { return specs_[index(f)]; }
  // A field's parameter name: what a selector keys a statistic by when the statistic is a measured value
  // of that parameter (replay's apply_statistics carries it over by this name).
  const std::string& name(Field f) const { return spec(f).name; }

 private:
  std::string policy_;
  std::vector<Field> fields_;
  std::vector<ParamSpec> specs_;
  std::vector<BudgetKnob> knobs_;
  Params defaults_{};
};

}  // namespace kvsim
