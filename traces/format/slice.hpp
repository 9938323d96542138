// A slice of another trace: a subset of its stored layers and KV heads (with the query heads of those
// KV heads' groups) and a range of its query rows. Tokens after the last kept query are dropped too
// (no kept query attends them), so a slice of the first decode steps of a long trace is small.
// Nothing is copied: the slice forwards reads to the trace it views, which must outlive it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "traces/format/trace.hpp"

namespace kvsim {

struct SliceSpec {
  std::vector<int> layers;    // model layer indices to keep (empty = all stored)
  std::vector<int> kv_heads;  // model KV-head indices to keep (empty = all stored)
  int64_t step_begin = 0;     // query rows [step_begin, step_end) of the source
  std::optional<int64_t> step_end;  // empty = to the last row
  bool truncate_tokens = true;      // drop tokens after the last kept query position
  std::string command;              // how the slice was made, appended to the source's command after " | "
};

// Parses "a:b", "a:", ":b" or "a" (one row) into the step range of `spec`; "0,3,5" / "2-5" lists into
// index lists. Errors name `field` and say what is allowed.
void parse_step_range(const std::string& text, SliceSpec& spec, const std::string& field);
std::vector<int> parse_index_list(const std::string& text, const std::string& field);

class SlicedTrace final : public TraceSource {
 public:
  // Throws InputError naming `where` when a requested layer or head is not stored in `base`, or the
  // step range is empty or out of range.
  SlicedTrace(const TraceSource& base, const SliceSpec& spec, const std::string& where);

  const TraceMeta& meta() const override { return meta_; }
  const TraceTokens& tokens() const override { return tokens_; }
  bool has_values() const override { return base_.has_values(); }
  DType storage_dtype() const override { return base_.storage_dtype(); }
  void keys(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void values(int layer_slot, int kv_slot, int64_t t0, int64_t t1, float* out) const override;
  void queries(int layer_slot, int q_slot, int64_t s0, int64_t s1, float* out) const override;

 private:
  const TraceSource& base_;
  TraceMeta meta_;
  TraceTokens tokens_;
  std::vector<int> layer_slots_, kv_slots_, q_slots_;  // slots in base_ of each kept slot
  int64_t step0_ = 0;
};

}  // namespace kvsim
