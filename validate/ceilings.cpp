// The host's ceilings measured the way `kvsim validate` times its kernels — the same kernels as
// `kvsim host probe` (STREAM triad, Eigen SGEMM), one instance per thread at once, short samples,
// median — so that a kernel and the ceiling it is a fraction of see the same machine load. (The probe
// reports the best of long repeats, the right statistic for a library profile of an idle machine.)
#include <Eigen/Dense>
#include <algorithm>
#include <memory>
#include <vector>

#include "validate/validate.hpp"

namespace kvsim::validate {
namespace {
double median_seconds(const std::vector<Instance>& inst, const Timer& timer, const Options& o) {
  (void)timer(inst, 1, 1);  // warm-up
  std::vector<double> s = timer(inst, 1, std::max(o.quick ? 1 : 3 * o.min_repeats, 1));
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}
}  // namespace

HostCeilingsMeasured measure_host_ceilings(int threads, const Timer& timer, const Options& o) {
  // Triad a = b + 3c on arrays cycled like the kernels' inputs: cold_bytes per thread in 4 MiB slices.
  const size_t n = size_t(1) << 19;  // doubles per array: 4 MiB
  const int copies = o.quick ? 1 : std::max(1, int(o.cold_bytes / (3.0 * n * sizeof(double))));
  std::vector<Instance> triad, gemm;
  for (int t = 0; t < threads; ++t) {
    auto arrays = std::make_shared<std::vector<std::vector<double>>>();
    for (int c = 0; c < 3 * copies; ++c) arrays->emplace_back(n, 1.0 + c);
    auto next = std::make_shared<int>(0);
    Instance in;
    in.run = [arrays, next, copies] {
      const int c = (*next)++ % copies;
      double* __restrict a = (*arrays)[size_t(3 * c)].data();
      const double* __restrict b = (*arrays)[size_t(3 * c + 1)].data();
      const double* __restrict d = (*arrays)[size_t(3 * c + 2)].data();
      for (size_t k = 0; k < (*arrays)[0].size(); ++k) a[k] = b[k] + 3.0 * d[k];
    };
    triad.push_back(in);
    const int m = 256;
    auto A = std::make_shared<Eigen::MatrixXf>(Eigen::MatrixXf::Random(m, m));
    auto B = std::make_shared<Eigen::MatrixXf>(Eigen::MatrixXf::Random(m, m));
    auto C = std::make_shared<Eigen::MatrixXf>(Eigen::MatrixXf::Zero(m, m));
    Instance g;
    g.run = [A, B, C] { C->noalias() = (*A) * (*B); };
    gemm.push_back(g);
  }
  Eigen::setNbThreads(1);
  HostCeilingsMeasured h;
  h.dram_bandwidth = 3.0 * n * sizeof(double) * threads / median_seconds(triad, timer, o);
  h.fp32 = 2.0 * 256 * 256 * 256.0 * threads / median_seconds(gemm, timer, o);
  return h;
}

}  // namespace kvsim::validate
