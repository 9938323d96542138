// SEKV's prefill builders, fast: the truncated SVD of each span's keys/values and the PCA routing
// projection. The reference runs Eigen's BDCSVD on the tall/wide block itself; these take the small
// Gram matrix instead (X·Xᵀ for a span of n <= d tokens, Xᵀ·X otherwise: one n×n or d×d symmetric
// eigenproblem, in double) and recover the other side's vectors by one product. The factors agree with
// the reference's to double rounding relative to the largest singular value (the sign of each
// singular pair may differ; U·Σ·Vᵀ does not): tiny singular values lose accuracy this way, but the rank
// rule keeps the top of the spectrum and the discarded energy is computed as ||X||² minus the kept σ²,
// as in the reference. The PCA projection is the top eigenvectors of the centered covariance, the same
// directions as the reference's right singular vectors, with the same sign rule.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/reference/lowrank.hpp"

namespace kvsim::host {

ref::LowRankFactors truncated_svd(const float* X, int64_t n, int d, double energy_fraction, int r_max);
std::vector<float> pca_projection(const float* K, int64_t n, int d, int d_proj);

}  // namespace kvsim::host
