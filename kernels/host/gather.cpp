#include "kernels/host/gather.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

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

}  // namespace kvsim::host
