// Size limits on untrusted input (docs/robustness.md, "Resource limits"). A hostile or corrupt file can
// claim any count or length; each reader checks the claim against one of these limits before it
// allocates or loops, so a bad file costs an error message, not gigabytes of memory. The defaults are
// far above any real file; a user with a genuinely larger one raises the limit through the environment
// variable the error names, e.g. `KVSIM_MAX_HEADER_BYTES=500000000 kvsim trace info big.safetensors`.
#pragma once
#include <cstdint>
#include <string>

namespace kvsim {

enum class InputLimit {
  header_bytes,     // a safetensors JSON header
  tensors,          // tensors in one safetensors or GGUF file
  tensor_elements,  // elements of one tensor
  metadata_keys,    // GGUF metadata key/value pairs
  string_bytes,     // one GGUF string (key, value or array element)
  yaml_bytes,       // one YAML file (hardware, host, model, scenario, calibration, trace preset)
};

// The limit in force: the environment variable when set (an integer > 0; anything else is an
// InputError naming the variable), else the default.
uint64_t input_limit(InputLimit l);
uint64_t default_input_limit(InputLimit l);
const char* input_limit_variable(InputLimit l);  // "KVSIM_MAX_HEADER_BYTES", ...

// "<what> <value> exceeds the limit of <limit> <unit>; set KVSIM_MAX_... to raise it". For messages;
// `limit` is the one the caller checked against (input_limit(l) unless a caller passed its own).
std::string limit_exceeded(InputLimit l, const std::string& what, uint64_t value, uint64_t limit);

}  // namespace kvsim
