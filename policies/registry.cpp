// The registry's lookups: every one reads the table this executable was linked with (policy_table(),
// policies/table.cpp or a test's own), so that table is the only list of policies.
#include "policies/registry.hpp"

namespace kvsim {

const PolicyEntry* find_policy_entry(std::string_view name) {
  for (const PolicyEntry& e : policy_registry())
    if (e.cost_model().name() == name) return &e;
  return nullptr;
}

const std::vector<PolicyEntry>& policy_registry() {
  static const std::vector<PolicyEntry> entries(policy_table().begin(), policy_table().end());
  return entries;
}

const PolicyCatalog& policy_catalog() {
  static const PolicyCatalog catalog = [] {
    PolicyCatalog c;
    for (const PolicyEntry& e : policy_registry()) c.policies.push_back(&e.cost_model());
    return c;
  }();
  return catalog;
}

const Policy* find_policy(std::string_view name) { return policy_catalog().find(name); }
const std::vector<const Policy*>& all_policies() { return policy_catalog().policies; }
std::vector<std::string> policy_names() { return policy_catalog().names(); }

namespace replay {
std::unique_ptr<TraceSelector> make_selector(std::string_view policy, const ParamValues& params) {
  const PolicyEntry* e = find_policy_entry(policy);
  return e && e->make_selector ? e->make_selector(params) : nullptr;
}

bool has_selector(std::string_view policy) {
  const PolicyEntry* e = find_policy_entry(policy);
  return e && e->make_selector;
}
}  // namespace replay

}  // namespace kvsim
