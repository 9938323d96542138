#include "model/policy.hpp"

#include "model/units.hpp"

namespace kvsim {

// Each policy file defines one of these; the registry lists them in the order the CLI shows them.
const Policy& full_policy();
const Policy& streaming_policy();
const Policy& snapkv_policy();
const Policy& quest_policy();
const Policy& chess_policy();
const Policy& sentencekv_policy();
const Policy& chunkkv_policy();
const Policy& sekv_policy();
const Policy& ctkvr_policy();

double read_param(YamlMap& m, const ParamSpec& spec) {
  if (!spec.choices.empty()) {
    const std::string word = m.choice(spec.name, spec.choices);
    for (size_t i = 0; i < spec.choices.size(); ++i)
      if (spec.choices[i] == word) return double(i);
  }
  return spec.integer ? double(m.integer(spec.name, spec.range)) : m.number(spec.name, spec.range);
}

std::string param_text(const ParamSpec& spec, double value) {
  if (!spec.choices.empty() && value >= 0 && size_t(value) < spec.choices.size()) return spec.choices[size_t(value)];
  return format_number(value);
}

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
  static const std::vector<const Policy*> registry = {
      &full_policy(),  &streaming_policy(),  &snapkv_policy(), &quest_policy(), &chess_policy(),
      &sentencekv_policy(), &chunkkv_policy(), &sekv_policy(),   &ctkvr_policy()};
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
