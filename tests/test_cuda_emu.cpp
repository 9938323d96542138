// The CUDA emulator itself (kernels/emu, kernels/README.md): kernels written here the way a .cu file
// writes them run on the CPU through KVSIM_LAUNCH, and their results are checked against plain host
// arithmetic. Each test could fail: a wrong barrier, shared-memory, shuffle or atomic implementation
// gives a wrong number, and a hang would time the test out instead of throwing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/emu/cuda.hpp"  // the emulator: this file's kernels compile with the C++ compiler
#include "kernels/emu/checker.hpp"
#include "kernels/emu/error.hpp"
#include "kernels/cuda_launch.cuh"
#include "kernels/reference/cuda.hpp"

namespace {

template <class T>
using DBuf = kvsim::ref::cuda_emu::DeviceBuffer<T>;

// ---- kernels ----

// Tree reduction through static shared memory: out[block] = Σ in[block·256 .. +256).
__global__ void block_sum_kernel(const float* in, float* out) {
  __shared__ float partial[256];
  partial[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// Reverses each block's slice through dynamic shared memory, and writes one extra value per block that
// it stored in the second half of the buffer (so both halves of the launch's shared_bytes are used).
__global__ void reverse_kernel(const int* in, int* out, int* extra) {
  KVSIM_DYNAMIC_SHARED(int, tile);
  const unsigned n = blockDim.x, t = threadIdx.x;
  tile[t] = in[blockIdx.x * n + t];
  if (t == 0) tile[n] = int(blockIdx.x) * 1000;
  __syncthreads();
  out[blockIdx.x * n + t] = tile[n - 1 - t];
  if (t == n - 1) extra[blockIdx.x] = tile[n];
}

// Reads a neighbour's shared slot with no barrier in between: a race the emulator must not hide.
__global__ void missing_barrier_kernel(int* out) {
  KVSIM_DYNAMIC_SHARED(int, slot);
  slot[threadIdx.x] = int(threadIdx.x);
  out[threadIdx.x] = slot[(threadIdx.x + 1) % blockDim.x] + slot[(threadIdx.x + blockDim.x - 1) % blockDim.x];
}

// Warp collectives, one output row of 8 values per thread.
__global__ void warp_kernel(const int* in, int* out) {
  const unsigned t = threadIdx.x, lane = t % 32;
  const int v = in[t];
  int butterfly = v;  // every lane gets the warp's sum
  for (int m = 16; m > 0; m >>= 1) butterfly += __shfl_xor_sync(0xffffffffu, butterfly, m);
  int down = v;  // lane 0 gets the warp's sum
  for (unsigned d = 16; d > 0; d >>= 1) down += __shfl_down_sync(0xffffffffu, down, d);
  int scan = v;  // inclusive prefix sum over the lanes
  for (unsigned d = 1; d < 32; d <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, scan, d);
    if (lane >= d) scan += up;
  }
  const int broadcast = __shfl_sync(0xffffffffu, v, 5);
  const int seg_max_lane = __shfl_sync(0xffffffffu, int(lane), 7, 8);  // lane 7 of each 8-lane segment
  const unsigned ballot = __ballot_sync(0xffffffffu, v % 3 == 0);
  const int any = __any_sync(0xffffffffu, v == 40);
  const int all = __all_sync(0xffffffffu, v >= 0);
  int* row = out + t * 8;
  row[0] = butterfly, row[1] = down, row[2] = scan, row[3] = broadcast, row[4] = seg_max_lane;
  row[5] = int(ballot), row[6] = any, row[7] = all;
}

// Double-precision shuffles move all 64 bits.
__global__ void shuffle_double_kernel(const double* in, double* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, in[threadIdx.x], 1);
}

// Many threads of many blocks updating the same words.
__global__ void atomics_kernel(const int* values, int n, int* counter, int* mx, int* mn, float* fsum,
                               unsigned long long* usum, unsigned* hist, int* cas_count, unsigned* ring) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  atomicAdd(counter, 1);
  atomicMax(mx, values[i]);
  atomicMin(mn, values[i]);
  atomicAdd(fsum, float(values[i]));
  atomicAdd(usum, (unsigned long long)(values[i]));
  atomicAdd(&hist[values[i] % 16], 1u);
  int old = *cas_count, seen;  // an increment written as a compare-and-swap loop
  while ((seen = atomicCAS(cas_count, old, old + 1)) != old) old = seen;
  atomicInc(ring, 9u);  // counts 0..9 and wraps
}

// Every thread records where it is: blockIdx, threadIdx, blockDim and gridDim, 3-D.
__global__ void index_kernel(unsigned* out) {
  const unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  unsigned* rec = out + (bx * per_block + tx) * 6;
  rec[0] = blockIdx.x, rec[1] = blockIdx.y, rec[2] = blockIdx.z;
  rec[3] = threadIdx.x, rec[4] = threadIdx.y, rec[5] = threadIdx.z;
  if (bx == 0 && tx == 0) {
    out[0] = gridDim.x * 100 + gridDim.y * 10 + gridDim.z;  // overwrites block (0,0,0) thread (0,0,0): 0s
    out[1] = blockDim.x * 100 + blockDim.y * 10 + blockDim.z;
  }
}

// Each thread advances its own copy of the pointer parameter (as a GPU thread may).
__global__ void param_copy_kernel(int* p) {
  p += threadIdx.x;
  *p = int(threadIdx.x) * 2;
}

template <class T>
__global__ void fill_kernel(T* p, T v, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) p[i] = v;
}

// ---- kernels that are wrong, and must be reported rather than hang or pass ----

__global__ void divergent_barrier_kernel(float* out) {
  if (threadIdx.x < 16) {
    __syncthreads();  // threads 16.. never come: on a GPU this hangs or is undefined
    out[threadIdx.x] = 1.f;
  }
}

__global__ void two_barriers_kernel(float* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.f;
}

__global__ void early_exit_shuffle_kernel(int* out) {
  if (threadIdx.x == 3) return;  // lane 3 leaves, yet the full-warp shuffle below names it
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void foreign_mask_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, int(threadIdx.x), 0);  // lanes 16..31 are not in their mask
}

__global__ void partial_warp_kernel(int* out) {  // 40 threads: the second warp has 8 lanes
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void nested_launch_kernel(int* out) {
  if (threadIdx.x == 0) KVSIM_LAUNCH(fill_kernel, 1, 1)(out, 7, 1);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kvsim::emu::Error& e) {
    return e.what();
  }
  return "(no kvsim::emu::Error)";
}

void expect_no_launch_error() {
  const cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
}

// ---- tests ----

TEST(CudaEmu, BlockReductionThroughSharedMemoryAndSyncthreads) {
  const int blocks = 5;
  std::vector<float> in(blocks * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 97) - 40);  // integers: exact sums
  DBuf<float> din(in), dout(blocks);
  KVSIM_LAUNCH(block_sum_kernel, blocks, 256)(din.get(), dout.get());
  expect_no_launch_error();
  const auto got = dout.download();
  for (int b = 0; b < blocks; ++b)
    EXPECT_EQ(got[size_t(b)], std::accumulate(in.begin() + b * 256, in.begin() + (b + 1) * 256, 0.f)) << b;
}

TEST(CudaEmu, DynamicSharedMemory) {
  const int blocks = 3, threads = 96;
  std::vector<int> in(blocks * threads);
  std::iota(in.begin(), in.end(), 1);
  DBuf<int> din(in), dout(in.size()), dextra(blocks);
  KVSIM_LAUNCH(reverse_kernel, blocks, threads, (threads + 1) * sizeof(int))(din.get(), dout.get(), dextra.get());
  expect_no_launch_error();
  const auto got = dout.download(), extra = dextra.download();
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) EXPECT_EQ(got[size_t(b * threads + t)], in[size_t(b * threads + threads - 1 - t)]);
    EXPECT_EQ(extra[size_t(b)], b * 1000);
  }
  // More dynamic shared memory than a block may have without an opt-in: refused like on a GPU.
  KVSIM_LAUNCH(reverse_kernel, 1, 32, 64 * 1024)(din.get(), dout.get(), dextra.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

TEST(CudaEmu, MissingBarrierIsVisible) {
  // Shared memory is poisoned at block start and rounds run in alternating order: without the barrier
  // some thread reads a slot its neighbour has not written yet. The access checker, where it is on
  // (this file is instrumented like the kernels), reports the race outright at the end of the launch.
  const int n = 64;
  DBuf<int> dout(n);
  try {
    KVSIM_LAUNCH(missing_barrier_kernel, 1, n, n * sizeof(int))(dout.get());
    EXPECT_FALSE(kvsim::emu::checker::enabled()) << "the access checker did not report the race";
  } catch (const kvsim::emu::Error& e) {
    EXPECT_TRUE(kvsim::emu::checker::enabled());
    EXPECT_NE(std::string(e.what()).find("shared-memory race"), std::string::npos) << e.what();
  }
  const auto got = dout.download();
  int wrong = 0;
  for (int t = 0; t < n; ++t) wrong += got[size_t(t)] != (t + 1) % n + (t + n - 1) % n;
  EXPECT_GT(wrong, 0);
}

TEST(CudaEmu, WarpShufflesBallotAnyAll) {
  const int threads = 64;  // two warps
  std::vector<int> in(threads);
  for (int t = 0; t < threads; ++t) in[size_t(t)] = (t * 7) % 23 + (t < 32 ? 0 : 20);
  DBuf<int> din(in), dout(threads * 8);
  KVSIM_LAUNCH(warp_kernel, 1, threads)(din.get(), dout.get());
  expect_no_launch_error();
  const auto got = dout.download();
  for (int w = 0; w < 2; ++w) {
    const auto first = in.begin() + w * 32;
    const int sum = std::accumulate(first, first + 32, 0);
    unsigned ballot = 0;
    bool any = false, all = true;
    for (int l = 0; l < 32; ++l) {
      ballot |= unsigned(first[l] % 3 == 0) << l;
      any = any || first[l] == 40;
      all = all && first[l] >= 0;
    }
    int scan = 0;
    for (int l = 0; l < 32; ++l) {
      const int t = w * 32 + l;
      const int* row = got.data() + t * 8;
      scan += first[l];
      EXPECT_EQ(row[0], sum) << t;
      if (l == 0) {
        EXPECT_EQ(row[1], sum) << t;
      }
      EXPECT_EQ(row[2], scan) << t;
      EXPECT_EQ(row[3], first[5]) << t;
      EXPECT_EQ(row[4], (l / 8) * 8 + 7) << t;
      EXPECT_EQ(unsigned(row[5]), ballot) << t;
      EXPECT_EQ(row[6], int(any)) << t;
      EXPECT_EQ(row[7], int(all)) << t;
    }
  }
  std::vector<double> d(32);
  for (int i = 0; i < 32; ++i) d[size_t(i)] = 1e300 / (i + 1);
  DBuf<double> dd(d), dr(32);
  KVSIM_LAUNCH(shuffle_double_kernel, 1, 32)(dd.get(), dr.get());
  const auto r = dr.download();
  for (int i = 0; i < 32; ++i) EXPECT_EQ(r[size_t(i)], d[size_t(i ^ 1)]);
}

TEST(CudaEmu, AtomicsFromManyThreadsOfManyBlocks) {
  const int n = 1000;
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[size_t(i)] = (i * 37) % 501;
  DBuf<int> dv(v), counter(std::vector<int>{0}), mx(std::vector<int>{-1}), mn(std::vector<int>{1 << 30}),
      cas(std::vector<int>{0});
  DBuf<float> fsum(std::vector<float>{0.f});
  DBuf<unsigned long long> usum(std::vector<unsigned long long>{0});
  DBuf<unsigned> hist(std::vector<unsigned>(16, 0)), ring(std::vector<unsigned>{0});
  KVSIM_LAUNCH(atomics_kernel, (n + 127) / 128, 128)(dv.get(), n, counter.get(), mx.get(), mn.get(), fsum.get(),
                                                     usum.get(), hist.get(), cas.get(), ring.get());
  expect_no_launch_error();
  std::vector<unsigned> want_hist(16, 0);
  for (int x : v) ++want_hist[size_t(x % 16)];
  const long long total = std::accumulate(v.begin(), v.end(), 0LL);
  EXPECT_EQ(counter.download()[0], n);
  EXPECT_EQ(mx.download()[0], *std::max_element(v.begin(), v.end()));
  EXPECT_EQ(mn.download()[0], *std::min_element(v.begin(), v.end()));
  EXPECT_EQ(fsum.download()[0], float(total));  // below 2^24: exact in any order
  EXPECT_EQ(usum.download()[0], (unsigned long long)(total));
  EXPECT_EQ(hist.download(), want_hist);
  EXPECT_EQ(cas.download()[0], n);
  EXPECT_EQ(ring.download()[0], unsigned(n % 10));
}

TEST(CudaEmu, MultiBlockGridWith3DIndices) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const unsigned per_block = 24, blocks = 12;
  DBuf<unsigned> dout(blocks * per_block * 6);
  KVSIM_LAUNCH(index_kernel, grid, block)(dout.get());
  expect_no_launch_error();
  const auto got = dout.download();
  EXPECT_EQ(got[0], 322u);
  EXPECT_EQ(got[1], 432u);
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx) {
              const unsigned b = bx + 3 * (by + 2 * bz), t = tx + 4 * (ty + 3 * tz);
              if (b == 0 && t == 0) continue;
              const unsigned* rec = got.data() + (b * per_block + t) * 6;
              EXPECT_EQ(std::vector<unsigned>(rec, rec + 6), (std::vector<unsigned>{bx, by, bz, tx, ty, tz}));
            }
  // Per-thread parameter copies, and a template kernel deducing its argument through the launch.
  DBuf<int> dp(64);
  KVSIM_LAUNCH(param_copy_kernel, 1, 64)(dp.get());
  const auto p = dp.download();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(p[size_t(t)], 2 * t);
  DBuf<double> df(300);
  KVSIM_LAUNCH(fill_kernel, 3, 128)(df.get(), 2.5, 300);
  EXPECT_EQ(df.download(), std::vector<double>(300, 2.5));
}

TEST(CudaEmu, DivergentBarrierIsAnErrorNotAHang) {
  DBuf<float> dout(64);
  const std::string m = message_of([&] { KVSIM_LAUNCH(divergent_barrier_kernel, 2, 64)(dout.get()); });
  EXPECT_NE(m.find("divergent_barrier_kernel"), std::string::npos) << m;
  EXPECT_NE(m.find("16 of 64 threads wait at __syncthreads"), std::string::npos) << m;
  EXPECT_NE(m.find("48 have exited"), std::string::npos) << m;
  const std::string m2 = message_of([&] { KVSIM_LAUNCH(two_barriers_kernel, 1, 64)(dout.get()); });
  EXPECT_NE(m2.find("at another one"), std::string::npos) << m2;
  // The emulator is usable again afterwards.
  std::vector<float> in(256, 1.f);
  DBuf<float> din(in), dsum(1);
  KVSIM_LAUNCH(block_sum_kernel, 1, 256)(din.get(), dsum.get());
  EXPECT_EQ(dsum.download()[0], 256.f);
}

TEST(CudaEmu, BadWarpCollectivesAreErrors) {
  DBuf<int> dout(64);
  const std::string exited = message_of([&] { KVSIM_LAUNCH(early_exit_shuffle_kernel, 1, 32)(dout.get()); });
  EXPECT_NE(exited.find("__shfl_xor_sync with mask 0xffffffff"), std::string::npos) << exited;
  const std::string foreign = message_of([&] { KVSIM_LAUNCH(foreign_mask_kernel, 1, 32)(dout.get()); });
  EXPECT_NE(foreign.find("does not include itself"), std::string::npos) << foreign;
  const std::string partial = message_of([&] { KVSIM_LAUNCH(partial_warp_kernel, 1, 40)(dout.get()); });
  EXPECT_NE(partial.find("names lanes beyond"), std::string::npos) << partial;
  const std::string nested = message_of([&] { KVSIM_LAUNCH(nested_launch_kernel, 1, 32)(dout.get()); });
  EXPECT_NE(nested.find("dynamic parallelism"), std::string::npos) << nested;
  EXPECT_NE(message_of([] { __syncthreads(); }).find("outside a kernel"), std::string::npos);
}

TEST(CudaEmu, LaunchAndRuntimeErrorsLikeAGpu) {
  DBuf<int> d(10);
  KVSIM_LAUNCH(fill_kernel, 1, 1025)(d.get(), 1, 10);  // more than 1024 threads per block
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  KVSIM_LAUNCH(fill_kernel, 0, 32)(d.get(), 1, 10);  // an empty grid
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read and cleared
  std::vector<int> host(10);
  const std::string m = message_of([&] { KVSIM_LAUNCH(fill_kernel, 1, 32)(host.data(), 1, 10); });
  EXPECT_NE(m.find("argument 0 points to host memory"), std::string::npos) << m;

  int* p = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), 10 * sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), 11 * sizeof(int), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(p + 5, 0, 6 * sizeof(int)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(p + 5, 0, 5 * sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // twice
  cudaGetLastError();

  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);  // not recorded yet
  EXPECT_EQ(cudaEventRecord(a, s), cudaSuccess);
  KVSIM_LAUNCH(fill_kernel, 1, 32, 0, s)(d.get(), 3, 10);
  EXPECT_EQ(cudaEventRecord(b, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.f);
  EXPECT_EQ(d.download(), std::vector<int>(10, 3));
  EXPECT_EQ(cudaEventDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(b), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}

}  // namespace
