#include "kernels/host/gather.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/reference/gather.hpp"

namespace kvsim::host {

int64_t gather_rows(const float* src, int64_t n_rows, int64_t row_elems, const int32_t* idx, int64_t m, float* dst) {
  int64_t runs = 0;
  const size_t row_bytes = size_t(row_elems) * sizeof(float);
  for (int64_t j = 0; j < m;) {
    const int32_t first = idx[j];
    if (first < 0 || first >= n_rows)
      throw std::out_of_range("gather_rows: index " + std::to_string(first) + " outside [0, " +
                              std::to_string(n_rows) + ")");
    int64_t len = 1;
    while (j + len < m && idx[j + len] == first + len && first + len < n_rows) ++len;
    std::memcpy(dst + j * row_elems, src + int64_t(first) * row_elems, size_t(len) * row_bytes);
    j += len;
    ++runs;
  }
  return runs;
}

int64_t dedup_inplace(int32_t* ids, int64_t n) {
  if (n <= 1) return n;
  const auto [lo, hi] = std::minmax_element(ids, ids + n);
  if (*lo < 0 || int64_t(*hi) > 64 * n) return ref::dedup_inplace(ids, n);
  thread_local std::vector<uint64_t> bits;
  const size_t words = size_t(*hi) / 64 + 1;
  bits.assign(words, 0);
  for (int64_t i = 0; i < n; ++i) bits[size_t(ids[i]) >> 6] |= uint64_t(1) << (ids[i] & 63);
  int64_t out = 0;
  for (size_t w = 0; w < words; ++w)
    for (uint64_t b = bits[w]; b; b &= b - 1) ids[out++] = int32_t(w * 64 + size_t(__builtin_ctzll(b)));
  return out;
}

}  // namespace kvsim::host
