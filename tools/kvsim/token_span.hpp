// "FIRST:END", a token span given on the command line (replay --needle-tokens, trace fit --needle-tokens).
// The callers check it against the trace's prompt; this only reads two integers.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace kvsim {

inline std::pair<int64_t, int64_t> parse_token_span(const std::string& text, const std::string& field) {
  long long a = 0, b = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lld:%lld%c", &a, &b, &tail) != 2)
    throw_input_error("command line", 0, field,
                      "value '" + text + "' is not a token span; allowed: FIRST:END, two integers (e.g. 1024:1036)");
  return {a, b};
}

}  // namespace kvsim
