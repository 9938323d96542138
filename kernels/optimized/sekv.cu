// SEKV on the device (policies/sekv/selector.cpp): the PCA routing projection W of a (layer, KV head)'s
// keys, every span's surprisal-weighted means k-bar, v-bar (eq. 2) and normalized summary W·k-bar (eq. 3),
// and per decode step the routing gate (eq. 4-5, the max over the GQA group) and the zoom (threshold, then
// spans by decreasing gate until the reconstruction budget is full). Everything but the PCA is the host's
// arithmetic in the host's order (the projections in double, rounded once; hd::sekv_route), so the gates
// and the zoomed spans are bit-identical to the host's wherever W is. W: the column means and the d×d
// covariance in double (one thread per element), then the eigenvectors by Jacobi (jacobi_eigen.cuh) in
// one thread; agreement with the host's Eigen solver is ~1e-13 relative, below W's float rounding (so W
// is the same floats except for rare last-bit differences, which can move a gate by an ulp). The zoom's
// ranking is topk.cu over every span's key, the non-candidates' NaN last (the host's stable sort by
// decreasing gate: rank words with ties by the lower span). Bound: the covariance n·d²·2 FLOPs
// (compute-bound, once per prefill); the routing g·d·d'·2 + m·(d'·2 + 2) FLOPs and the zoom a few small
// launches per step and one read-back: launch latency.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/optimized/block_select.cuh"
#include "kernels/optimized/cuda.hpp"
#include "kernels/optimized/jacobi_eigen.cuh"
#include "kernels/reference/cuda_common.cuh"
#include "kernels/reference/hd.hpp"

namespace kvsim::opt::KVSIM_CUDA_BACKEND {
namespace {
namespace check = ::kvsim::ref::KVSIM_CUDA_BACKEND::detail;
namespace hd = ::kvsim::ref::hd;
namespace bs = block_select;
constexpr int kThreads = 256;
constexpr int kMaxDim = 256;  // the eigen solver's order array lives in registers/local memory
constexpr int kBudgetThreads = 1024;
// Rows of at most this many spans are zoomed in one block, their rank words in shared memory (32 KiB).
constexpr int64_t kFusedSpans = 4096;

__global__ void __launch_bounds__(kThreads) column_mean_kernel(PcaParams p) {
  const int c = int(int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
  if (c >= p.d) return;
  double s = 0;
  for (int64_t t = 0; t < p.n; ++t) s += double(p.keys[t * p.d + c]);
  p.mean[c] = s / double(p.n);
}

// cov[i, j] = Σ_t (x_ti - mean_i)(x_tj - mean_j), both triangles.
__global__ void __launch_bounds__(kThreads) covariance_kernel(PcaParams p) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= int64_t(p.d) * p.d) return;
  const int i = int(e / p.d), j = int(e % p.d);
  if (j < i) return;
  double s = 0;
  for (int64_t t = 0; t < p.n; ++t)
    s += (double(p.keys[t * p.d + i]) - p.mean[i]) * (double(p.keys[t * p.d + j]) - p.mean[j]);
  p.cov[int64_t(i) * p.d + j] = s;
  p.cov[int64_t(j) * p.d + i] = s;
}

// One thread: the eigenvectors, then W's columns by decreasing variance, each with its largest-magnitude
// component positive (the reference's sign rule; ties: the first such component), zero beyond min(n, d).
__global__ void pca_eigen_kernel(PcaParams p) {
  int order[kMaxDim];
  jacobi::eigen(p.cov, p.vecs, p.d, order);
  const int avail = p.n < p.d ? int(p.n) : p.d;
  for (int j = 0; j < p.d_proj; ++j) {
    if (j >= avail) {
      for (int i = 0; i < p.d; ++i) p.W[int64_t(i) * p.d_proj + j] = 0.f;
      continue;
    }
    const int col = order[j];
    int arg = 0;
    for (int i = 1; i < p.d; ++i)
      if (fabs(p.vecs[int64_t(i) * p.d + col]) > fabs(p.vecs[int64_t(arg) * p.d + col])) arg = i;
    const double sign = p.vecs[int64_t(arg) * p.d + col] < 0 ? -1.0 : 1.0;
    for (int i = 0; i < p.d; ++i) p.W[int64_t(i) * p.d_proj + j] = float(sign * p.vecs[int64_t(i) * p.d + col]);
  }
}

// Element e = (span, channel): k-bar and v-bar as ref::segment_weighted_mean computes them (the weights
// summed in double; a zero sum falls back to the plain mean; uniform weights are ones).
__global__ void __launch_bounds__(kThreads) span_means_kernel(SpanSummaryParams p) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= p.spans * p.d) return;
  const int64_t s = e / p.d;
  const int c = int(e % p.d);
  const int64_t b = p.span_begin[s], end = p.span_end[s];
  double wsum = 0;
  for (int64_t t = b; t < end; ++t) wsum += p.weights ? p.weights[t] : 1.f;
  float k = 0.f, v = 0.f;
  if (wsum == 0) {
    for (int64_t t = b; t < end; ++t) k += p.keys[t * p.d + c], v += p.values[t * p.d + c];
    p.kbar[e] = k / float(end - b);
    p.vbar[e] = v / float(end - b);
    return;
  }
  for (int64_t t = b; t < end; ++t) {
    const float w = p.weights ? p.weights[t] : 1.f;
    k += w * p.keys[t * p.d + c];
    v += w * p.values[t * p.d + c];
  }
  p.kbar[e] = float(k / wsum);
  p.vbar[e] = float(v / wsum);
}

// One thread per span: summary = W·k-bar in double, rounded, then normalized by the double norm.
__global__ void __launch_bounds__(kThreads) span_summary_kernel(SpanSummaryParams p) {
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= p.spans) return;
  hd::sekv_summary(p.kbar + s * p.d, p.W, p.d, p.d_proj, p.summaries + s * p.d_proj);
}

// Element e = (row, j): q' = q·W in double, rounded once (eq. 4).
__global__ void __launch_bounds__(kThreads) query_projection_kernel(RoutingParams p) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= int64_t(p.rows) * p.d_proj) return;
  const int r = int(e / p.d_proj), j = int(e % p.d_proj);
  double acc = 0;
  for (int c = 0; c < p.d; ++c) acc += double(p.queries[int64_t(r) * p.d + c]) * p.W[int64_t(c) * p.d_proj + j];
  p.q_proj[e] = float(acc);
}

// One thread per span: the gate of every query row (eq. 5), the max over the group from -1 (std::max's order).
__global__ void __launch_bounds__(kThreads) routing_gate_kernel(RoutingParams p, float inv_sqrt) {
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= p.spans) return;
  float best = -1.f;
  for (int r = 0; r < p.rows; ++r) {
    const float a = hd::sekv_route(hd::dot(p.q_proj + int64_t(r) * p.d_proj, p.summaries + s * p.d_proj, p.d_proj),
                                   inv_sqrt, p.span_len[s]);
    best = best < a ? a : best;
  }
  p.best[s] = best;
}

// The candidates (a complete span whose gate passes the threshold) keep their gate, the others NaN (rank
// last); count[2r] = row r's candidates. One thread per (row, span).
__global__ void __launch_bounds__(kThreads) zoom_candidates_kernel(ZoomParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(p.rows) * p.spans) return;
  const int64_t r = i / p.spans, s = i % p.spans;
  const bool cand = p.span_end[s] - 1 <= p.position && double(p.gate[i]) > p.threshold;
  p.keys[i] = cand ? p.gate[i] : NAN;
  if (cand) atomicAdd(&p.count[2 * r], 1);
}

// The ranked candidates while they fit: the first misfit ends the expansion, so the zoomed spans are the
// longest prefix of the ranking (`candidates` of them, read on the device: the host never waits for it)
// whose lengths sum to at most room. Span lengths are integers, so their running sum is exact in any
// order (int64 here, the host's double holds it exactly): each thread sums a contiguous chunk of the
// ranking, a shuffle scan gives each chunk's offset, the first running sum above room is the cut
// (atomicMin over the chunks that hold a misfit), and the block copies the prefix. ranked_at(j) is the
// span at rank j (global memory, or the fused kernel's shared words). Every thread calls it.
template <class RankedAt>
__device__ void zoom_budget(const ZoomParams& p, int64_t row, int64_t candidates, const RankedAt& ranked_at) {
  __shared__ long long warp_total[kBudgetThreads / 32];
  __shared__ long long cut;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int32_t* const zoomed = p.zoomed + row * p.spans;
  const int64_t per = (candidates + blockDim.x - 1) / blockDim.x;
  const int64_t j0 = tid * per < candidates ? tid * per : candidates;
  const int64_t j1 = j0 + per < candidates ? j0 + per : candidates;
  long long own = 0;
  for (int64_t j = j0; j < j1; ++j) own += p.span_len[ranked_at(j)];
  long long incl = own;
  for (int off = 1; off < 32; off <<= 1) {
    const long long v = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += v;
  }
  if (lane == 31) warp_total[warp] = incl;
  if (tid == 0) cut = candidates;
  __syncthreads();
  long long run = incl - own, total = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) {
    if (w < warp) run += warp_total[w];
    total += warp_total[w];
  }
  int64_t misfit = -1;
  for (int64_t j = j0; j < j1; ++j) {
    const long long next = run + p.span_len[ranked_at(j)];
    if (double(next) > p.room + 1e-9) {
      misfit = j;
      atomicMin(&cut, (long long)j);
      break;
    }
    run = next;
  }
  __syncthreads();
  const int64_t z = cut;
  for (int64_t j = tid; j < z; j += blockDim.x) zoomed[j] = ranked_at(j);
  if (misfit >= 0 && misfit == z) p.used[row] = double(run);  // the sum before the first misfit
  if (tid == 0) {
    p.count[2 * row] = int32_t(candidates);
    p.count[2 * row + 1] = int32_t(z);
    if (z == candidates) p.used[row] = double(total);  // every candidate fits
  }
}

// A row ranked through global memory (rows longer than kFusedSpans): count[2 row] candidates, ranked by
// topk.cu. One block of kBudgetThreads per row; was one thread walking the ranking, a chain of two
// dependent loads per candidate.
__global__ void __launch_bounds__(kBudgetThreads) zoom_budget_kernel(ZoomParams p) {
  const int64_t row = blockIdx.x;
  const int32_t* const ranked = p.ranked + row * p.spans;
  zoom_budget(p, row, p.count[2 * row], [&](int64_t j) { return ranked[j]; });
}

// A row of at most kFusedSpans spans, zoomed by one block in shared memory (docs/validation/phase-bytes.md,
// rule 4): each span's gate and end read once, a candidate's rank word (hd::rank_word: decreasing gate,
// ties by the lower span, the host's stable order) kept, the others kExcluded (they sort last and are
// never read), a bitonic sort of the words, then the budget over the sorted words. DRAM sees the gates,
// the spans' ends and the lengths the budget reads, and the zoomed ids: no rank keys or ranking written
// and re-read, no memset, one launch. cap: the row's length rounded up to a power of two.
__global__ void __launch_bounds__(kBudgetThreads) zoom_fused_kernel(ZoomParams p, int64_t cap) {
  __shared__ bs::Word words[kFusedSpans];
  __shared__ int candidates;
  const int tid = threadIdx.x;
  const int64_t row = blockIdx.x;
  const float* const gate = p.gate + row * p.spans;
  if (tid == 0) candidates = 0;
  __syncthreads();
  int own = 0;
  for (int64_t i = tid; i < cap; i += blockDim.x) {
    bs::Word w = bs::kExcluded;
    if (i < p.spans) {
      const float g = gate[i];
      if (p.span_end[i] - 1 <= p.position && double(g) > p.threshold) w = hd::rank_word(g, int32_t(i)), ++own;
    }
    words[i] = w;
  }
  for (int off = 16; off > 0; off >>= 1) own += __shfl_down_sync(0xffffffffu, own, off);
  if ((tid & 31) == 0 && own > 0) atomicAdd(&candidates, own);
  __syncthreads();
  bs::bitonic_sort(words, cap);
  zoom_budget(p, row, candidates, [&](int64_t j) { return int32_t(uint32_t(words[j])); });
}
}  // namespace

void pca_projection(const PcaParams& p) {
  const auto fail = [](const std::string& why) { throw std::runtime_error("opt::pca_projection: " + why); };
  if (p.n <= 0 || p.d <= 0) fail("no keys (n " + std::to_string(p.n) + ", d " + std::to_string(p.d) + ")");
  if (p.d > kMaxDim) fail("d " + std::to_string(p.d) + " above 256");
  if (p.d_proj < 0 || p.d_proj > p.d) fail("d_proj outside [0, d]");
  if (!p.mean || !p.cov || !p.vecs) fail("scratch missing");
  KVSIM_LAUNCH(column_mean_kernel, check::blocks_for(p.d, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::pca_projection (means)");
  KVSIM_LAUNCH(covariance_kernel, check::blocks_for(int64_t(p.d) * p.d, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::pca_projection (covariance)");
  KVSIM_LAUNCH(pca_eigen_kernel, 1, 1)(p);
  check::check(cudaGetLastError(), "opt::pca_projection (eigenvectors)");
}

void span_summaries(const SpanSummaryParams& p) {
  if (p.spans < 0 || p.d <= 0 || p.d_proj < 0) throw std::runtime_error("opt::span_summaries: bad size");
  if (p.spans == 0) return;
  KVSIM_LAUNCH(span_means_kernel, check::blocks_for(p.spans * p.d, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::span_summaries (means)");
  KVSIM_LAUNCH(span_summary_kernel, check::blocks_for(p.spans, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::span_summaries (projection)");
}

void sekv_routing(const RoutingParams& p) {
  if (p.rows < 0 || p.d <= 0 || p.d_proj <= 0 || p.spans < 0) throw std::runtime_error("opt::sekv_routing: bad size");
  if (p.spans == 0) return;
  if (p.rows > 0) {
    KVSIM_LAUNCH(query_projection_kernel, check::blocks_for(int64_t(p.rows) * p.d_proj, kThreads), kThreads)(p);
    check::check(cudaGetLastError(), "opt::sekv_routing (projection)");
  }
  const float inv_sqrt = 1.f / std::sqrt(float(p.d_proj));  // on the host, as ref::sekv_routing_scores has it
  KVSIM_LAUNCH(routing_gate_kernel, check::blocks_for(p.spans, kThreads), kThreads)(p, inv_sqrt);
  check::check(cudaGetLastError(), "opt::sekv_routing (gates)");
}

int64_t sekv_zoom_workspace_words(int64_t spans, int rows) {
  if (spans <= kFusedSpans) return 0;  // zoomed in shared memory
  TopkParams t;  // every span of every row ranked
  t.rows = rows, t.n = spans, t.k = spans, t.rank_order = true;
  return spans > 0 && rows > 0 ? int64_t(rows) * topk_workspace_words(t) : 0;
}

// Rows longer than kFusedSpans: candidates into rank keys (non-candidates NaN), every span ranked by
// topk.cu (so the host need not read the candidates' count before choosing k: the first count[0] ranks are
// exactly topk(keys, count[0])), then the budget.
static void zoom_ranked(const ZoomParams& p) {
  check::check(cudaMemsetAsync(p.count, 0, 2 * sizeof(int32_t) * size_t(p.rows)), "opt::sekv_zoom (count)");
  KVSIM_LAUNCH(zoom_candidates_kernel, check::blocks_for(int64_t(p.rows) * p.spans, kThreads), kThreads)(p);
  check::check(cudaGetLastError(), "opt::sekv_zoom (candidates)");
  TopkParams t;
  t.scores = p.keys, t.out = p.ranked, t.rows = p.rows, t.n = p.spans, t.k = p.spans, t.rank_order = true;
  t.workspace = p.workspace;
  topk(t);
  KVSIM_LAUNCH(zoom_budget_kernel, unsigned(p.rows), kBudgetThreads)(p);
  check::check(cudaGetLastError(), "opt::sekv_zoom (budget)");
}

int64_t sekv_zoom(const ZoomParams& p) {
  if (p.spans < 0) throw std::runtime_error("opt::sekv_zoom: spans < 0");
  if (p.rows < 1) throw std::runtime_error("opt::sekv_zoom: rows " + std::to_string(p.rows) + " < 1");
  if (p.spans == 0) {
    const std::vector<double> zero_used(size_t(p.rows), 0.0);
    check::check(cudaMemcpy(p.used, zero_used.data(), zero_used.size() * sizeof(double), cudaMemcpyHostToDevice),
                 "opt::sekv_zoom (used)");
    return 0;
  }
  if (p.spans <= kFusedSpans) {
    int64_t cap = 1;
    while (cap < p.spans) cap <<= 1;
    // A block as wide as the row's words (at least a warp): a short row does not pay 1024 threads' barriers.
    const unsigned threads = unsigned(cap < 32 ? 32 : cap < kBudgetThreads ? cap : kBudgetThreads);
    KVSIM_LAUNCH(zoom_fused_kernel, unsigned(p.rows), threads)(p, cap);
    check::check(cudaGetLastError(), "opt::sekv_zoom (fused)");
  } else {
    zoom_ranked(p);
  }
  std::vector<int32_t> counts(2 * size_t(p.rows));
  check::check(cudaMemcpy(counts.data(), p.count, counts.size() * sizeof(int32_t), cudaMemcpyDeviceToHost),
               "opt::sekv_zoom (zoomed)");
  int64_t zoomed = 0;
  for (int r = 0; r < p.rows; ++r) zoomed += counts[2 * size_t(r) + 1];
  return zoomed;
}

}  // namespace kvsim::opt::KVSIM_CUDA_BACKEND
