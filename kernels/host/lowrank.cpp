#include "kernels/host/lowrank.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

namespace kvsim::host {

namespace {
using MatD = Eigen::MatrixXd;
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

ref::LowRankFactors truncated_svd(const float* X, int64_t n, int d, double energy_fraction, int r_max) {
  const MatD A = Eigen::Map<const RowMajorF>(X, n, d).cast<double>();
  const bool wide = n <= d;
  // Eigenvalues ascending; singular values are their square roots, descending.
  const MatD G = wide ? MatD(A * A.transpose()) : MatD(A.transpose() * A);
  Eigen::SelfAdjointEigenSolver<MatD> eig(G);
  const int64_t k = G.rows();
  std::vector<double> sig(static_cast<size_t>(k));
  MatD E(k, k);
  for (int64_t j = 0; j < k; ++j) {
    sig[size_t(j)] = std::sqrt(std::max(0.0, eig.eigenvalues()(k - 1 - j)));
    E.col(j) = eig.eigenvectors().col(k - 1 - j);
  }
  ref::LowRankFactors f = ref::factor_spectrum(sig, n, d, A.squaredNorm(), energy_fraction, r_max);
  const int r = f.rank;
  // U·Σ [n, r] and Vᵀ [r, d].
  MatD US(n, r), Vt(r, d);
  for (int j = 0; j < r; ++j) {
    const double s = sig[size_t(j)];
    if (wide) {  // E = U: U·Σ = σ u, v = Aᵀu / σ
      US.col(j) = E.col(j) * s;
      Vt.row(j) = s > 0 ? Eigen::RowVectorXd((A.transpose() * E.col(j)).transpose() / s)
                        : Eigen::RowVectorXd::Zero(d);
    } else {  // E = V: U·Σ = A v
      US.col(j) = A * E.col(j);
      Vt.row(j) = E.col(j).transpose();
    }
  }
  RowMajorF us = US.cast<float>(), vt = Vt.cast<float>();
  f.us.assign(us.data(), us.data() + us.size());
  f.vt.assign(vt.data(), vt.data() + vt.size());
  return f;
}

std::vector<float> pca_projection(const float* K, int64_t n, int d, int d_proj) {
  d_proj = std::clamp(d_proj, 0, d);
  MatD A = Eigen::Map<const RowMajorF>(K, n, d).cast<double>();
  A.rowwise() -= A.colwise().mean();
  // The covariance [d, d] as a symmetric rank update (half a GEMM's FLOPs); the solver reads the lower
  // triangle only.
  MatD C = MatD::Zero(d, d);
  C.selfadjointView<Eigen::Lower>().rankUpdate(A.transpose());
  Eigen::SelfAdjointEigenSolver<MatD> eig(C);
  const int avail = int(std::min<int64_t>(n, d));  // the reference's thin V has min(n, d) columns
  std::vector<float> W(size_t(d) * d_proj, 0.f);
  for (int j = 0; j < std::min(d_proj, avail); ++j) {
    const auto v = eig.eigenvectors().col(d - 1 - j);
    Eigen::Index arg;
    v.cwiseAbs().maxCoeff(&arg);
    const double sign = v(arg) < 0 ? -1.0 : 1.0;
    for (int i = 0; i < d; ++i) W[size_t(i) * d_proj + j] = float(sign * v(i));
  }
  return W;
}

}  // namespace kvsim::host
