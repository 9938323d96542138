#include "kernels/reference/lowrank.hpp"

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>
#include <random>

namespace kvsim::ref {

namespace {
using MatD = Eigen::MatrixXd;
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

MatD load(const float* X, int64_t n, int d) { return Eigen::Map<const RowMajorF>(X, n, d).cast<double>(); }

// Fill the factors from U[n, ≥r], σ, V[d, ≥r] (column vectors).
LowRankFactors pack(const MatD& U, const Eigen::VectorXd& s, const MatD& V, int64_t n, int d, double total,
                    double energy_fraction, int r_max) {
  LowRankFactors f = factor_spectrum(std::vector<double>(s.data(), s.data() + s.size()), n, d, total,
                                     energy_fraction, r_max);
  const int r = f.rank;
  RowMajorF us = (U.leftCols(r) * s.head(r).asDiagonal()).cast<float>();
  RowMajorF vt = V.leftCols(r).transpose().cast<float>();
  f.us.assign(us.data(), us.data() + us.size());
  f.vt.assign(vt.data(), vt.data() + vt.size());
  return f;
}
}  // namespace

int choose_rank(const std::vector<double>& sigma, double total_energy, double energy_fraction, int r_cap) {
  const int cap = std::clamp<int>(r_cap, 0, int(sigma.size()));
  if (total_energy <= 0) return 0;
  const double target = std::clamp(energy_fraction, 0.0, 1.0) * total_energy;
  double kept = 0;
  for (int r = 0; r < cap; ++r) {
    if (kept >= target * (1 - 1e-12)) return r;
    kept += sigma[size_t(r)] * sigma[size_t(r)];
  }
  return cap;
}

LowRankFactors factor_spectrum(const std::vector<double>& sigma, int64_t n, int d, double total_energy,
                               double energy_fraction, int r_max) {
  LowRankFactors f;
  f.rows = n;
  f.cols = d;
  f.total_energy = total_energy;
  f.rank = choose_rank(sigma, total_energy, energy_fraction, int(std::min<int64_t>({r_max, n, d})));
  double kept = 0;
  for (int i = 0; i < f.rank; ++i) {
    f.sigma.push_back(float(sigma[size_t(i)]));
    kept += sigma[size_t(i)] * sigma[size_t(i)];
  }
  f.discarded_energy = std::max(0.0, total_energy - kept);
  return f;
}

LowRankFactors truncated_svd(const float* X, int64_t n, int d, double energy_fraction, int r_max) {
  const MatD A = load(X, n, d);
  Eigen::BDCSVD<MatD> svd(A, Eigen::ComputeThinU | Eigen::ComputeThinV);
  return pack(svd.matrixU(), svd.singularValues(), svd.matrixV(), n, d, A.squaredNorm(), energy_fraction, r_max);
}

LowRankFactors randomized_svd(const float* X, int64_t n, int d, double energy_fraction, int r_max, int oversample,
                              int power_iters, uint64_t seed) {
  const MatD A = load(X, n, d);
  const int64_t ell = std::max<int64_t>(1, std::min<int64_t>({int64_t(r_max) + std::max(oversample, 0), n, d}));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  MatD omega(d, ell);
  for (int64_t j = 0; j < ell; ++j)
    for (int i = 0; i < d; ++i) omega(i, j) = g(rng);
  auto orth = [](const MatD& Y) -> MatD {
    Eigen::HouseholderQR<MatD> qr(Y);
    return qr.householderQ() * MatD::Identity(Y.rows(), Y.cols());
  };
  MatD Q = orth(A * omega);
  for (int it = 0; it < power_iters; ++it) Q = orth(A * orth(A.transpose() * Q));
  const MatD B = Q.transpose() * A;  // [ell, d]
  Eigen::JacobiSVD<MatD> svd(B, Eigen::ComputeThinU | Eigen::ComputeThinV);
  return pack(Q * svd.matrixU(), svd.singularValues(), svd.matrixV(), n, d, A.squaredNorm(), energy_fraction, r_max);
}

std::vector<float> pca_projection(const float* K, int64_t n, int d, int d_proj) {
  d_proj = std::clamp(d_proj, 0, d);
  MatD A = load(K, n, d);
  A.rowwise() -= A.colwise().mean();
  Eigen::BDCSVD<MatD> svd(A, Eigen::ComputeThinV);
  MatD V = svd.matrixV();  // [d, min(n, d)] right singular vectors, by decreasing σ
  std::vector<float> W(size_t(d) * d_proj, 0.f);
  for (int j = 0; j < std::min<int>(d_proj, int(V.cols())); ++j) {
    Eigen::Index arg;
    V.col(j).cwiseAbs().maxCoeff(&arg);
    const double sign = V(arg, j) < 0 ? -1.0 : 1.0;
    for (int i = 0; i < d; ++i) W[size_t(i) * d_proj + j] = float(sign * V(i, j));
  }
  return W;
}

void lowrank_reconstruct(const float* us, const float* vt, int64_t n, int r, int d, float* out) {
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < d; ++c) {
      float s = 0.f;
      for (int j = 0; j < r; ++j) s += us[i * r + j] * vt[int64_t(j) * d + c];
      out[i * d + c] = s;
    }
}

void lowrank_reconstruct(const LowRankFactors& f, float* out) {
  lowrank_reconstruct(f.us.data(), f.vt.data(), f.rows, f.rank, f.cols, out);
}

}  // namespace kvsim::ref
