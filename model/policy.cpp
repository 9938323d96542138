#include "model/policy.hpp"

#include "core/units.hpp"

namespace kvsim {

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

const Policy* PolicyCatalog::find(std::string_view name) const {
  for (const Policy* p : policies)
    if (p->name() == name) return p;
  return nullptr;
}

std::vector<std::string> PolicyCatalog::names() const {
  std::vector<std::string> out;
  for (const Policy* p : policies) out.emplace_back(p->name());
  return out;
}

}  // namespace kvsim
