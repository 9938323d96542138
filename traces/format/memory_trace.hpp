// A trace held whole in memory, in float: the simplest TraceSource. Tests build one by hand; small
// captures and conversions fill one and hand it to write_trace().
#pragma once
#include <vector>

#include "traces/format/trace.hpp"

namespace kvsim {

class MemoryTrace final : public TraceSource {
 public:
  // Allocates zeroed keys/queries (and values when `with_values`) for the shapes `meta` and `tokens`
  // describe. Validates both first (validate_trace).
  MemoryTrace(TraceMeta meta, TraceTokens tokens, bool with_values, DType dtype = DType::fp32);

  const TraceMeta& meta() const override { return meta_; }
  const TraceTokens& tokens() const override { return tokens_; }
  bool has_values() const override { return !values_.empty(); }
  DType storage_dtype() const override { return dtype_; }
  void keys(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void values(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void queries(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out) const override;

  // Mutable rows, for filling: row t of (layer slot, kv slot) / row s of (layer slot, query slot).
  float* key_row(int layer_slot, int kv_slot, int64_t t);
  float* value_row(int layer_slot, int kv_slot, int64_t t);
  float* query_row(int layer_slot, int q_slot, int64_t s);

 private:
  TraceMeta meta_;
  TraceTokens tokens_;
  DType dtype_;
  std::vector<float> keys_, values_, queries_;
  size_t kv_index(int l, int h, int64_t t) const;
  size_t q_index(int l, int h, int64_t s) const;
};

}  // namespace kvsim
