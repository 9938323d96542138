// Element types of weights, activations and KV cache, and their sizes in bytes.
#pragma once
#include <string>
#include <string_view>

namespace kvsim {

enum class DType { fp32, fp16, bf16, fp8 };

constexpr double bytes_of(DType t) {
  switch (t) {
    case DType::fp32: return 4;
    case DType::fp16: return 2;
    case DType::bf16: return 2;
    case DType::fp8: return 1;
  }
  return 0;
}

constexpr std::string_view to_string(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp8: return "fp8";
  }
  return "?";
}

inline constexpr const char* kDTypeNames = "fp32, fp16, bf16, fp8";

// Returns false for an unknown name.
inline bool parse_dtype(std::string_view s, DType& out) {
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8})
    if (s == to_string(t)) { out = t; return true; }
  return false;
}

}  // namespace kvsim
