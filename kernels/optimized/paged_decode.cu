// Split-KV paged decode attention with GQA and float4 loads (FlashInfer's BatchDecodeWithPagedKVCache
// design, float32), and the merge of the splits' partial states. Same contract as
// kvsim::ref::paged_decode_attention; sparse page-list attention is the same kernel over a rewritten
// indices list. Design and bound: kernels/optimized/README.md.
//
// Kernel 1, one block per (KV split, KV head, request), blockDim = (head_dim / 4, 128 / (head_dim / 4)):
//   x: a 16-byte float4 slice of head_dim, so one token's K (or V) row of one head is read by bdx lanes
//      as one coalesced segment; y: bdy tokens in flight at once.
//   Every query head of the GQA group is held in registers (GROUP float4 per thread), so each K and V
//   byte of a KV head is read once for the whole group instead of once per query head: that is what
//   makes decode attention memory-bound at the cache's size rather than GROUP times it.
//   Each token row keeps its own online-softmax state per query head (no barrier in the main loop; the
//   dot product is reduced across the bdx lanes with xor shuffles), and the bdy states are merged once
//   through shared memory at the end.
// Kernel 2 (only when there is more than one split), one block per (request, query head): the exact
//   (o, lse) merge of the splits, max-shifted (kvsim::ref::merge_states).
// Splitting the KV sequence is what fills the GPU when batch · num_kv_heads is small (long-context
// decode of one request): without it one block walks the whole sequence on one SM.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/optimized/cuda.hpp"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
using ::kvsim::ref::hd::OnlineSoftmax;

constexpr int kThreads = 128;  // per block: enough warps in flight per SM with several blocks resident
constexpr int kMaxGroup = 8;   // query heads per KV head held in registers (GQA groups up to 8)
constexpr int kVec = 4;        // floats per load: one 16-byte float4
constexpr int kUnroll = 4;     // tokens per token row and iteration: 8 float4 loads in flight per thread
// Blocks the split planner aims for: four per SM of an H100/H200 SXM (132 SMs). Measured on an H200
// (`kvsim bench --benchmark_filter=BM_CudaPagedDecode`, docs/validation/h200-measured.md): one request,
// 8 KV heads, at 16K and 128K tokens the fastest split count was 64-66 (512-528 blocks), 1.7-1.8x faster
// than 2 blocks per SM; 8 and 16 per SM were slower again (the merge and the shorter splits).
constexpr int64_t kTargetBlocks = 4 * 132;
constexpr unsigned kFullWarp = 0xffffffffu;

// One 16-byte load through the read-only path (q and the K/V pages do not change during the kernel).
// Spelled __ldg so the emulated build also sees one 16-byte access per lane: g++ would split a plain
// float4 copy into four 4-byte loads, which the emulator's sector counting would take for a stride-4
// pattern (25% of each sector used) where the GPU issues one 128-bit load.
__device__ __forceinline__ float4 load4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

template <int GROUP>
__global__ void __launch_bounds__(kThreads)
    split_kv_decode_kernel(PagedDecodeParams p, int pages_per_split, int splits) {
  // threadIdx.x < bdx is the same for every lane of a bdx-wide segment of a warp (bdx divides 32).
  const int tx = threadIdx.x, ty = threadIdx.y, bdx = blockDim.x, bdy = blockDim.y;
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int ps = p.page_size;
  const int page_begin = p.indptr[b];
  const int num_pages = p.indptr[b + 1] - page_begin;
  const int64_t n = num_pages > 0 ? int64_t(num_pages - 1) * ps + p.last_page_len[b] : 0;
  const int64_t t_begin = int64_t(split) * pages_per_split * ps;
  // The last split takes whatever remains, so a low max_pages_per_request costs balance, not tokens.
  const int64_t t_end = split == splits - 1 ? n : (n < t_begin + int64_t(pages_per_split) * ps ? n : t_begin + int64_t(pages_per_split) * ps);

  float4 q[GROUP], acc[GROUP];
  OnlineSoftmax st[GROUP];
  KVSIM_UNROLL for (int g = 0; g < GROUP; ++g) {
    const float* qh = p.q + (int64_t(b) * p.num_qo_heads + kvh * GROUP + g) * p.head_dim + tx * kVec;
    const float4 v = load4(qh);
    q[g] = make_float4(v.x * p.scale, v.y * p.scale, v.z * p.scale, v.w * p.scale);  // scale folded in once
    acc[g] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  // Row ty takes tokens base + j·bdy + ty, j < kUnroll, per iteration (the same tokens in the same order
  // as one token per iteration would give it, so its softmax state sees the same sequence). The page ids
  // of an iteration are loaded one iteration ahead, so the K/V loads never wait on a dependent page-id
  // load, and all 2·kUnroll float4 loads are issued before the first dot product needs one.
  const int32_t* page_ids = p.indices + page_begin;
  const int64_t token_stride = int64_t(p.num_kv_heads) * p.head_dim;  // floats per token row (NHD)
  const int64_t page_stride = int64_t(ps) * token_stride;
  const int64_t head_off = int64_t(kvh) * p.head_dim + tx * kVec;
  const int64_t step = int64_t(bdy) * kUnroll;
  // Each of the row's kUnroll tokens keeps its page (index into the split's page list) and offset in the
  // page as 32-bit integers advanced by `step` each iteration: one compare-and-subtract per token instead
  // of a 64-bit division and modulo by the runtime page size (each dozens of instructions on the GPU,
  // inside the loop). step = step_pages · ps + step_rem is split once, here, outside it.
  const int32_t step_pages = int32_t(step / ps), step_rem = int32_t(step - int64_t(step_pages) * ps);
  int32_t pg[kUnroll], off[kUnroll], page[kUnroll];
  KVSIM_UNROLL for (int j = 0; j < kUnroll; ++j) {
    const int64_t t = t_begin + j * bdy + ty;
    pg[j] = int32_t(t / ps), off[j] = int32_t(t - int64_t(pg[j]) * ps);
  }
  // The page ids of the current iteration's tokens; a token in the same page as the one before reuses its
  // id (one load per page a row touches, not one per token). Past t_end: never used.
  const auto load_pages = [&](int64_t first) {
    int32_t prev = -1, id = 0;
    KVSIM_UNROLL for (int j = 0; j < kUnroll; ++j) {
      if (first + j * bdy < t_end && pg[j] != prev) id = page_ids[pg[j]], prev = pg[j];
      page[j] = id;
    }
  };
  load_pages(t_begin + ty);
  // A uniform trip count for the whole block: a warp holds 32 / bdx token rows and all of them must
  // reach the shuffles together, so rows past t_end run with a zero row and push nothing.
  for (int64_t base = t_begin; base < t_end; base += step) {
    float4 k[kUnroll], v[kUnroll];
    KVSIM_UNROLL for (int j = 0; j < kUnroll; ++j) {
      const int64_t t = base + j * bdy + ty;
      k[j] = v[j] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (t < t_end) {
        const int64_t off64 = int64_t(page[j]) * page_stride + int64_t(off[j]) * token_stride + head_off;
        k[j] = load4(p.k_pages + off64);
        v[j] = load4(p.v_pages + off64);
      }
    }
    KVSIM_UNROLL for (int j = 0; j < kUnroll; ++j) {
      off[j] += step_rem, pg[j] += step_pages;
      if (off[j] >= ps) off[j] -= ps, ++pg[j];
    }
    load_pages(base + step + ty);  // the next iteration's page ids, in flight with K and V
    KVSIM_UNROLL for (int g = 0; g < GROUP; ++g) {
      // The row's kUnroll logits (independent shuffle trees), then one online-softmax step for all of
      // them: one rescale of (l, acc) per iteration instead of one per token — 1 + kUnroll exponentials
      // per kUnroll tokens rather than 2·kUnroll, and a quarter of the rescaling multiplies, the same
      // result up to rounding. A past-the-end, -inf or NaN logit adds nothing (hd::OnlineSoftmax::push).
      float sc[kUnroll];
      KVSIM_UNROLL for (int j = 0; j < kUnroll; ++j) {
        float s = dot4(q[g], k[j]);
        for (int o = bdx / 2; o > 0; o >>= 1) s += __shfl_xor_sync(kFullWarp, s, o, bdx);
        sc[j] = base + j * bdy + ty < t_end ? s : -INFINITY;
      }
      float m_new = st[g].m;
      KVSIM_UNROLL for (int j = 0; j < kUnroll; ++j) m_new = sc[j] > m_new ? sc[j] : m_new;
      if (!(m_new > -INFINITY)) continue;  // nothing pushed yet, nothing to push
      const float rescale = expf(st[g].m - m_new);  // 0 while the state is empty (m = -inf)
      float l = st[g].l * rescale;
      float4 a = make_float4(acc[g].x * rescale, acc[g].y * rescale, acc[g].z * rescale, acc[g].w * rescale);
      KVSIM_UNROLL for (int j = 0; j < kUnroll; ++j) {
        if (!(sc[j] > -INFINITY)) continue;
        const float pr = expf(sc[j] - m_new);
        l += pr;
        a.x += pr * v[j].x, a.y += pr * v[j].y, a.z += pr * v[j].z, a.w += pr * v[j].w;
      }
      st[g].m = m_new, st[g].l = l, acc[g] = a;
    }
  }

  // Merge the bdy token rows' states: each row's (m, l, acc) to shared memory, then query head g is
  // merged by row g (mod bdy), each lane its own float4 of channels.
  __shared__ float4 acc_s[kThreads * GROUP];
  __shared__ float m_s[kThreads * GROUP], l_s[kThreads * GROUP];
  KVSIM_UNROLL for (int g = 0; g < GROUP; ++g) {
    acc_s[(ty * GROUP + g) * bdx + tx] = acc[g];
    if (tx == 0) m_s[ty * GROUP + g] = st[g].m, l_s[ty * GROUP + g] = st[g].l;
  }
  __syncthreads();
  for (int g = ty; g < GROUP; g += bdy) {
    float M = -INFINITY;
    for (int y = 0; y < bdy; ++y) M = fmaxf(M, m_s[y * GROUP + g]);
    float L = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    if (M > -INFINITY) {
      for (int y = 0; y < bdy; ++y) {
        const float my = m_s[y * GROUP + g];
        const float w = my > -INFINITY ? expf(my - M) : 0.f;
        const float4 a = acc_s[(y * GROUP + g) * bdx + tx];
        L += w * l_s[y * GROUP + g];
        o.x += w * a.x, o.y += w * a.y, o.z += w * a.z, o.w += w * a.w;
      }
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
    const int64_t row = int64_t(b) * p.num_qo_heads + kvh * GROUP + g;
    float* dst;
    if (splits == 1) {
      dst = p.out + row * p.head_dim;
      if (tx == 0) p.lse[row] = L > 0.f ? M + logf(L) : -INFINITY;
    } else {  // a partial state: channels at [row, split, head_dim], then its max logit and log-sum at
              // [row, split] each. Kept apart, not as one lse = M + log L: at |logits| ~ 1e4 that float sum
              // rounds by up to 5e-4, which the merge's exp(lse_s - max) would turn into a 5e-4 relative
              // error of the split's weight (NumericEdges.GatherAttentionOfHugeLogitsIsTheClosedForm).
      dst = p.workspace + (row * splits + split) * p.head_dim;
      float* const m_part = p.workspace + int64_t(p.batch) * p.num_qo_heads * splits * p.head_dim;
      float* const logl_part = m_part + int64_t(p.batch) * p.num_qo_heads * splits;
      if (tx == 0) {
        m_part[row * splits + split] = L > 0.f ? M : -INFINITY;
        logl_part[row * splits + split] = L > 0.f ? logf(L) : -INFINITY;
      }
    }
    // head_dim % 4 == 0 and 16-byte aligned bases: one float4 store per lane, a row in full sectors.
    *reinterpret_cast<float4*>(dst + tx * kVec) = make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
  }
}

// x reduced over the block (max or sum) through red[kThreads / 32]; every thread gets the result.
__device__ float block_reduce(float x, bool is_max, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(kFullWarp, x, o);
    x = is_max ? fmaxf(x, y) : x + y;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = x;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < int(blockDim.x >> 5); ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();  // red is reused by the next reduction
  return r;
}

// One block per (request, query head): out = Σ_s w_s o_s, w_s = exp(lse_s - lse), lse = log Σ exp(lse_s).
// The splits' lse are read by consecutive threads (one coalesced load per 32 splits, not one broadcast
// load per split and thread), their weights staged in shared memory; thread c then sums channel c,
// consecutive threads on consecutive channels of each partial row.
__global__ void __launch_bounds__(kThreads) merge_splits_kernel(PagedDecodeParams p, int splits) {
  __shared__ float red[kThreads / 32];
  __shared__ float w_s[kThreads];
  const int tid = threadIdx.x;
  const int64_t row = blockIdx.x;
  const float* part = p.workspace + row * splits * p.head_dim;
  const int64_t states = int64_t(p.batch) * p.num_qo_heads * splits;
  const float* m_part = p.workspace + states * p.head_dim + row * splits;  // each split's max logit
  const float* logl_part = m_part + states;                                // and log Σ exp(s - max)
  float m = -INFINITY;
  for (int s = tid; s < splits; s += blockDim.x) m = fmaxf(m, m_part[s]);
  const float M = block_reduce(m, true, red);
  // Split s's weight is exp(lse_s - M) with lse_s - M = (m_s - M) + log l_s: m_s - M is exact for nearby
  // maxima, and log l_s <= log(tokens), so nothing overflows and nothing rounds at the logits' magnitude.
  const auto weight = [&](int s) {
    return M > -INFINITY && m_part[s] > -INFINITY ? expf((m_part[s] - M) + logl_part[s]) : 0.f;
  };
  float l = 0.f;
  for (int s = tid; s < splits; s += blockDim.x) l += weight(s);
  const float L = block_reduce(l, false, red);
  float o = 0.f;
  for (int s0 = 0; s0 < splits; s0 += blockDim.x) {
    const int s = s0 + tid;
    w_s[tid] = s < splits && L > 0.f ? weight(s) : 0.f;
    __syncthreads();
    const int m_here = splits - s0 < int(blockDim.x) ? splits - s0 : int(blockDim.x);
    if (tid < p.head_dim)
      for (int j = 0; j < m_here; ++j)
        if (w_s[j] != 0.f) o += w_s[j] * part[int64_t(s0 + j) * p.head_dim + tid];
    __syncthreads();  // w_s is rewritten by the next group of splits
  }
  if (tid < p.head_dim) p.out[row * p.head_dim + tid] = L > 0.f ? o * (1.f / L) : 0.f;
  if (tid == 0) p.lse[row] = L > 0.f ? M + logf(L) : -INFINITY;
}

struct Plan {
  int splits = 1, pages_per_split = 1;
};

void validate(const PagedDecodeParams& p) {
  const auto fail = [](const char* why) { throw std::runtime_error(std::string("opt::paged_decode_attention: ") + why); };
  if (p.batch < 0 || p.page_size <= 0) fail("batch < 0 or page_size <= 0");
  if (p.num_kv_heads <= 0 || p.num_qo_heads % p.num_kv_heads != 0) fail("num_qo_heads not a multiple of num_kv_heads");
  if (p.num_qo_heads / p.num_kv_heads > kMaxGroup) fail("GQA group above 8");
  const int lanes = p.head_dim / kVec;
  if (p.head_dim % kVec != 0 || lanes < 1 || lanes > 32 || (lanes & (lanes - 1)) != 0)
    fail("head_dim must be 4 times a power of two, at most 128");
  const auto misaligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
  if (misaligned(p.q) || misaligned(p.k_pages) || misaligned(p.v_pages) || misaligned(p.out) || misaligned(p.workspace))
    fail("q, k_pages, v_pages, out and workspace must be 16-byte aligned (float4 loads and stores)");
}

Plan plan(const PagedDecodeParams& p) {
  validate(p);
  Plan pl;
  const int maxp = p.max_pages_per_request;
  if (maxp <= 0) return pl;
  int pps = p.pages_per_split;
  if (pps <= 0) {
    const int64_t blocks = int64_t(p.batch) * p.num_kv_heads;
    const int64_t want = blocks >= kTargetBlocks || blocks == 0 ? 1 : (kTargetBlocks + blocks - 1) / blocks;
    // At least 256 tokens per split: below that the merge costs more than the parallelism gains.
    const int min_pps = (256 + p.page_size - 1) / p.page_size;
    pps = int((maxp + want - 1) / want);
    if (pps < min_pps) pps = min_pps;
  }
  pl.pages_per_split = pps;
  pl.splits = (maxp + pps - 1) / pps;
  return pl;
}

template <int GROUP>
void launch_split(const PagedDecodeParams& p, const Plan& pl) {
  const int bdx = p.head_dim / kVec;
  KVSIM_LAUNCH(split_kv_decode_kernel<GROUP>, dim3(pl.splits, p.num_kv_heads, p.batch), dim3(bdx, kThreads / bdx))
  (p, pl.pages_per_split, pl.splits);
}
}  // namespace

int paged_decode_splits(const PagedDecodeParams& p) { return plan(p).splits; }

int64_t paged_decode_workspace_floats(const PagedDecodeParams& p) {
  const Plan pl = plan(p);
  return pl.splits == 1 ? 0 : int64_t(p.batch) * p.num_qo_heads * pl.splits * (p.head_dim + 2);
}

void paged_decode_attention(const PagedDecodeParams& p) {
  const Plan pl = plan(p);
  if (p.batch == 0 || p.num_qo_heads == 0) return;
  if (pl.splits > 1 && !p.workspace) throw std::runtime_error("opt::paged_decode_attention: workspace required");
  switch (p.num_qo_heads / p.num_kv_heads) {
    case 1: launch_split<1>(p, pl); break;
    case 2: launch_split<2>(p, pl); break;
    case 3: launch_split<3>(p, pl); break;
    case 4: launch_split<4>(p, pl); break;
    case 5: launch_split<5>(p, pl); break;
    case 6: launch_split<6>(p, pl); break;
    case 7: launch_split<7>(p, pl); break;
    default: launch_split<8>(p, pl); break;
  }
  check::check(cudaGetLastError(), "opt::paged_decode_attention");
  if (pl.splits > 1) {  // stream-ordered after the splits: no synchronization in between
    KVSIM_LAUNCH(merge_splits_kernel, p.batch * p.num_qo_heads, kThreads)(p, pl.splits);
    check::check(cudaGetLastError(), "opt::paged_decode_attention (merge)");
  }
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
