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
  };

  ParamTable(std::string policy, std::initializer_list<Row> rows) : policy_(std::move(policy)) {
    for (const Row& r : rows) {
      fields_.push_back(r.field);
      specs_.push_back(r.spec);
      defaults_.*r.field = r.spec.default_value;
    }
  }

  const std::vector<ParamSpec>& specs() const { return specs_; }

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

 private:
  std::string policy_;
  std::vector<Field> fields_;
  std::vector<ParamSpec> specs_;
  Params defaults_{};
};

}  // namespace kvsim
