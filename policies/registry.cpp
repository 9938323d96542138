// The registry table: one line per policy, in the order `kvsim policy list` shows them. An explicit
// table rather than self-registration, because static initializers in a static library are dropped by
// the linker when nothing refers to their object file.
#include "policies/registry.hpp"

#include "policies/chess/policy.hpp"
#include "policies/chunkkv/policy.hpp"
#include "policies/ctkvr/policy.hpp"
#include "policies/full/policy.hpp"
#include "policies/quest/policy.hpp"
#include "policies/sekv/policy.hpp"
#include "policies/sentencekv/policy.hpp"
#include "policies/snapkv/policy.hpp"
#include "policies/streaming/policy.hpp"
#ifdef KVSIM_EXAMPLE_POLICY
#include "tests/example_policy/oracle/policy.hpp"
#endif

namespace kvsim {

namespace {
namespace p = policies;
const PolicyEntry kTable[] = {
    // cost model             trace selector (nullptr: none)   budget axis (nullptr: none)
    {&p::full::cost_model,       &p::full::make_selector,         nullptr},
    {&p::streaming::cost_model,  &p::streaming::make_selector,    &p::streaming::set_budget},
    {&p::snapkv::cost_model,     &p::snapkv::make_selector,       &p::snapkv::set_budget},
    {&p::quest::cost_model,      &p::quest::make_selector,        &p::quest::set_budget},
    {&p::chess::cost_model,      &p::chess::make_selector,        &p::chess::set_budget},
    {&p::sentencekv::cost_model, &p::sentencekv::make_selector,   &p::sentencekv::set_budget},
    {&p::chunkkv::cost_model,    &p::chunkkv::make_selector,      &p::chunkkv::set_budget},
    {&p::sekv::cost_model,       &p::sekv::make_selector,         &p::sekv::set_budget},
    {&p::ctkvr::cost_model,      &p::ctkvr::make_selector,        &p::ctkvr::set_budget},
#ifdef KVSIM_EXAMPLE_POLICY  // tests only (tests/example_policy/): the "adding a policy" recipe, one line
    {&p::oracle::cost_model,     &p::oracle::make_selector,       &p::oracle::set_budget},
#endif
};

}  // namespace

const PolicyEntry* find_policy_entry(std::string_view name) {
  for (const PolicyEntry& e : policy_registry())
    if (e.cost_model().name() == name) return &e;
  return nullptr;
}

const std::vector<PolicyEntry>& policy_registry() {
  static const std::vector<PolicyEntry> entries(std::begin(kTable), std::end(kTable));
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
