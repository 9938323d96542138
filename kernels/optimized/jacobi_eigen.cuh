// The symmetric eigenproblem in double by cyclic Jacobi rotations, as one device thread's sequential code
// (kernels/optimized/sekv.cu's PCA and span_svd.cu's Gram matrices). Why Jacobi: no library on the device,
// it needs nothing but the matrix and its rotations, and its eigenvectors are accurate to double rounding
// relative to the largest eigenvalue — so PCA directions and span factors agree with the host's Eigen
// solver to ~1e-13, far below the float rounding of what is stored. Why one thread: the matrices are small
// (d×d = 64×64, or |S|×|S| for a short span) and a block-parallel rotation needs a barrier per rotation,
// which costs more than it saves at these sizes (and dominates under the CUDA emulator).
#pragma once

#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND::jacobi {

// A[k, k] symmetric (row-major; destroyed: its diagonal ends as the eigenvalues), V[k, k] out: the
// eigenvectors as columns. order[k] out: column indices by decreasing eigenvalue (ties by the lower index).
__device__ inline void eigen(double* A, double* V, int k, int* order) {
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < k; ++j) V[i * k + j] = i == j ? 1.0 : 0.0;
  for (int sweep = 0; sweep < 64; ++sweep) {
    double off = 0, diag = 0;
    for (int i = 0; i < k; ++i) {
      diag += A[i * k + i] * A[i * k + i];
      for (int j = i + 1; j < k; ++j) off += A[i * k + j] * A[i * k + j];
    }
    if (off <= 1e-32 * diag || off == 0) break;  // converged to double rounding
    for (int p = 0; p < k; ++p)
      for (int q = p + 1; q < k; ++q) {
        const double apq = A[p * k + q];
        if (apq == 0) continue;
        const double theta = (A[q * k + q] - A[p * k + p]) / (2 * apq);
        const double t = fabs(theta) > 1e150 ? 0.5 / theta
                                             : (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
        const double c = 1 / sqrt(t * t + 1), s = t * c;
        for (int r = 0; r < k; ++r) {  // A·J: columns p and q
          const double arp = A[r * k + p], arq = A[r * k + q];
          A[r * k + p] = c * arp - s * arq;
          A[r * k + q] = s * arp + c * arq;
        }
        for (int r = 0; r < k; ++r) {  // Jᵀ·A: rows p and q
          const double apr = A[p * k + r], aqr = A[q * k + r];
          A[p * k + r] = c * apr - s * aqr;
          A[q * k + r] = s * apr + c * aqr;
        }
        for (int r = 0; r < k; ++r) {  // V·J
          const double vrp = V[r * k + p], vrq = V[r * k + q];
          V[r * k + p] = c * vrp - s * vrq;
          V[r * k + q] = s * vrp + c * vrq;
        }
      }
  }
  for (int i = 0; i < k; ++i) order[i] = i;
  for (int i = 0; i < k; ++i) {  // selection sort, descending, ties by the lower index (k is small)
    int best = i;
    for (int j = i + 1; j < k; ++j) {
      const double a = A[order[j] * k + order[j]], b = A[order[best] * k + order[best]];
      if (a > b || (a == b && order[j] < order[best])) best = j;
    }
    const int tmp = order[i];
    order[i] = order[best];
    order[best] = tmp;
  }
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND::jacobi
