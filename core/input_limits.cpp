#include "core/input_limits.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace kvsim {

namespace {
struct LimitInfo {
  const char* variable;
  uint64_t dflt;
  const char* unit;
};

// Why these defaults: the safetensors reference implementation caps its header at 100 MB; 2^20 tensors
// or keys and 2^48 elements are orders of magnitude above the largest public checkpoints; a 64 MiB
// string holds any tokenizer vocabulary; the largest hand-written YAML we ship is a few KB.
const LimitInfo& info(InputLimit l) {
  static const LimitInfo table[] = {
      {"KVSIM_MAX_HEADER_BYTES", uint64_t(100) << 20, "bytes"},
      {"KVSIM_MAX_TENSORS", uint64_t(1) << 20, "tensors"},
      {"KVSIM_MAX_TENSOR_ELEMENTS", uint64_t(1) << 48, "elements"},
      {"KVSIM_MAX_METADATA_KEYS", uint64_t(1) << 20, "keys"},
      {"KVSIM_MAX_STRING_BYTES", uint64_t(64) << 20, "bytes"},
      {"KVSIM_MAX_YAML_BYTES", uint64_t(16) << 20, "bytes"},
  };
  return table[int(l)];
}
}  // namespace

uint64_t default_input_limit(InputLimit l) { return info(l).dflt; }
const char* input_limit_variable(InputLimit l) { return info(l).variable; }

uint64_t input_limit(InputLimit l) {
  const LimitInfo& i = info(l);
  const char* env = std::getenv(i.variable);
  if (!env || !*env) return i.dflt;
  uint64_t v = 0;
  const char* end = env + std::strlen(env);
  const auto [p, ec] = std::from_chars(env, end, v);
  if (ec != std::errc() || p != end || v == 0)
    throw_input_error("environment", 0, i.variable,
                      "value '" + std::string(env) + "' is not allowed; allowed: an integer > 0 (default " +
                          std::to_string(i.dflt) + ")");
  return v;
}

std::string limit_exceeded(InputLimit l, const std::string& what, uint64_t value, uint64_t limit) {
  const LimitInfo& i = info(l);
  return what + " " + std::to_string(value) + " exceeds the limit of " + std::to_string(limit) + " " + i.unit +
         "; set the environment variable " + i.variable + " to raise it";
}

}  // namespace kvsim
