// The simple CUDA reference kernels (and, appended, the optimized ones: cuda_optimized_cases.cpp) as
// validation cases (`kvsim validate --device cuda`), timed with
// CUDA events, one instance at a time. Compiled everywhere; without CUDA built in the list is empty
// (and `kvsim validate --device cuda` stops before it, saying there is no CUDA device).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>

#include "validate/cuda_inputs.hpp"
#include "validate/validate.hpp"
#if defined(KVSIM_HAVE_CUDA)
#include "kernels/reference/cuda.hpp"
#endif

namespace kvsim::validate {

#if defined(KVSIM_HAVE_CUDA)
namespace {
using Vec = std::vector<float>;
template <class T>
using DBuf = ref::cuda::DeviceBuffer<T>;
constexpr int D = 128, G = 4;
constexpr double kRow = D * 4.0;
const float kScale = 1.f / std::sqrt(float(D));

Case cuda_decode_attention() {
  Case c{"cuda_decode_attention", false, PhaseKind::attention, CurveVariable::context_tokens,
         "cuda::decode_attention (one block per query row, GQA group 4)", {4096, 16384, 65536, 262144}, 4096, nullptr};
  c.make = [](double s, int, double cold) {
    const int64_t n = int64_t(s);
    Instance in = cycled(2.0 * n * kRow, cold, 0, [=](uint32_t seed) {
      auto K = device_random(size_t(n) * D, seed), V = device_random(size_t(n) * D, seed + 1);
      auto Q = device_random(G * D, seed + 2);
      auto out = std::make_shared<DBuf<float>>(size_t(G) * D), lse = std::make_shared<DBuf<float>>(size_t(G));
      return [=] { ref::cuda::decode_attention(Q->get(), G, K->get(), V->get(), n, D, kScale, out->get(), lse->get()); };
    }, 64);
    in.work.flops = G * double(n) * (4 * D + 5);
    in.work.hbm_bytes = 2.0 * double(n) * kRow;
    in.context_tokens = double(n);
    return in;
  };
  return c;
}

Case cuda_gather() {
  Case c{"cuda_gather", true, PhaseKind::gather, CurveVariable::run_bytes,
         "cuda::gather_rows (runs of run_bytes, 64 MiB gathered from 256 MiB)", {256, 1024, 4096, 16384, 65536}, 1024,
         nullptr};
  c.make = [](double s, int, double cold) {
    const int64_t row = std::max<int64_t>(1, int64_t(s / 4)), total = (int64_t(64) << 20) / 4;
    const int64_t m = total / row, src_rows = 4 * m;
    Instance in = cycled(double(src_rows + m) * row * 4, cold, 0, [=](uint32_t seed) {
      auto src = device_random(size_t(src_rows * row), seed);
      std::vector<int32_t> idx(static_cast<size_t>(src_rows));
      std::iota(idx.begin(), idx.end(), 0);
      std::shuffle(idx.begin(), idx.end(), std::mt19937(seed));
      idx.resize(size_t(m));
      auto didx = std::make_shared<DBuf<int32_t>>(idx);
      auto dst = std::make_shared<DBuf<float>>(size_t(m * row));
      return [=] { ref::cuda::gather_rows(src->get(), row, didx->get(), m, dst->get()); };
    }, 64);
    in.work.hbm_bytes = 2.0 * double(m * row) * 4;
    in.run_bytes = double(row) * 4;
    return in;
  };
  return c;
}

Case cuda_score() {
  Case c{"cuda_score", false, PhaseKind::score, CurveVariable::bytes, "cuda::score_gemm (4 queries, one thread per score)",
         {65536, 262144, 1048576}, 65536, nullptr};
  c.make = [](double s, int, double cold) {
    const int64_t n = int64_t(s);
    Instance in = cycled(double(n) * kRow, cold, 0, [=](uint32_t seed) {
      auto M = device_random(size_t(n) * D, seed), Q = device_random(G * D, seed + 1);
      auto S = std::make_shared<DBuf<float>>(size_t(G) * n);
      return [=] { ref::cuda::score_gemm(Q->get(), G, M->get(), n, D, S->get(), false, kScale); };
    }, 64);
    in.work.flops = G * double(n) * (2 * D + 2);
    in.work.hbm_bytes = double(n) * kRow + G * double(n) * 4;
    return in;
  };
  return c;
}

Case cuda_page_means() {
  Case c{"cuda_page_means", false, PhaseKind::build, CurveVariable::bytes,
         "cuda::segment_weighted_mean (pages of 16, unweighted)", {65536, 262144, 1048576}, 65536, nullptr};
  c.make = [](double s, int, double cold) {
    const int64_t n = int64_t(s), P = n / 16;
    Instance in = cycled(double(n) * kRow, cold, 0, [=](uint32_t seed) {
      auto X = device_random(size_t(n) * D, seed);
      std::vector<int32_t> st(static_cast<size_t>(P));
      for (int64_t p = 0; p < P; ++p) st[size_t(p)] = int32_t(p * 16);
      auto dst = std::make_shared<DBuf<int32_t>>(st);
      auto out = std::make_shared<DBuf<float>>(size_t(P) * D);
      return [=] { ref::cuda::segment_weighted_mean(X->get(), nullptr, n, D, dst->get(), P, out->get()); };
    }, 64);
    in.work.flops = double(n) * D;
    in.work.hbm_bytes = double(n) * kRow * (1 + 1.0 / 16);
    return in;
  };
  return c;
}

Case cuda_h2d_copy() {
  Case c{"cuda_h2d_copy", false, PhaseKind::copy, CurveVariable::bytes,
         "cudaMemcpyAsync host-to-device from pinned memory", {65536, 1048576, 16777216, 268435456}, 1048576, nullptr};
  c.make = [](double s, int, double) {
    const size_t n = size_t(s);
    auto host = std::shared_ptr<void>(ref::cuda::pinned_alloc(n), ref::cuda::pinned_free);
    auto dev = std::make_shared<DBuf<char>>(n);
    Instance in;
    in.run = [=] { ref::cuda::copy_h2d(dev->get(), host.get(), n); };
    in.work.h2d_bytes = double(n);
    return in;
  };
  return c;
}
}  // namespace

std::vector<Case> cuda_cases() {
  std::vector<Case> all = {cuda_decode_attention(), cuda_gather(), cuda_score(), cuda_page_means(), cuda_h2d_copy()};
  for (Case& c : cuda_optimized_cases()) all.push_back(std::move(c));
  return all;
}

Timer cuda_timer() {
  return [](const std::vector<Instance>& inst, int inner, int samples) {
    std::vector<double> out;
    for (int s = 0; s < samples; ++s)
      out.push_back(ref::cuda::event_seconds([&] {
                      for (int k = 0; k < inner; ++k) inst[0].run();
                    }) /
                    inner);
    return out;
  };
}
#else
std::vector<Case> cuda_cases() { return {}; }
Timer cuda_timer() {
  return [](const std::vector<Instance>&, int, int) -> std::vector<double> {
    throw std::runtime_error("kvsim was built without CUDA");
  };
}
#endif

}  // namespace kvsim::validate
