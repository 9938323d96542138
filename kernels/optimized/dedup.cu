// Sorted unique ids through a bitmap over the id range (kvsim::ref::dedup, and CHESS's context pages:
// selected ∪ sinks ∪ window). No sort: (1) the ids' min and max by atomics, read back so the bitmap is
// sized to the largest id; (2) one thread per id (and per id of each range) sets its bit with atomicOr;
// (3) one block scans the bitmap word by word (a warp scan of the popcounts) and writes the set bits' ids
// in ascending order — what the reference's sort + unique returns. Design and bound: README.md here.
#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullWarp = 0xffffffffu;

__global__ void __launch_bounds__(kThreads) id_range_kernel(const int32_t* ids, int64_t n, int32_t* minmax) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicMin(&minmax[0], ids[i]);
  atomicMax(&minmax[1], ids[i]);
}

// Thread j < n marks ids[j]; the threads after them mark the ranges' ids.
__global__ void __launch_bounds__(kThreads) bitmap_mark_kernel(DedupParams p, int64_t r0, int64_t r1) {
  int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t id;
  if (j < p.n) {
    id = p.ids[j];
  } else if ((j -= p.n) < r0) {
    id = p.range_begin[0] + j;
  } else if ((j -= r0) < r1) {
    id = p.range_begin[1] + j;
  } else {
    return;
  }
  atomicOr(&p.bitmap[id >> 5], 1u << (id & 31));
}

// One block: tiles of blockDim bitmap words, ascending; an inclusive warp scan of the popcounts, the
// warps' totals through shared memory, then each thread writes its word's ids in bit order.
__global__ void __launch_bounds__(kThreads) bitmap_compact_kernel(const unsigned* bitmap, int64_t words, int32_t* out,
                                                                  int32_t* count) {
  __shared__ int warp_total[kWarps];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t written = 0;
  for (int64_t base = 0; base < words; base += blockDim.x) {
    const int64_t wi = base + tid;
    const unsigned bits = wi < words ? bitmap[wi] : 0u;
    const int cnt = __popc(bits);
    int incl = cnt;
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(kFullWarp, incl, o);
      if (lane >= o) incl += up;
    }
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    int64_t pos = written + incl - cnt, tile = 0;
    for (int v = 0; v < kWarps; ++v) {
      if (v < warp) pos += warp_total[v];
      tile += warp_total[v];
    }
    for (unsigned b = bits; b; b &= b - 1) out[pos++] = int32_t(wi * 32 + (__ffs(int(b)) - 1));
    written += tile;
    __syncthreads();  // warp_total is rewritten by the next tile
  }
  if (tid == 0) *count = int32_t(written);
}

int64_t clip(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : (x > hi ? hi : x); }
}  // namespace

int64_t dedup_id_bound(const DedupParams& p) {
  if (p.n < 0) throw std::runtime_error("opt::dedup_id_bound: n < 0");
  if (p.n == 0) return 0;
  if (!p.scratch) throw std::runtime_error("opt::dedup_id_bound: scratch missing");
  const int32_t init[2] = {INT_MAX, INT_MIN};
  check::check(cudaMemcpy(p.scratch, init, sizeof init, cudaMemcpyHostToDevice), "opt::dedup_id_bound (init)");
  KVSIM_LAUNCH(id_range_kernel, check::blocks_for(p.n, kThreads), kThreads)(p.ids, p.n, p.scratch);
  check::check(cudaGetLastError(), "opt::dedup_id_bound");
  int32_t mm[2];
  check::check(cudaMemcpy(mm, p.scratch, sizeof mm, cudaMemcpyDeviceToHost), "opt::dedup_id_bound (read back)");
  if (mm[0] < 0) throw std::runtime_error("opt::dedup: negative id " + std::to_string(mm[0]));
  return int64_t(mm[1]) + 1;
}

int64_t dedup(const DedupParams& p) {
  const auto fail = [](const char* why) { throw std::runtime_error(std::string("opt::dedup: ") + why); };
  if (p.n < 0 || p.id_bound < 0) fail("negative size");
  if (p.id_bound > int64_t(INT_MAX) + 1) fail("id_bound above 2^31");
  if (p.id_bound == 0) return 0;
  if (!p.bitmap || !p.scratch || !p.out) fail("bitmap, scratch or out missing");
  DedupParams q = p;  // the ranges clipped to the bitmap
  int64_t r[2];
  for (int i = 0; i < 2; ++i) {
    q.range_begin[i] = clip(p.range_begin[i], 0, p.id_bound);
    q.range_end[i] = clip(p.range_end[i], q.range_begin[i], p.id_bound);
    r[i] = q.range_end[i] - q.range_begin[i];
  }
  const int64_t words = (p.id_bound + 31) / 32;
  check::check(cudaMemsetAsync(p.bitmap, 0, size_t(words) * sizeof(unsigned)), "opt::dedup (clear)");
  const int64_t marks = p.n + r[0] + r[1];
  if (marks == 0) return 0;
  KVSIM_LAUNCH(bitmap_mark_kernel, check::blocks_for(marks, kThreads), kThreads)(q, r[0], r[1]);
  check::check(cudaGetLastError(), "opt::dedup (mark)");
  KVSIM_LAUNCH(bitmap_compact_kernel, 1, kThreads)(p.bitmap, words, p.out, p.scratch);
  check::check(cudaGetLastError(), "opt::dedup (compact)");
  int32_t count = 0;
  check::check(cudaMemcpy(&count, p.scratch, sizeof count, cudaMemcpyDeviceToHost), "opt::dedup (count)");
  return count;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
