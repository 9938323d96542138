#include "model/policy_setting.hpp"

#include "core/error.hpp"
#include "core/format.hpp"

namespace kvsim {

PolicySetting parse_policy_setting(const std::string& text, const std::string& field, const std::string& form,
                                   const std::string& origin) {
  const auto dot = text.find('.');
  const auto eq = text.find('=');
  if (dot == std::string::npos || eq == std::string::npos || eq < dot)
    throw_input_error(origin, 0, field, "'" + text + "' is not of the form " + form);
  return {text.substr(0, dot), text.substr(dot + 1, eq - dot - 1), text.substr(eq + 1)};
}

int setting_param_index(const Policy& policy, const std::string& param, const std::string& field,
                        const std::string& origin) {
  const int i = policy.param_index(param);
  if (i >= 0) return i;
  std::vector<std::string> names;
  for (const auto& ps : policy.params()) names.push_back(ps.name);
  throw_input_error(origin, 0, field,
                    "policy '" + std::string(policy.name()) + "' has no parameter '" + param + "'" +
                        suggestion(param, names) + "; its parameters: " + join(names));
}

}  // namespace kvsim
