// The registry table of the production executables (kvsim, the Python module, the tests): the built-in
// policies (policies/builtin.hpp). Built as its own object (kvsim_registry in CMakeLists.txt) so that an
// executable can link another table instead (tests/example_policy/table.cpp).
#include "policies/builtin.hpp"

namespace kvsim {

std::span<const PolicyEntry> policy_table() { return kBuiltinPolicies; }

}  // namespace kvsim
