// The registry: one table (policies/registry.cpp) that maps each policy's name to its two faces, the
// cost model and the trace selector. Everything that resolves a policy by name goes through here: the
// scenario loader (through policy_catalog()), `kvsim policy`, replay, sweeps.
//
// Adding a policy is one folder, policies/<name>/ (params.hpp, cost.cpp, selector.cpp, policy.hpp,
// README.md), plus one line in the table (docs/architecture.md, "Adding a policy").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/policy.hpp"
#include "traces/select/selector.hpp"

namespace kvsim {

using SelectorFactory = std::unique_ptr<replay::TraceSelector> (*)(const ParamValues&);
using BudgetSetter = bool (*)(ParamValues& values, int64_t prompt, int64_t budget);

struct PolicyEntry {
  const Policy& (*cost_model)();
  SelectorFactory make_selector;  // nullptr: the policy has no trace selector (replay refuses it by name)
  BudgetSetter set_budget;        // nullptr: no budget axis (--budget-sweep replays it once)
};

// The registry line of a policy, by name; nullptr when unknown.
const PolicyEntry* find_policy_entry(std::string_view name);

// Every registered policy, in the order the CLI shows them.
const std::vector<PolicyEntry>& policy_registry();
// The cost models, as the loaders in model/ take them (load_scenario, load_reproduction).
const PolicyCatalog& policy_catalog();

const Policy* find_policy(std::string_view name);  // nullptr when unknown
const std::vector<const Policy*>& all_policies();
std::vector<std::string> policy_names();

namespace replay {
// The policy's trace selector with the given parameter values (empty: the defaults); nullptr for an
// unknown policy or one without a selector.
std::unique_ptr<TraceSelector> make_selector(std::string_view policy, const ParamValues& params);
bool has_selector(std::string_view policy);
}  // namespace replay

}  // namespace kvsim
