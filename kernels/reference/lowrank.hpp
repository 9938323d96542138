// Low-rank factorization of a block X[n, d] (SEKV's span keys/values) and its reconstruction
// (host reference; Eigen does the SVDs, in double).
// Rank rule (untrained stand-in for SEKV's learned rank gates): the smallest r whose kept spectral
// energy Σ_{i<=r} σ_i² reaches energy_fraction · ||X||_F², capped at min(r_max, n, d). An all-zero
// block has rank 0.
#pragma once
#include <cstdint>
#include <vector>

namespace kvsim::ref {

struct LowRankFactors {
  int64_t rows = 0;  // n
  int cols = 0;      // d
  int rank = 0;      // r
  std::vector<float> us;     // U·Σ, [n, r] row-major
  std::vector<float> vt;     // Vᵀ, [r, d] row-major
  std::vector<float> sigma;  // σ_1 >= ... >= σ_r
  double total_energy = 0;      // ||X||_F²
  double discarded_energy = 0;  // ||X||_F² - Σ_{i<=r} σ_i² (for the exact SVD: Σ_{i>r} σ_i²)
};

// The rank rule above, given all singular values (descending) and ||X||_F².
int choose_rank(const std::vector<double>& sigma, double total_energy, double energy_fraction, int r_cap);

// Everything of LowRankFactors but us/vt for an [n, d] block: the rank by the rule above (capped by
// min(r_max, n, d)), the kept σ and the energies. Shared by every way of computing the SVD.
LowRankFactors factor_spectrum(const std::vector<double>& sigma, int64_t n, int d, double total_energy,
                               double energy_fraction, int r_max);

// Exact truncated SVD (Eigen::BDCSVD). ||X - U Σ Vᵀ||_F² = discarded_energy.
LowRankFactors truncated_svd(const float* X, int64_t n, int d, double energy_fraction, int r_max);

// Randomized truncated SVD (Halko et al.): Gaussian test matrix Ω[d, ℓ] from `seed`,
// ℓ = min(r_max + oversample, n, d); Y = XΩ, `power_iters` subspace iterations with re-orthonormalization,
// Q = orth(Y), B = QᵀX, SVD of the small B, U = Q·U_B. The rank rule uses the sketch's σ against the true
// ||X||_F²; discarded_energy = ||X||_F² - Σ kept σ² is still exactly ||X - U Σ Vᵀ||_F² (U has
// orthonormal columns and U Σ Vᵀ = U Uᵀ X).
LowRankFactors randomized_svd(const float* X, int64_t n, int d, double energy_fraction, int r_max,
                              int oversample = 8, int power_iters = 2, uint64_t seed = 0);

// PCA projection (SEKV's untrained stand-in for its trained routing projection W, brief): the top
// d_proj principal directions of the rows of K[n, d] (centered), as W[d, d_proj] row-major, so a
// query or key projects as x' = x·W. Directions are unit vectors, ordered by variance, each with its
// sign fixed so that its largest-magnitude component is positive (deterministic). d_proj <= d.
std::vector<float> pca_projection(const float* K, int64_t n, int d, int d_proj);

// out[n, d] = (U·Σ)[n, r] · Vᵀ[r, d].
void lowrank_reconstruct(const float* us, const float* vt, int64_t n, int r, int d, float* out);
void lowrank_reconstruct(const LowRankFactors& f, float* out);

}  // namespace kvsim::ref
