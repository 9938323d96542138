// The registry table of kvsim_properties: the built-in policies and the test-only "overlap" policy
// (overlap_policy.hpp), whose extra entries overlap its selection. Only this executable links it.
#include <vector>

#include "policies/builtin.hpp"
#include "tests/properties/overlap_policy.hpp"

namespace kvsim {

std::span<const PolicyEntry> policy_table() {
  static const std::vector<PolicyEntry> table = [] {
    std::vector<PolicyEntry> t(std::begin(kBuiltinPolicies), std::end(kBuiltinPolicies));
    t.push_back({&props::overlap::cost_model, &props::overlap::make_selector, nullptr});
    return t;
  }();
  return table;
}

}  // namespace kvsim
