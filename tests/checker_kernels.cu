// The kernels of tests/checker_kernels.hpp. Compiled through the CUDA emulator only (CMakeLists.txt:
// kvsim_test_kernels_emu), with the access checker's instrumentation like every kernels/**/*.cu.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_launch.cuh"
#include "tests/checker_kernels.hpp"

namespace kvsim::test::checker_kernels {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}

// A device buffer for the launchers below (the reference build's DeviceBuffer is in another namespace).
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { check(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)), "malloc"); }
  Dev(const std::vector<T>& v, size_t copied) : Dev(v.size()) {
    if (copied) check(cudaMemcpy(p, v.data(), copied * sizeof(T), cudaMemcpyHostToDevice), "copy");
  }
  explicit Dev(const std::vector<T>& v) : Dev(v, v.size()) {}
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> get() const {
    std::vector<T> v(n);
    check(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "copy back");
    return v;
  }
  void zero() { check(cudaMemset(p, 0, n * sizeof(T)), "memset"); }
};

void launched(const char* what) {
  check(cudaGetLastError(), what);
  check(cudaDeviceSynchronize(), what);
}

__global__ void neighbour_exchange_kernel(int* out, bool fault) {
  __shared__ int slot[64];
  const unsigned t = threadIdx.x;
  slot[t] = int(t) * 3;  // planted: exchange-write
  if (!fault) __syncthreads();
  out[t] = slot[(t + 33) % 64];  // planted: exchange-read
}

__global__ void warp_exchange_kernel(int* out, WarpOrder order) {
  __shared__ int lane_value[32];
  const unsigned lane = threadIdx.x;
  lane_value[lane] = int(lane) + 100;  // planted: warp-write
  int extra = 0;
  if (order == WarpOrder::syncwarp) __syncwarp();
  if (order == WarpOrder::shuffle) extra = __shfl_xor_sync(0xffffffffu, 0, 1);
  if (order == WarpOrder::split_masks) __syncwarp(lane % 2 == 0 ? 0x55555555u : 0xaaaaaaaau);
  out[lane] = lane_value[lane ^ 1u] + extra;  // planted: warp-read
}

__global__ void shared_counter_kernel(int* out, bool fault) {
  __shared__ int counter;
  if (threadIdx.x == 0) counter = 0;
  __syncthreads();
  if (fault) {
    if (threadIdx.x % 8 == 0) counter = counter + 1;  // planted: counter-update
  } else {
    if (threadIdx.x % 8 == 0) atomicAdd(&counter, 1);
  }
  __syncthreads();
  out[threadIdx.x] = counter;
}

__global__ void shift_kernel(const float* in, float* out, int n, bool fault) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[fault ? i + 1 : i];  // planted: shift-read
}

__global__ void static_overrun_kernel(float* out, bool fault) {
  __shared__ float first[32];
  __shared__ float second[32];
  const unsigned t = threadIdx.x;
  first[t] = float(t);
  second[t] = float(2 * t);
  __syncthreads();
  out[t] = first[fault ? t + 8 : t] + second[t];  // planted: static-overrun
}

__global__ void dynamic_overrun_kernel(float* out, bool fault) {
  KVSIM_DYNAMIC_SHARED(float, tile);
  const unsigned t = threadIdx.x;
  tile[t] = float(t);
  __syncthreads();
  out[t] = tile[fault ? t + 1 : t];  // planted: dynamic-overrun
}

__global__ void sum_kernel(const float* in, int n, float* out) {
  if (threadIdx.x != 0) return;
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += in[i];  // planted: sum-read
  *out = s;
}

struct ScaleParams {
  const float* in;
  float* out;
  float scale;
  int n;
};
__global__ void scale_kernel(ScaleParams p) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < p.n) p.out[i] = p.in[i] * p.scale;  // planted: params-read
}

__global__ void last_block_sum_kernel(const float* in, float* partial, unsigned* done, float* out, int mode) {
  __shared__ bool last;
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int i = 0; i < 32; ++i) s += in[blockIdx.x * 32 + i];
    partial[blockIdx.x] = s;
    if (mode != 1) __threadfence();  // publish the partial before counting this block done
    last = mode == 2 ? blockIdx.x == gridDim.x - 1 : atomicInc(done, gridDim.x) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    float total = 0.f;
    for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];  // planted: partial-read
    *out = total;
  }
}

__global__ void copy_kernel(const float* in, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i];
}
__global__ void stride2_kernel(const float* in, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[2 * i];
}
__global__ void broadcast_kernel(const float* in, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[0];
}
__global__ void counter_kernel(unsigned* counter) { atomicAdd(counter, 1u); }
// A known chain (kernels/emu/counters.hpp, LaunchCounts::chain_*): every thread loads 4 floats 256 bytes
// apart, one barrier, then each reads its neighbour's shared slot and thread 0 alone loads 3 floats more.
// The block's chain: 4 + 3 global steps, 1 shared step (stores are not steps), 1 barrier.
__global__ void chain_kernel(const float* in, float* out) {
  __shared__ float slot[64];
  const unsigned t = threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < 4; ++k) acc += in[blockIdx.x * 256 + k * 64 + t];
  slot[t] = acc;
  __syncthreads();
  acc += slot[(t + 1) % 64];
  if (t == 0)
    for (int k = 0; k < 3; ++k) acc += in[blockIdx.x * 256 + k * 64 + 1];
  out[blockIdx.x * 64 + t] = acc;
}

std::vector<float> iota(size_t n, float from = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from + float(i);
  return v;
}

}  // namespace

std::vector<int> neighbour_exchange(bool fault) {
  Dev<int> out(64);
  KVSIM_LAUNCH(neighbour_exchange_kernel, 1, 64)(out.p, fault);
  launched("neighbour_exchange");
  return out.get();
}

std::vector<int> warp_exchange(WarpOrder order) {
  Dev<int> out(32);
  KVSIM_LAUNCH(warp_exchange_kernel, 1, 32)(out.p, order);
  launched("warp_exchange");
  return out.get();
}

std::vector<int> shared_counter(bool fault) {
  Dev<int> out(64);
  KVSIM_LAUNCH(shared_counter_kernel, 1, 64)(out.p, fault);
  launched("shared_counter");
  return out.get();
}

std::vector<float> shift_copy(bool fault) {
  const int n = 60;  // 240 bytes: the read past the end stays inside the 256-byte aligned block
  Dev<float> in(iota(n)), out(n);
  KVSIM_LAUNCH(shift_kernel, 1, 64)(in.p, out.p, n, fault);
  launched("shift_copy");
  return out.get();
}

std::vector<float> static_shared_overrun(bool fault) {
  Dev<float> out(32);
  KVSIM_LAUNCH(static_overrun_kernel, 1, 32)(out.p, fault);
  launched("static_shared_overrun");
  return out.get();
}

std::vector<float> dynamic_shared_overrun(bool fault) {
  Dev<float> out(32);
  KVSIM_LAUNCH(dynamic_overrun_kernel, 1, 32, 32 * sizeof(float))(out.p, fault);
  launched("dynamic_shared_overrun");
  return out.get();
}

float sum_partly_copied(bool fault) {
  const std::vector<float> h = iota(40);
  Dev<float> in(h, fault ? h.size() - 1 : h.size()), out(1);
  KVSIM_LAUNCH(sum_kernel, 1, 32)(in.p, int(h.size()), out.p);
  launched("sum_partly_copied");
  return out.get()[0];
}

std::vector<float> scale_through_params(bool fault) {
  // Large enough to be its own mapping, far from the small device buffers' heap blocks.
  const std::vector<float> host = iota(size_t(1) << 20);
  const int n = 64;
  Dev<float> in(std::vector<float>(host.begin(), host.begin() + n)), out(n);
  ScaleParams p{fault ? host.data() : in.p, out.p, 2.f, n};
  KVSIM_LAUNCH(scale_kernel, 1, 64)(p);
  launched("scale_through_params");
  return out.get();
}

float last_block_sum(int mode) {
  const unsigned blocks = 4;
  Dev<float> in(iota(blocks * 32)), partial(blocks), out(1);
  Dev<unsigned> done(1);
  done.zero();
  KVSIM_LAUNCH(last_block_sum_kernel, blocks, 32)(in.p, partial.p, done.p, out.p, mode);
  launched("last_block_sum");
  return out.get()[0];
}

void coalesced_copy() {
  Dev<float> in(iota(64)), out(64);
  KVSIM_LAUNCH(copy_kernel, 1, 64)(in.p, out.p);
  launched("coalesced_copy");
}
void stride2_read() {
  Dev<float> in(iota(128)), out(64);
  KVSIM_LAUNCH(stride2_kernel, 1, 64)(in.p, out.p);
  launched("stride2_read");
}
void broadcast_read() {
  Dev<float> in(iota(1)), out(64);
  KVSIM_LAUNCH(broadcast_kernel, 1, 64)(in.p, out.p);
  launched("broadcast_read");
}
void chain_of_loads() {
  Dev<float> in(iota(2 * 256)), out(2 * 64);
  KVSIM_LAUNCH(chain_kernel, 2, 64)(in.p, out.p);
  launched("chain_of_loads");
}
void one_counter_atomics() {
  Dev<unsigned> counter(1);
  counter.zero();
  KVSIM_LAUNCH(counter_kernel, 1, 64)(counter.p);
  launched("one_counter_atomics");
}

}  // namespace kvsim::test::checker_kernels
