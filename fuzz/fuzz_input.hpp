// Shared by every libFuzzer target (docs/robustness.md). A target feeds the fuzzer's bytes to one reader of
// untrusted input; the contract under test is that the reader either succeeds or throws InputError.
// Anything else — a crash, a sanitizer report, another exception type, a hang — is a bug, so only
// InputError is caught here and every other exception escapes and aborts the run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace kvsim::fuzz {

// Runs `body` and swallows the one exception the contract allows.
template <class F>
void expect_input_error_only(F&& body) {
  try {
    body();
  } catch (const InputError&) {
  }
}

// Readers that only accept a path get the bytes through a file. One per process (the fuzzer runs
// inputs one after another), rewritten for each input.
std::string write_temp_file(const uint8_t* data, size_t size, const char* suffix);

inline std::string as_string(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace kvsim::fuzz
