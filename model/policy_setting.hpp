// One parser for "POLICY.PARAM=VALUE", the form every command-line setting of a policy parameter takes:
// `--set chess.rho_page=0.2` (plan, replay, sweep, serve, capacity, Python's `set=`) and
// `--knob ctkvr.probes=1,2,4` (the target search's own grid). The text after '=' is left to the caller:
// one value for --set (read through the parameter's ParamSpec, as a scenario file's value is), a list
// for --knob.
#pragma once
#include <string>

#include "model/policy.hpp"

namespace kvsim {

struct PolicySetting {
  std::string policy, param, value;  // value: everything after the first '='
};

// Splits `text` at the first '.' and the first '=' after it. Throws InputError on the command line,
// naming `field` (e.g. "--set") and the expected `form` (e.g. "POLICY.PARAM=VALUE").
PolicySetting parse_policy_setting(const std::string& text, const std::string& field, const std::string& form,
                                   const std::string& origin = "command line");

// The position of `param` among `policy`'s parameters. Throws InputError on the command line, naming
// `field`, the closest parameter name and every parameter of the policy.
int setting_param_index(const Policy& policy, const std::string& param, const std::string& field,
                        const std::string& origin = "command line");

}  // namespace kvsim
