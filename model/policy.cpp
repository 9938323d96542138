#include "model/policy.hpp"

namespace kvsim {

// Each policy file defines one of these; the registry lists them in the order the CLI shows them.
const Policy& full_policy();

ParamValues Policy::defaults() const {
  ParamValues v;
  for (const auto& s : params()) v.push_back(s.default_value);
  return v;
}

int Policy::param_index(std::string_view param) const {
  const auto& ps = params();
  for (size_t i = 0; i < ps.size(); ++i)
    if (ps[i].name == param) return int(i);
  return -1;
}

const std::vector<const Policy*>& all_policies() {
  static const std::vector<const Policy*> registry = {&full_policy()};
  return registry;
}

const Policy* find_policy(std::string_view name) {
  for (const Policy* p : all_policies())
    if (p->name() == name) return p;
  return nullptr;
}

std::vector<std::string> policy_names() {
  std::vector<std::string> out;
  for (const Policy* p : all_policies()) out.emplace_back(p->name());
  return out;
}

}  // namespace kvsim
