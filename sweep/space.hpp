// The points of a sweep, numbered 0..size()-1 without materializing them: policies in the sweep's
// order, then the axis groups that apply to that policy as a mixed-radix counter (the first group
// varies slowest). A point's number is its place in the results file; a shard owns the points whose
// number is congruent to its index, so any subset of shards merges back into the same order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sweep/spec.hpp"

namespace kvsim::sweep {

// `--shard i/N`: points with number % N == i (round robin, so slow policies spread over shards).
struct Shard {
  uint64_t index = 0, count = 1;
  bool owns(uint64_t point) const { return point % count == index; }
  // Points of this shard among `total`.
  uint64_t size(uint64_t total) const { return total > index ? (total - index + count - 1) / count : 0; }
  uint64_t point(uint64_t local) const { return index + local * count; }
};
// Parses "i/N" (0 <= i < N); errors name the option and the value.
Shard parse_shard(const std::string& text);

// Where a point lies: its policy (index into the sweep's policies) and one digit per axis group
// (0 for groups that do not apply to that policy).
struct Coords {
  size_t policy = 0;
  std::vector<uint32_t> digit;
};

class PointSpace {
 public:
  explicit PointSpace(const SweepSpec& spec);
  uint64_t size() const { return total_; }
  void decode(uint64_t point, Coords& c) const;

  // Deployment combinations: the mixed-radix number of the digits of the groups holding deployment
  // fields (every policy shares them).
  size_t combo_count() const { return combos_; }
  size_t combo_of(const Coords& c) const;
  void combo_digits(size_t combo, std::vector<uint32_t>& digit) const;  // sets only deployment groups' digits

 private:
  const SweepSpec* spec_;
  std::vector<uint64_t> offset_;                    // first point of each policy (size policies + 1)
  std::vector<std::vector<size_t>> groups_of_;      // per policy: the groups that apply, slowest first
  std::vector<size_t> deploy_groups_;
  uint64_t total_ = 0;
  size_t combos_ = 1;
};

}  // namespace kvsim::sweep
