// The registry: one table (policy_table(): policies/builtin.hpp's lines, linked in by policies/table.cpp)
// that maps each policy's name to its faces: the cost model, the trace selector and the replay's budget
// axis. Everything that resolves a policy by name goes through here: the scenario loader (through
// policy_catalog()), `kvsim policy`, replay, sweeps, target plans, capacity.
//
// Adding a policy is one folder, policies/<name>/ (params.hpp, cost.cpp, selector.cpp, policy.hpp,
// README.md), plus one line in the table of built-in policies, policies/builtin.hpp
// (docs/architecture.md, "Adding a policy").
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/policy.hpp"
#include "policies/phase_kernels.hpp"
#include "traces/select/selector.hpp"

namespace kvsim {

using SelectorFactory = std::unique_ptr<replay::TraceSelector> (*)(const ParamValues&);
using BudgetSetter = bool (*)(ParamValues& values, int64_t prompt, int64_t budget);

struct PolicyEntry {
  const Policy& (*cost_model)();
  SelectorFactory make_selector;  // nullptr: the policy has no trace selector (replay refuses it by name)
  BudgetSetter set_budget;        // nullptr: no budget axis (--budget-sweep replays it once)
  // The CUDA kernels that implement its GPU phases (policies/<name>/kernels.cpp; `kvsim validate --device
  // emu`); nullptr: none declared.
  PhaseKernelLinks (*phase_kernels)() = nullptr;
};

// The table this executable was linked with, in the order the CLI shows the policies. Each executable
// links one object that defines it: policies/table.cpp (the built-in policies, kBuiltinPolicies), or a
// test's own table (tests/example_policy/table.cpp: the built-in ones and a test-only policy). The
// functions below read the registry only through it.
std::span<const PolicyEntry> policy_table();

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
