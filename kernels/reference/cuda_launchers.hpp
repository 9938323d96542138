// The launchers of the simple CUDA versions of the main reference kernels (kernels/reference/*.cu), in
// the namespace kvsim::ref::KVSIM_CUDA_LAUNCHERS_NS. Include kernels/reference/cuda.hpp, which includes
// this file once per build of the .cu sources (deliberately no include guard). Each launcher takes
// DEVICE pointers with the same shapes and meaning as its host twin in kvsim::ref (named in each
// comment), runs on the default stream and synchronizes, and throws std::runtime_error on a CUDA error
// (or, under the emulator, on a kernel that would hang or is undefined on a GPU). The per-element math
// is shared with the host versions through hd.hpp. No header here needs cuda_runtime.h.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace kvsim::ref::KVSIM_CUDA_LAUNCHERS_NS {

// ---- device memory (so tests and replay need no CUDA headers) ----
void* device_alloc(size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n), p_(n ? static_cast<T*>(device_alloc(n * sizeof(T))) : nullptr) {}
  explicit DeviceBuffer(const std::vector<T>& h) : DeviceBuffer(h.size()) { upload(h); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : n_(o.n_), p_(o.p_) { o.n_ = 0, o.p_ = nullptr; }
  ~DeviceBuffer() { device_free(p_); }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& h) { copy_to_device(p_, h.data(), h.size() * sizeof(T)); }
  std::vector<T> download(size_t n) const {
    std::vector<T> h(n);
    copy_to_host(h.data(), p_, n * sizeof(T));
    return h;
  }
  std::vector<T> download() const { return download(n_); }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

// ---- attention (one thread block per query row; out[rows, d], lse[rows]) ----
// decode_attention / gqa_decode_attention: Q[rows, d] each against K[n, d], V[n, d].
void decode_attention(const float* Q, int rows, const float* K, const float* V, int64_t n, int d, float scale,
                      float* out, float* lse);
// gather_attention / gqa_gather_attention: Q[rows, d] each over rows idx[0..m) of K, V (indices unchecked).
void gather_attention(const float* Q, int rows, const float* K, const float* V, const int32_t* idx, int64_t m, int d,
                      float scale, float* out, float* lse);
// biased_attention over assembled entries: K[m, d], V[m, d], bias[m] (SEKV: log|S| on coarse entries).
void biased_attention(const float* Q, int rows, const float* K, const float* V, const float* bias, int64_t m, int d,
                      float scale, float* out, float* lse);
// paged_decode_attention: q[B, num_qo_heads, head_dim]; cache NHD [num_pages, page_size, num_kv_heads,
// head_dim]; indptr[B+1], indices, last_page_len[B] on the device. Sparse paged attention is the same call
// with a rewritten indices list.
void paged_decode_attention(const float* q, int batch, int num_qo_heads, const float* k_pages, const float* v_pages,
                            int page_size, int num_kv_heads, int head_dim, const int32_t* indptr,
                            const int32_t* indices, const int32_t* last_page_len, float scale, float* out, float* lse);

// merge_state, row-wise: out[rows, d], lse_out[rows] from two states of rows (out may alias o_a or o_b;
// lse_out must not alias lse_a or lse_b).
void merge_state(const float* o_a, const float* lse_a, const float* o_b, const float* lse_b, int rows, int d,
                 float* out, float* lse_out);

// score_gemm: S[m, n] = scale·Q·Mᵀ, or cosine when `cosine`.
void score_gemm(const float* Q, int64_t m, const float* M, int64_t n, int d, float* S, bool cosine, float scale = 1.f);
// sekv_routing_scores: alpha[m] = sigmoid(q'·summary_s / sqrt(d') + log|S_s|), summaries[m, d'],
// span_len[m] >= 1 (device).
void sekv_routing_scores(const float* q_proj, const float* summaries, int64_t m, int d_proj, const int32_t* span_len,
                         float* alpha);

// topk, per row of scores[rows, n]: out[rows, min(k, n)] in rank order (higher first, ties by lower
// index, NaN last) — a full sort per row (thrust), deliberately simple. Returns min(k, n).
int64_t topk_rows(const float* scores, int rows, int64_t n, int64_t k, int32_t* out);
// dedup_inplace: sorts ids[0..n) and removes repeats; returns the new length.
int64_t dedup_inplace(int32_t* ids, int64_t n);
// gather_rows: dst[m, row_elems] = src rows idx[0..m) (indices unchecked).
void gather_rows(const float* src, int64_t row_elems, const int32_t* idx, int64_t m, float* dst);
// The same for int32 rows (CTKVR's IVF lists; row_elems 1 maps positions to ids).
void gather_rows(const int32_t* src, int64_t row_elems, const int32_t* idx, int64_t m, int32_t* dst);
// lowrank_reconstruct: out[n, d] = us[n, r] · vt[r, d].
void lowrank_reconstruct(const float* us, const float* vt, int64_t n, int r, int d, float* out);
// svd_jacobi (the GPU twin of truncated_svd before its rank rule): one-sided Jacobi SVD, in double, of
// each of `batch` matrices X[b][n, d] (n >= d), one thread block per matrix. Writes sigma[b][d]
// descending, us[b][n, d] = the columns of U·Σ in that order and vt[b][d, d] = the rows of Vᵀ in that
// order; the rank-r factors are the first r columns of us and rows of vt (choose_rank picks r).
void svd_jacobi(const float* X, int batch, int64_t n, int d, float* sigma, float* us, float* vt);
// quest_page_bound: bound[num_pages] from kmin, kmax [num_pages, d].
void quest_page_bound(const float* q, const float* kmin, const float* kmax, int64_t num_pages, int d, float* bound);


// ---- prefill builders, staging gather, CTKVR (kernels/reference/builders.cu) ----
// segment_weighted_mean (segment_mean when w is null): X[n, d], starts[S] (device, strictly increasing,
// unchecked) -> out[S, d]; a segment whose weights sum to 0 takes the plain mean, as on the host.
void segment_weighted_mean(const float* X, const float* w, int64_t n, int d, const int32_t* starts, int64_t S,
                           float* out);
// gather_runs: runs (starts[r], lens[r]) of rows of src, back to back into dst; returns the rows written.
// src may be mapped pinned host memory (UVA), which makes this the zero-copy staging gather.
int64_t gather_runs(const float* src, int64_t row_elems, const int32_t* starts, const int32_t* lens, int64_t runs,
                    float* dst);
// softmax_rows (in place, max-shifted) and reduce_max_rows, one thread per row / per column.
void softmax_rows(float* S, int64_t m, int64_t n);
void reduce_max_rows(const float* S, int64_t m, int64_t n, float* out);
// qcivf_build: centroids[G, C, d], K[n, d] -> ivf[C, min(rho, n)]; returns min(rho, n). Composed of the
// launchers above exactly as the host version composes its own (score, softmax, max over the group, top-k).
int qcivf_build(const float* centroids, int G, int C, const float* K, int64_t n, int d, float scale, int rho,
                int32_t* ivf);
// ctkvr_rerank: Q[G, d], K[n, d], recalled ids[m] -> out[min(rho_prime, m)] key ids in rank order;
// returns that count.
int64_t ctkvr_rerank(const float* Q, int G, const float* K, int d, const int32_t* recalled, int64_t m, float scale,
                     int64_t rho_prime, int32_t* out);

// ctkvr_recall: q[G, d], centroids[G, C, d], ivf[C, rho] (device) -> out = the sorted, unique union of
// the ivf rows of the top C' = min(c_prime, C) centroids by cosine (max over the group); out needs room
// for C'·rho ids; returns the count. chosen (device, C' ids in rank order) is written when not null.
int64_t ctkvr_recall(const float* q, int G, const float* centroids, int C, int d, const int32_t* ivf, int rho,
                     int c_prime, int32_t* out, int32_t* chosen = nullptr);

// ---- selection (kernels/reference/select.cu): quantile retention and CHESS hierarchical masking ----
// quantile_select: kept[quantile_keep_count(rho, n)] = the kept indices of scores[n], ascending (ties
// at the threshold by the lower index); returns that count. A top-k (topk_rows) then a sort.
int64_t quantile_select(const float* scores, int64_t n, double rho, int32_t* kept);
// chess_hierarchical_select with parent maps chunk_parent[C], page_parent[P] (device, unchecked): the
// kept ids per level, ascending, into grids[G], chunks[C], pages[P] (device); masked_all picks
// QuantileScope::masked_all (Algorithm 1 read literally) instead of survivors (see select.hpp).
struct LevelCounts {
  int64_t grids = 0, chunks = 0, pages = 0;
};
LevelCounts chess_hierarchical_select(const float* grid_scores, int64_t G, const float* chunk_scores, int64_t C,
                                      const float* page_scores, int64_t P, const int32_t* chunk_parent,
                                      const int32_t* page_parent, double rho_g, double rho_c, double rho_p,
                                      bool masked_all, int32_t* grids, int32_t* chunks, int32_t* pages);
// The regular hierarchy: page p in chunk p / pages_per_chunk, chunk c in grid c / chunks_per_grid;
// G = ceil(C / N_g), C = ceil(P / N_c). Throws std::invalid_argument on N_c or N_g <= 0.
LevelCounts chess_hierarchical_select(const float* grid_scores, const float* chunk_scores, const float* page_scores,
                                      int64_t P, int pages_per_chunk, int chunks_per_grid, double rho_g, double rho_c,
                                      double rho_p, bool masked_all, int32_t* grids, int32_t* chunks, int32_t* pages);

// ---- observation-window scores (kernels/reference/window.cu) ----
// obs_window_scores: Qw[G, w, d], K[n, d] -> scores[n - w] (see window.hpp); requires 0 < w <= n.
void obs_window_scores(const float* Qw, int G, int w, const float* K, int64_t n, int d, float scale, float* scores);
// pool1d: max (is_max) or avg pooling with kernel k, stride 1, padding k/2; k <= 1 copies.
void pool1d(const float* in, int64_t n, int k, bool is_max, float* out);
// chunk_sum: out[ceil(n / chunk)]; throws std::invalid_argument on chunk <= 0.
void chunk_sum(const float* scores, int64_t n, int chunk, float* out);

// ---- timing and pinned memory for `kvsim validate --device cuda` (kernels/reference/event_timer.cu) ----
// Seconds between two CUDA events recorded on the default stream around f() (f may launch and
// synchronize; the launchers above do).
double event_seconds(const std::function<void()>& f);
void* pinned_alloc(size_t bytes);  // page-locked host memory (cudaMallocHost)
void pinned_free(void* p);
// One host-to-device copy from pinned memory on the default stream (synchronized).
void copy_h2d(void* dst_device, const void* src_pinned, size_t bytes);

}  // namespace kvsim::ref::KVSIM_CUDA_LAUNCHERS_NS
