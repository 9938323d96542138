// Split-KV paged decode attention with GQA and float4 loads (FlashInfer's BatchDecodeWithPagedKVCache
// design, float32), and the merge of the splits' partial states. Same contract as
// kvsim::ref::paged_decode_attention; sparse page-list attention is the same kernel over a rewritten
// indices list. Design and bound: kernels/optimized/README.md.
//
// Kernel 1, one block per (KV split, KV head, request), blockDim = (head_dim / VEC, 128 / (head_dim / VEC)):
//   x: VEC floats of head_dim per lane (one float4 or two, PagedDecodeParams::lane_floats), so one token's
//      K (or V) row of one head is read by head_dim / VEC lanes as coalesced segments; y: token rows in
//      flight at once.
//   Every query head of the GQA group is held in registers, so each K and V byte of a KV head is read
//   once for the whole group instead of once per query head: that is what makes decode attention
//   memory-bound at the cache's size rather than GROUP times it.
//   Each token row keeps its own online-softmax state per query head (no barrier in the main loop; the
//   dot product is reduced across the row's lanes with xor shuffles), and the rows' states are merged once
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

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;

constexpr int kThreads = 128;  // per block: enough warps in flight per SM with several blocks resident
constexpr int kMaxGroup = 8;   // query heads per KV head held in registers (GQA groups up to 8)
constexpr int kVec = 4;        // floats per load: one 16-byte float4
// Floats of the head dimension per lane (PagedDecodeParams::lane_floats) when the caller leaves it 0.
constexpr int kDefaultLaneFloats = 8;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
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

template <int GROUP, int VEC, int LANES>
__global__ void __launch_bounds__(kThreads)
    split_kv_decode_kernel(PagedDecodeParams p, int pages_per_split, int splits) {
  // Lane tx of a token row holds VEC floats of the head dimension as F4 float4 slots, slot f at channels
  // 4·(f·lanes + tx) .. +3, so each load instruction of the row's lanes reads one contiguous segment.
  // LANES: head_dim / VEC when it is known at compile time (the shuffle trees unroll), 0 = blockDim.x.
  constexpr int F4 = VEC / kVec;
  constexpr int UNROLL = 16 / VEC;  // tokens per row and iteration: 2·UNROLL·F4 = 8 float4 loads in flight
  const int tx = threadIdx.x, ty = threadIdx.y, bdy = blockDim.y;
  const int lanes = LANES > 0 ? LANES : int(blockDim.x);
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int ps = p.page_size;
  const int page_begin = p.indptr[b];
  const int num_pages = p.indptr[b + 1] - page_begin;
  const int64_t n = num_pages > 0 ? int64_t(num_pages - 1) * ps + p.last_page_len[b] : 0;
  const int64_t t_begin = int64_t(split) * pages_per_split * ps;
  // The last split takes whatever remains, so a low max_pages_per_request costs balance, not tokens.
  const int64_t t_end = split == splits - 1 ? n : (n < t_begin + int64_t(pages_per_split) * ps ? n : t_begin + int64_t(pages_per_split) * ps);

  // Logits are kept in log2 units (the query pre-scaled by scale·log2 e), so each exponential is one
  // exp2f — the GPU's ex2 — rather than expf's extra range reduction; lse is turned back to natural log
  // once, at the end (FlashInfer does the same).
  const float qscale = p.scale * kLog2e;
  float4 q[GROUP][F4], acc[GROUP][F4];
  float m_run[GROUP], l_run[GROUP];  // the row's online-softmax state per query head (log2 units)
  KVSIM_UNROLL for (int g = 0; g < GROUP; ++g) {
    const float* qh = p.q + (int64_t(b) * p.num_qo_heads + kvh * GROUP + g) * p.head_dim;
    KVSIM_UNROLL for (int f = 0; f < F4; ++f) {
      const float4 v = load4(qh + (f * lanes + tx) * kVec);
      q[g][f] = make_float4(v.x * qscale, v.y * qscale, v.z * qscale, v.w * qscale);  // folded in once
      acc[g][f] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    m_run[g] = -INFINITY, l_run[g] = 0.f;
  }

  // Row ty takes tokens base + j·bdy + ty, j < UNROLL, per iteration (the same tokens in the same order
  // as one token per iteration would give it). The page ids of an iteration are loaded one iteration
  // ahead, so the K/V loads never wait on a dependent page-id load, and all of an iteration's K/V loads
  // are issued before the first dot product needs one.
  const int32_t* page_ids = p.indices + page_begin;
  const int64_t token_stride = int64_t(p.num_kv_heads) * p.head_dim;  // floats per token row (NHD)
  const int64_t page_stride = int64_t(ps) * token_stride;
  const int64_t head_off = int64_t(kvh) * p.head_dim + tx * kVec;
  const int64_t step = int64_t(bdy) * UNROLL;
  // Each of the row's UNROLL tokens keeps its page (index into the split's page list) and offset in the
  // page as 32-bit integers advanced by `step` each iteration: one compare-and-subtract per token instead
  // of a 64-bit division and modulo by the runtime page size (each dozens of instructions on the GPU,
  // inside the loop). step = step_pages · ps + step_rem is split once, here, outside it.
  const int32_t step_pages = int32_t(step / ps), step_rem = int32_t(step - int64_t(step_pages) * ps);
  int32_t pg[UNROLL], off[UNROLL], page[UNROLL];
  KVSIM_UNROLL for (int j = 0; j < UNROLL; ++j) {
    const int64_t t = t_begin + j * bdy + ty;
    pg[j] = int32_t(t / ps), off[j] = int32_t(t - int64_t(pg[j]) * ps);
  }
  // The page ids of an iteration's tokens; a token in the same page as the one before reuses its id (one
  // load per page a row touches, not one per token). Past t_end: never used.
  const auto load_pages = [&](int64_t first) {
    int32_t prev = -1, id = 0;
    KVSIM_UNROLL for (int j = 0; j < UNROLL; ++j) {
      if (first + j * bdy < t_end && pg[j] != prev) id = page_ids[pg[j]], prev = pg[j];
      page[j] = id;
    }
  };
  load_pages(t_begin + ty);
  // A uniform trip count for the whole block: a warp holds 32 / lanes token rows and all of them must
  // reach the shuffles together, so rows past t_end run with a zero row and push nothing.
  for (int64_t base = t_begin; base < t_end; base += step) {
    float4 k[UNROLL][F4], v[UNROLL][F4];
    KVSIM_UNROLL for (int j = 0; j < UNROLL; ++j) {
      const bool live = base + j * bdy + ty < t_end;
      const int64_t off64 = int64_t(page[j]) * page_stride + int64_t(off[j]) * token_stride + head_off;
      KVSIM_UNROLL for (int f = 0; f < F4; ++f) {
        k[j][f] = v[j][f] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (live) {
          k[j][f] = load4(p.k_pages + off64 + f * lanes * kVec);
          v[j][f] = load4(p.v_pages + off64 + f * lanes * kVec);
        }
      }
    }
    KVSIM_UNROLL for (int j = 0; j < UNROLL; ++j) {
      off[j] += step_rem, pg[j] += step_pages;
      if (off[j] >= ps) off[j] -= ps, ++pg[j];
    }
    load_pages(base + step + ty);  // the next iteration's page ids, in flight with K and V
    KVSIM_UNROLL for (int g = 0; g < GROUP; ++g) {
      // The row's UNROLL logits (independent shuffle trees), then one online-softmax step for all of
      // them: one rescale of (l, acc) per iteration instead of one per token — 1 + UNROLL exponentials
      // per UNROLL tokens rather than 2·UNROLL, the same result up to rounding. A past-the-end, -inf or
      // NaN logit adds nothing (as hd::OnlineSoftmax::push).
      float sc[UNROLL];
      KVSIM_UNROLL for (int j = 0; j < UNROLL; ++j) {
        float s = dot4(q[g][0], k[j][0]);
        KVSIM_UNROLL for (int f = 1; f < F4; ++f) s += dot4(q[g][f], k[j][f]);
        KVSIM_UNROLL for (int o = (LANES > 0 ? LANES : 32) / 2; o > 0; o >>= 1)
          if (LANES > 0 || o < lanes) s += __shfl_xor_sync(kFullWarp, s, o, lanes);
        sc[j] = base + j * bdy + ty < t_end ? s : -INFINITY;
      }
      float m_new = m_run[g];
      KVSIM_UNROLL for (int j = 0; j < UNROLL; ++j) m_new = sc[j] > m_new ? sc[j] : m_new;
      if (!(m_new > -INFINITY)) continue;  // nothing pushed yet, nothing to push
      const float rescale = exp2f(m_run[g] - m_new);  // 0 while the state is empty (m = -inf)
      float l = l_run[g] * rescale;
      float4 a[F4];
      KVSIM_UNROLL for (int f = 0; f < F4; ++f)
        a[f] = make_float4(acc[g][f].x * rescale, acc[g][f].y * rescale, acc[g][f].z * rescale, acc[g][f].w * rescale);
      KVSIM_UNROLL for (int j = 0; j < UNROLL; ++j) {
        if (!(sc[j] > -INFINITY)) continue;
        const float pr = exp2f(sc[j] - m_new);
        l += pr;
        KVSIM_UNROLL for (int f = 0; f < F4; ++f)
          a[f].x += pr * v[j][f].x, a[f].y += pr * v[j][f].y, a[f].z += pr * v[j][f].z, a[f].w += pr * v[j][f].w;
      }
      m_run[g] = m_new, l_run[g] = l;
      KVSIM_UNROLL for (int f = 0; f < F4; ++f) acc[g][f] = a[f];
    }
  }

  // Merge the bdy token rows' states: each row's (m, l, acc) to shared memory, then query head g is
  // merged by row g (mod bdy), each lane its own float4 slots of channels.
  __shared__ float4 acc_s[kThreads * GROUP * F4];
  __shared__ float m_s[kThreads * GROUP], l_s[kThreads * GROUP];
  KVSIM_UNROLL for (int g = 0; g < GROUP; ++g) {
    KVSIM_UNROLL for (int f = 0; f < F4; ++f) acc_s[((ty * GROUP + g) * F4 + f) * lanes + tx] = acc[g][f];
    if (tx == 0) m_s[ty * GROUP + g] = m_run[g], l_s[ty * GROUP + g] = l_run[g];
  }
  __syncthreads();
  for (int g = ty; g < GROUP; g += bdy) {
    float M = -INFINITY;
    for (int y = 0; y < bdy; ++y) M = fmaxf(M, m_s[y * GROUP + g]);
    float L = 0.f;
    float4 o[F4];
    KVSIM_UNROLL for (int f = 0; f < F4; ++f) o[f] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (M > -INFINITY) {
      for (int y = 0; y < bdy; ++y) {
        const float my = m_s[y * GROUP + g];
        const float w = my > -INFINITY ? exp2f(my - M) : 0.f;
        L += w * l_s[y * GROUP + g];
        KVSIM_UNROLL for (int f = 0; f < F4; ++f) {
          const float4 a = acc_s[((y * GROUP + g) * F4 + f) * lanes + tx];
          o[f].x += w * a.x, o[f].y += w * a.y, o[f].z += w * a.z, o[f].w += w * a.w;
        }
      }
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
    const int64_t row = int64_t(b) * p.num_qo_heads + kvh * GROUP + g;
    float* dst;
    if (splits == 1) {
      dst = p.out + row * p.head_dim;
      if (tx == 0) p.lse[row] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
    } else {  // a partial state: channels at [row, split, head_dim], then its max logit and log-sum at
              // [row, split] each, in log2 units. Kept apart, not as one lse = M + log L: at |logits| ~ 1e4
              // that float sum rounds by up to 5e-4, which the merge's exp(lse_s - max) would turn into a
              // 5e-4 relative error of the split's weight (NumericEdges.GatherAttentionOfHugeLogitsIsTheClosedForm).
      dst = p.workspace + (row * splits + split) * p.head_dim;
      float* const m_part = p.workspace + int64_t(p.batch) * p.num_qo_heads * splits * p.head_dim;
      float* const logl_part = m_part + int64_t(p.batch) * p.num_qo_heads * splits;
      if (tx == 0) {
        m_part[row * splits + split] = L > 0.f ? M : -INFINITY;
        logl_part[row * splits + split] = L > 0.f ? log2f(L) : -INFINITY;
      }
    }
    // head_dim % 4 == 0 and 16-byte aligned bases: float4 stores, a row in full sectors.
    KVSIM_UNROLL for (int f = 0; f < F4; ++f)
      *reinterpret_cast<float4*>(dst + (f * lanes + tx) * kVec) = make_float4(o[f].x * inv, o[f].y * inv, o[f].z * inv, o[f].w * inv);
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

// One block per (request, query head): out = Σ_s w_s o_s, w_s = 2^(lse_s - lse), lse = log2 Σ 2^lse_s (the
// splits' states are in log2 units; the lse written is natural log).
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
  const float* logl_part = m_part + states;                                // and log2 Σ 2^(s - max)
  float m = -INFINITY;
  for (int s = tid; s < splits; s += blockDim.x) m = fmaxf(m, m_part[s]);
  const float M = block_reduce(m, true, red);
  // Split s's weight is 2^(lse_s - M) with lse_s - M = (m_s - M) + log2 l_s: m_s - M is exact for nearby
  // maxima, and log2 l_s <= log2(tokens), so nothing overflows and nothing rounds at the logits' magnitude.
  const auto weight = [&](int s) {
    return M > -INFINITY && m_part[s] > -INFINITY ? exp2f((m_part[s] - M) + logl_part[s]) : 0.f;
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
  if (tid == 0) p.lse[row] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
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
  if (p.lane_floats != 0 && p.lane_floats != 4 && p.lane_floats != 8) fail("lane_floats must be 0 (default), 4 or 8");
  if (p.lane_floats == 8 && (p.head_dim % 8 != 0 || ((p.head_dim / 8) & (p.head_dim / 8 - 1)) != 0))
    fail("lane_floats 8 needs head_dim 8 times a power of two");
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

// 8 floats per lane where the caller asks for it, or by default where head_dim allows it; else 4.
int lane_floats(const PagedDecodeParams& p) {
  if (p.lane_floats != 0) return p.lane_floats;
  const int l8 = p.head_dim / 8;
  return kDefaultLaneFloats == 8 && p.head_dim % 8 == 0 && l8 > 0 && (l8 & (l8 - 1)) == 0 ? 8 : 4;
}

template <int GROUP, int VEC, int LANES>
void launch_lanes(const PagedDecodeParams& p, const Plan& pl) {
  const int bdx = p.head_dim / VEC;
  KVSIM_LAUNCH((split_kv_decode_kernel<GROUP, VEC, LANES>), dim3(pl.splits, p.num_kv_heads, p.batch),
               dim3(bdx, kThreads / bdx))
  (p, pl.pages_per_split, pl.splits);
}

// A head of 128 (32 or 16 lanes) gets shuffle trees unrolled at compile time; other heads the generic loop.
template <int GROUP>
void launch_split(const PagedDecodeParams& p, const Plan& pl) {
  if (lane_floats(p) == 8) {
    p.head_dim == 128 ? launch_lanes<GROUP, 8, 16>(p, pl) : launch_lanes<GROUP, 8, 0>(p, pl);
  } else {
    p.head_dim == 128 ? launch_lanes<GROUP, 4, 32>(p, pl) : launch_lanes<GROUP, 4, 0>(p, pl);
  }
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
