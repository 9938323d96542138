// CTKVR's host kernels, fast and bit-identical to the reference (kernels/reference/ivf.hpp): the qcIVF
// build at prefill and the CPU rerank of every decode step. Both score with exact_dots (dots.hpp), so
// the lists they return are the reference's, id for id. The rerank reads the recalled key rows in place
// (no gather into a copy, which the reference makes): bound by the m·d·4 bytes of the recalled rows.
#pragma once
#include <cstdint>
#include <vector>

namespace kvsim::host {

int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf);

std::vector<int32_t> ctkvr_rerank(const float* q, int G, const float* K, int64_t n, int d, const int32_t* recalled,
                                  int64_t m, float scale, int rho_prime);

}  // namespace kvsim::host
