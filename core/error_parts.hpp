// The value and the allowed values an InputError's message names, as separate fields, for callers
// that present an error apart from its text (the Python module's InputError.value/.allowed, the UI's
// message next to the control). Every throw site phrases them the same way (core/error.hpp's contract,
// docs/architecture.md "Conventions"), so they are read here, in the one place that knows the phrasing,
// instead of by each caller.
#pragma once
#include <string>
#include <vector>

#include "core/error.hpp"

namespace kvsim {

struct ErrorParts {
  std::string value;    // "" when the message names no value
  std::string allowed;  // "" when the message names nothing allowed
  bool has_value = false, has_allowed = false;
};

// Reads the phrasings the throw sites use:
//   value:   "value 'X'", "value X", "unknown <kind> 'X'", "file 'X'", "policy 'P' has no parameter 'X'",
//            "'X' is not of the form ...", "unknown key 'X'"
//   allowed: "allowed: A", "allowed <qualifier>: A", "available[ in DIR]: A", "its parameters: A",
//            "one of A", "expected A"
ErrorParts error_parts(const std::string& message);
// The allowed text as its items: split at the commas outside brackets and parentheses, a leading "or "
// dropped ("local, ray" -> {local, ray}; "a number in [0, 1]" -> one item). Empty for an empty text.
std::vector<std::string> allowed_items(const std::string& allowed);
inline ErrorParts error_parts(const InputError& e) { return error_parts(e.message.empty() ? e.what() : e.message); }

}  // namespace kvsim
