#include "kernels/reference/gather.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvsim::ref {

std::vector<int32_t> dedup(std::span<const int32_t> ids) {
  std::vector<int32_t> out(ids.begin(), ids.end());
  out.resize(size_t(dedup_inplace(out.data(), int64_t(out.size()))));
  return out;
}

int64_t dedup_inplace(int32_t* ids, int64_t n) {
  std::sort(ids, ids + n);
  return std::unique(ids, ids + n) - ids;
}

namespace {
void check(int64_t i, int64_t n_rows, const char* who) {
  if (i < 0 || i >= n_rows)
    throw std::out_of_range(std::string(who) + ": index " + std::to_string(i) + " outside [0, " + std::to_string(n_rows) + ")");
}
}  // namespace

void gather_rows(const float* src, int64_t n_rows, int64_t row_elems, const int32_t* idx, int64_t m, float* dst) {
  for (int64_t i = 0; i < m; ++i) {
    check(idx[i], n_rows, "gather_rows");
    std::copy_n(src + int64_t(idx[i]) * row_elems, row_elems, dst + i * row_elems);
  }
}

int64_t gather_runs(const float* src, int64_t n_rows, int64_t row_elems, std::span<const int32_t> starts,
                    std::span<const int32_t> lens, float* dst) {
  if (starts.size() != lens.size()) throw std::invalid_argument("gather_runs: starts and lens differ in size");
  int64_t written = 0;
  for (size_t r = 0; r < starts.size(); ++r) {
    if (lens[r] < 0) throw std::invalid_argument("gather_runs: negative run length " + std::to_string(lens[r]));
    if (lens[r] == 0) continue;
    check(starts[r], n_rows, "gather_runs");
    check(int64_t(starts[r]) + lens[r] - 1, n_rows, "gather_runs");
    std::copy_n(src + int64_t(starts[r]) * row_elems, int64_t(lens[r]) * row_elems, dst + written * row_elems);
    written += lens[r];
  }
  return written;
}

void scatter_rows(const float* src, int64_t m, int64_t row_elems, const int32_t* idx, float* dst, int64_t n_rows) {
  for (int64_t i = 0; i < m; ++i) {
    check(idx[i], n_rows, "scatter_rows");
    std::copy_n(src + i * row_elems, row_elems, dst + int64_t(idx[i]) * row_elems);
  }
}

}  // namespace kvsim::ref
