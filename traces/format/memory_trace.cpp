#include "traces/format/memory_trace.hpp"

#include <algorithm>
#include <cassert>
#include <stdexcept>

namespace kvsim {

MemoryTrace::MemoryTrace(TraceMeta meta, TraceTokens tokens, bool with_values, DType dtype)
    : meta_(std::move(meta)), tokens_(std::move(tokens)), dtype_(dtype) {
  validate_trace(meta_, tokens_, "(in memory)");
  if (dtype_ == DType::fp8) throw std::invalid_argument("MemoryTrace: traces hold fp32, fp16 or bf16");
  const size_t d = size_t(meta_.model.head_dim), L = meta_.layers.size();
  const size_t kv = L * meta_.kv_heads.size() * size_t(tokens_.tokens()) * d;
  keys_.assign(kv, 0.0f);
  if (with_values) values_.assign(kv, 0.0f);
  queries_.assign(L * meta_.query_heads.size() * size_t(tokens_.steps()) * d, 0.0f);
}

size_t MemoryTrace::kv_index(int l, int h, int64_t t) const {
  assert(l >= 0 && size_t(l) < meta_.layers.size() && h >= 0 && size_t(h) < meta_.kv_heads.size());
  return ((size_t(l) * meta_.kv_heads.size() + size_t(h)) * size_t(tokens_.tokens()) + size_t(t)) *
         size_t(meta_.model.head_dim);
}
size_t MemoryTrace::q_index(int l, int h, int64_t s) const {
  assert(l >= 0 && size_t(l) < meta_.layers.size() && h >= 0 && size_t(h) < meta_.query_heads.size());
  return ((size_t(l) * meta_.query_heads.size() + size_t(h)) * size_t(tokens_.steps()) + size_t(s)) *
         size_t(meta_.model.head_dim);
}

void MemoryTrace::keys(int l, int h, int64_t t0, int64_t t1, float* out) const {
  std::copy(keys_.begin() + kv_index(l, h, t0), keys_.begin() + kv_index(l, h, t1), out);
}
void MemoryTrace::values(int l, int h, int64_t t0, int64_t t1, float* out) const {
  if (values_.empty()) throw std::logic_error("MemoryTrace: this trace has no values");
  std::copy(values_.begin() + kv_index(l, h, t0), values_.begin() + kv_index(l, h, t1), out);
}
void MemoryTrace::queries(int l, int h, int64_t s0, int64_t s1, float* out) const {
  std::copy(queries_.begin() + q_index(l, h, s0), queries_.begin() + q_index(l, h, s1), out);
}
float* MemoryTrace::key_row(int l, int h, int64_t t) { return keys_.data() + kv_index(l, h, t); }
float* MemoryTrace::value_row(int l, int h, int64_t t) { return values_.data() + kv_index(l, h, t); }
float* MemoryTrace::query_row(int l, int h, int64_t s) { return queries_.data() + q_index(l, h, s); }

}  // namespace kvsim
