// Google Benchmarks of the optimized CUDA kernels on a real GPU (`kvsim bench --benchmark_filter=Cuda`),
// registered by `kvsim bench` (register_cuda_benchmarks, before the run, so no other command touches the
// CUDA runtime) only when kvsim is built with nvcc and a GPU is present (under the emulator a timing
// means nothing). Timed with CUDA events (manual time). Counters: bytes_per_second of K/V read and hbm_frac,
// that rate as a fraction of the GPU's library HBM bandwidth (the datasheet's, scenarios/hardware/).
//
// BM_CudaPagedDecode/tokens:<n>/splits:<s>/lane_floats:<f>: one request, Llama-3-8B's
// attention per GPU (32 query heads on 8 KV heads of 128, pages of 16), splits = 0 for the planner's
// choice, else the KV split count asked for (what the split planner's target, blocks per SM, is chosen
// from); lane_floats the floats of the head dimension per lane (PagedDecodeParams; 0 = the default).
#include "tools/bench/bench_cuda.hpp"

#include <benchmark/benchmark.h>

#if defined(KVSIM_HAVE_CUDA)
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda_device.hpp"
#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda.hpp"
#include "validate/gpu_kit.hpp"

namespace {
namespace R = kvsim::ref::cuda;
namespace O = kvsim::opt::cuda;

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::minstd_rand rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// The HBM bandwidth of the library GPU this device is (the kit's match), 0 when none or several match.
double library_hbm_bytes_per_second() {
  try {
    return kvsim::validate::library_gpu_of(kvsim::cuda::devices().at(0)).hbm_bandwidth;
  } catch (const std::exception&) {
    return 0;
  }
}

constexpr int kHq = 32, kHkv = 8, kD = 128, kPage = 16;

// The K/V cache and query of the last context length asked for, kept across the benchmark's instances:
// filling a 128K-token cache (1 GiB) on the host takes seconds, and every instance at that length reads
// the same one.
struct DecodeInputs {
  int64_t tokens = -1;
  std::unique_ptr<R::DeviceBuffer<float>> K, V, q;
};
const DecodeInputs& decode_inputs(int64_t n) {
  static DecodeInputs in;
  if (in.tokens != n) {
    in = DecodeInputs{};  // the old buffers go before the new ones are made
    const size_t cache = size_t((n + kPage - 1) / kPage) * kPage * kHkv * kD;
    in.K = std::make_unique<R::DeviceBuffer<float>>(uniform(cache, 1));
    in.V = std::make_unique<R::DeviceBuffer<float>>(uniform(cache, 2));
    in.q = std::make_unique<R::DeviceBuffer<float>>(uniform(size_t(kHq) * kD, 3));
    in.tokens = n;
  }
  return in;
}

void BM_CudaPagedDecode(benchmark::State& state) {
  const int64_t n = state.range(0), pages = (n + kPage - 1) / kPage;
  const DecodeInputs& in = decode_inputs(n);
  const R::DeviceBuffer<float>&K = *in.K, &V = *in.V, &q = *in.q;
  std::vector<int32_t> idx(static_cast<size_t>(pages));
  std::iota(idx.begin(), idx.end(), 0);
  R::DeviceBuffer<int32_t> dptr(std::vector<int32_t>{0, int32_t(pages)}), didx(idx),
      dlast(std::vector<int32_t>{int32_t(n - (pages - 1) * kPage)});
  R::DeviceBuffer<float> out(size_t(kHq) * kD), lse{size_t(kHq)};
  kvsim::opt::PagedDecodeParams p;
  p.q = q.get(), p.k_pages = K.get(), p.v_pages = V.get(), p.indptr = dptr.get(), p.indices = didx.get();
  p.last_page_len = dlast.get(), p.out = out.get(), p.lse = lse.get();
  p.batch = 1, p.num_qo_heads = kHq, p.num_kv_heads = kHkv, p.head_dim = kD, p.page_size = kPage;
  p.scale = 1.f / std::sqrt(float(kD)), p.max_pages_per_request = int(pages);
  if (state.range(1) > 0) p.pages_per_split = int((pages + state.range(1) - 1) / state.range(1));
  p.lane_floats = int(state.range(2));
  R::DeviceBuffer<float> ws(size_t(std::max<int64_t>(1, O::paged_decode_workspace_floats(p))));
  p.workspace = ws.get();
  for (auto _ : state) state.SetIterationTime(R::event_seconds([&] { O::paged_decode_attention(p); }));
  const double bytes = 2.0 * double(n) * kHkv * kD * 4;
  state.SetBytesProcessed(int64_t(bytes * double(state.iterations())));
  state.counters["splits"] = O::paged_decode_splits(p);
  if (const double hbm = library_hbm_bytes_per_second(); hbm > 0)
    state.counters["hbm_frac"] = benchmark::Counter(bytes / hbm * double(state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace
#endif

namespace kvsim::bench {
void register_cuda_benchmarks() {
#if defined(KVSIM_HAVE_CUDA)
  if (kvsim::cuda::devices().empty()) return;
  auto* b = benchmark::RegisterBenchmark("BM_CudaPagedDecode", BM_CudaPagedDecode);
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
  b->ArgNames({"tokens", "splits", "lane_floats"});
  // The split count at the default lane width, then each lane width at the planner's split count and at
  // twice it.
  for (int64_t n : {16384, 131072}) {
    for (int64_t splits : {0, 17, 33, 66, 132, 264, 528}) b->Args({n, splits, 0});
    for (int64_t lane_floats : {4, 8})
      for (int64_t splits : {0, 132}) b->Args({n, splits, lane_floats});
  }
#endif
}
}  // namespace kvsim::bench
