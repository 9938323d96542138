#include "replay/budget.hpp"

#include "policies/registry.hpp"

namespace kvsim::replay {

// Each policy's mapping lives in its own folder (policies/<name>/budget.cpp); the registry line says
// whether it has one.
bool has_budget(const Policy& policy) {
  const PolicyEntry* e = find_policy_entry(policy.name());
  return e && e->set_budget;
}

bool set_budget(const Policy& policy, ParamValues& v, int64_t P, int64_t B) {
  if (B <= 0 || P <= 0) return false;
  const PolicyEntry* e = find_policy_entry(policy.name());
  return e && e->set_budget && e->set_budget(v, P, B);
}

std::vector<int64_t> sweep_budgets(int64_t P) {
  std::vector<int64_t> b;
  for (int64_t x = 64; x < P; x *= 2) b.push_back(x);
  b.push_back(P);
  return b;
}

}  // namespace kvsim::replay
