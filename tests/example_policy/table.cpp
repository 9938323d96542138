// The registry table of kvsim-example-policy, the second CLI the tests build (tests/test_layers.cpp):
// the built-in policies and, on one line, the test-only policy of oracle/. This line is the whole of
// registering a policy (docs/architecture.md, "Adding a policy"); everything else it has — parameters,
// budget knobs, cost model, selector, budget axis — lives in its folder.
#include <vector>

#include "policies/builtin.hpp"
#include "tests/example_policy/oracle/policy.hpp"

namespace kvsim {

std::span<const PolicyEntry> policy_table() {
  static const std::vector<PolicyEntry> table = [] {
    std::vector<PolicyEntry> t(std::begin(kBuiltinPolicies), std::end(kBuiltinPolicies));
    t.push_back({&policies::oracle::cost_model, &policies::oracle::make_selector, &policies::oracle::set_budget});
    return t;
  }();
  return table;
}

}  // namespace kvsim
