#include "policies/phase_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>

#include "kernels/emu/counters.hpp"
#include "kernels/optimized/cuda.hpp"
#include "kernels/optimized/run_planner.hpp"
#include "kernels/reference/cuda.hpp"

namespace kvsim {
namespace kernel_blocks {
namespace {
namespace R = ref::cuda_emu;
namespace O = opt::cuda_emu;
template <class T>
using Buf = R::DeviceBuffer<T>;

// Inputs are set up with counting paused, so a caller's CountScope sees the kernels' own launches, copies
// and synchronizations only.
struct Setup {
  std::optional<emu::CountPause> pause{std::in_place};
  void done() { pause.reset(); }
};

Buf<float> random_buffer(size_t n, uint32_t seed) {
  std::vector<float> h(n);
  std::minstd_rand rng(seed + 1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : h) x = u(rng);
  return Buf<float>(h);
}
}  // namespace

void paged_attention(const Deployment& d, double tokens, int page_size, bool scattered) {
  Setup setup;
  const int hq = int(d.hq), hkv = int(d.hkv_cached), hd = d.model->head_dim;
  const int64_t n = std::max<int64_t>(1, int64_t(std::llround(tokens)));
  const int64_t pages = (n + page_size - 1) / page_size, cache_pages = scattered ? 2 * pages : pages;
  const size_t page_elems = size_t(page_size) * hkv * hd;
  auto K = random_buffer(size_t(cache_pages) * page_elems, 1), V = random_buffer(size_t(cache_pages) * page_elems, 2);
  auto q = random_buffer(size_t(hq) * hd, 3);
  std::vector<int32_t> idx(static_cast<size_t>(pages));
  for (int64_t i = 0; i < pages; ++i) idx[size_t(i)] = int32_t(scattered ? 2 * i : i);
  Buf<int32_t> indptr(std::vector<int32_t>{0, int32_t(pages)}), indices(idx),
      last(std::vector<int32_t>{int32_t(n - (pages - 1) * page_size)});
  Buf<float> out{size_t(hq) * hd}, lse{size_t(hq)};
  opt::PagedDecodeParams p;
  p.q = q.get(), p.k_pages = K.get(), p.v_pages = V.get();
  p.indptr = indptr.get(), p.indices = indices.get(), p.last_page_len = last.get();
  p.out = out.get(), p.lse = lse.get();
  p.batch = 1, p.num_qo_heads = hq, p.num_kv_heads = hkv, p.head_dim = hd, p.page_size = page_size;
  p.scale = 1.f / std::sqrt(float(hd)), p.max_pages_per_request = int(pages);
  Buf<float> ws{size_t(std::max<int64_t>(1, O::paged_decode_workspace_floats(p)))};
  p.workspace = ws.get();
  setup.done();
  O::paged_decode_attention(p);
}

void topk(int rows, int64_t n, int64_t k) {
  Setup setup;
  k = std::clamp<int64_t>(k, 1, n);
  auto scores = random_buffer(size_t(rows) * size_t(n), 4);
  Buf<int32_t> out{size_t(rows) * size_t(k)};
  opt::TopkParams p;
  p.scores = scores.get(), p.out = out.get(), p.rows = rows, p.n = n, p.k = k;
  Buf<unsigned long long> ws{size_t(std::max<int64_t>(1, O::topk_workspace_words(p) * rows))};
  p.workspace = ws.get();
  setup.done();
  O::topk(p);
}

void hierarchical_select(int64_t pages, int pages_per_chunk, int chunks_per_grid, int dim, double rho_g,
                         double rho_c, double rho_p) {
  Setup setup;
  const int64_t C = (pages + pages_per_chunk - 1) / pages_per_chunk, G = (C + chunks_per_grid - 1) / chunks_per_grid;
  const int64_t n = G + C + pages;
  auto M = random_buffer(size_t(n) * dim, 5), a = random_buffer(size_t(dim), 6);
  Buf<float> sc{size_t(n)};
  Buf<int32_t> g{size_t(G)}, ch{size_t(C)}, pg{size_t(pages)};
  Buf<int32_t> counts{size_t(3)};
  opt::ChessSelectParams p;
  p.anchor = a.get(), p.summaries = M.get(), p.scores = sc.get();
  p.num_pages = pages, p.pages_per_chunk = pages_per_chunk, p.chunks_per_grid = chunks_per_grid, p.d = dim;
  p.rho_g = rho_g, p.rho_c = rho_c, p.rho_p = rho_p;
  p.grids = g.get(), p.chunks = ch.get(), p.pages = pg.get(), p.level_counts = counts.get();
  setup.done();
  O::chess_select(p);
}

void centroid_recall(int group, int centroids, int dim, int rho, int c_prime, int64_t num_keys, int heads) {
  Setup setup;
  c_prime = std::clamp(c_prime, 1, centroids);
  const size_t H = size_t(heads);
  auto cent = random_buffer(H * group * centroids * dim, 7), q = random_buffer(H * group * dim, 8);
  std::vector<int32_t> ivf(H * centroids * rho);
  std::minstd_rand rng(9);
  for (auto& id : ivf) id = int32_t(rng() % uint32_t(num_keys));
  Buf<int32_t> divf(ivf), out{H * c_prime * rho}, chosen{H * c_prime}, count{H};
  Buf<float> scores{H * centroids};
  opt::CentroidRecallParams p;
  p.q = q.get(), p.centroids = cent.get(), p.ivf = divf.get(), p.out = out.get(), p.chosen = chosen.get();
  p.G = group, p.C = centroids, p.d = dim, p.rho = rho, p.c_prime = c_prime, p.num_keys = num_keys, p.heads = heads;
  p.centroid_scores = scores.get(), p.count = count.get();
  setup.done();
  O::centroid_recall(p);
}

void group_scores(int group, int64_t vectors, int dim, int kv_heads, bool bounds) {
  Setup setup;
  const size_t per = size_t(kv_heads) * size_t(vectors) * size_t(dim);
  auto q = random_buffer(size_t(kv_heads) * group * dim, 28), lo = random_buffer(per, 29);
  auto hi = bounds ? random_buffer(per, 30) : Buf<float>{size_t(1)};
  Buf<float> out{size_t(kv_heads) * group * size_t(vectors)};
  opt::GroupScoreParams p;
  p.q = q.get(), p.vectors = lo.get(), p.hi = bounds ? hi.get() : nullptr, p.out = out.get();
  p.kv_heads = kv_heads, p.group = group, p.d = dim, p.n = vectors, p.scale = 1.f / std::sqrt(float(dim));
  setup.done();
  O::group_scores(p);
}

void page_select(int64_t pages, int64_t k, int rows) {
  Setup setup;
  k = std::clamp<int64_t>(k, 1, pages);
  auto bound = random_buffer(size_t(rows) * size_t(pages), 24);
  Buf<int32_t> out{size_t(rows) * size_t(k)};
  opt::PageSelectParams p;
  p.bound = bound.get(), p.pages = pages, p.k = k, p.rows = rows, p.out = out.get();
  Buf<unsigned long long> ws{size_t(std::max<int64_t>(1, O::quest_select_workspace_words(p)))};
  p.workspace = ws.get();
  setup.done();
  O::quest_select_pages(p);
}

void sekv_route_gates(int heads, int dim, int d_proj, int64_t spans) {
  Setup setup;
  auto q = random_buffer(size_t(heads) * dim, 25), W = random_buffer(size_t(heads) * dim * d_proj, 26),
       sum = random_buffer(size_t(heads) * size_t(spans) * d_proj, 27);
  Buf<int32_t> len(std::vector<int32_t>(size_t(spans), 32));
  Buf<float> gates{size_t(heads) * size_t(spans)};
  opt::RouteGatesParams p;
  p.q = q.get(), p.W = W.get(), p.summaries = sum.get(), p.span_len = len.get(), p.gates = gates.get();
  p.heads = heads, p.group = 1, p.d = dim, p.d_proj = d_proj, p.spans = spans;
  setup.done();
  O::route_gates(p);
}

void sekv_zoom(int64_t spans, double threshold, int rows, int span_tokens, double room) {
  Setup setup;
  std::vector<float> g(size_t(rows) * size_t(spans));
  std::minstd_rand rng(23);
  for (auto& x : g) x = float(rng() % 1000) / 1000.f;  // gates in [0, 1)
  std::vector<int32_t> len(static_cast<size_t>(spans), span_tokens), end(static_cast<size_t>(spans));
  for (int64_t i = 0; i < spans; ++i) end[size_t(i)] = int32_t(span_tokens * (i + 1));
  Buf<float> gate(g), keys{size_t(rows) * size_t(spans)};
  Buf<int32_t> dlen(len), dend(end), zoomed{size_t(rows) * size_t(spans)}, ranked{size_t(rows) * size_t(spans)},
      count{2 * size_t(rows)};
  Buf<double> used{size_t(rows)};
  opt::ZoomParams p;
  p.gate = gate.get(), p.span_len = dlen.get(), p.span_end = dend.get(), p.spans = spans, p.rows = rows;
  p.position = int64_t(span_tokens) * spans, p.threshold = threshold, p.room = room;
  p.zoomed = zoomed.get(), p.keys = keys.get(), p.ranked = ranked.get(), p.count = count.get(), p.used = used.get();
  Buf<unsigned long long> ws{size_t(std::max<int64_t>(1, O::sekv_zoom_workspace_words(spans, rows)))};
  p.workspace = ws.get();
  setup.done();
  O::sekv_zoom(p);
}

void sekv_reconstruct(int64_t spans, int span_tokens, int rank, int dim, int kv_heads) {
  Setup setup;
  // Every zoomed span's K and V for each KV head: a low-rank block of us [span_tokens, rank] then vt
  // [rank, dim], packed one after another as fetch_factors lands them.
  const int64_t blocks = spans * kv_heads * 2, per = int64_t(rank) * (span_tokens + dim);
  auto factors = random_buffer(size_t(std::max<int64_t>(1, blocks * per)), 24);
  std::vector<int64_t> off(static_cast<size_t>(blocks)), out_row(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) off[size_t(b)] = b * per, out_row[size_t(b)] = b * span_tokens;
  Buf<int64_t> doff(off), drow(out_row);
  Buf<int32_t> rows(std::vector<int32_t>(size_t(blocks), span_tokens)), ranks(std::vector<int32_t>(size_t(blocks), rank));
  Buf<float> out{size_t(std::max<int64_t>(1, blocks * span_tokens * dim))};
  opt::ReconstructParams p;
  p.factors = factors.get(), p.factor_offset = doff.get(), p.rows = rows.get(), p.rank = ranks.get();
  p.out_row = drow.get(), p.blocks = int(blocks), p.d = dim, p.out = out.get();
  setup.done();
  O::sekv_reconstruct(p);
}

void merge_states(int rows, int dim) {
  Setup setup;
  auto oa = random_buffer(size_t(rows) * dim, 15), ob = random_buffer(size_t(rows) * dim, 16);
  auto la = random_buffer(size_t(rows), 17), lb = random_buffer(size_t(rows), 18);
  Buf<float> lse{size_t(rows)};
  setup.done();
  R::merge_state(oa.get(), la.get(), ob.get(), lb.get(), rows, dim, oa.get(), lse.get());
}

void segment_means(int64_t segments, int rows_per_segment, int dim) {
  Setup setup;
  auto X = random_buffer(size_t(segments * rows_per_segment) * dim, 19);
  std::vector<int32_t> starts(static_cast<size_t>(segments));
  for (int64_t i = 0; i < segments; ++i) starts[size_t(i)] = int32_t(i * rows_per_segment);
  Buf<int32_t> st(starts);
  Buf<float> out{size_t(segments) * dim};
  setup.done();
  R::segment_weighted_mean(X.get(), nullptr, segments * rows_per_segment, dim, st.get(), segments, out.get());
}

void gather_runs(int64_t rows, int64_t row_elems, int64_t run_rows) {
  Setup setup;
  run_rows = std::max<int64_t>(1, run_rows);
  const int64_t src_rows = 2 * rows;
  auto host = std::shared_ptr<void>(R::pinned_alloc(size_t(src_rows * row_elems) * 4), R::pinned_free);
  std::fill_n(static_cast<float*>(host.get()), src_rows * row_elems, 0.5f);
  std::vector<int32_t> list;  // runs of run_rows adjacent rows, every other run
  for (int64_t r = 0; int64_t(list.size()) < rows; r += 2 * run_rows)
    for (int64_t j = 0; j < run_rows && int64_t(list.size()) < rows; ++j) list.push_back(int32_t(r + j));
  const auto runs = opt::plan_page_runs(list, 1, 0);
  Buf<int32_t> sr(runs.src_row), dr(runs.dst_row), rr(runs.rows);
  Buf<float> dst{size_t(runs.total_rows * row_elems)};
  opt::GatherRunsParams p;
  p.src = static_cast<const float*>(host.get()), p.dst = dst.get();
  p.src_row = sr.get(), p.dst_row = dr.get(), p.rows = rr.get(), p.num_runs = runs.size(), p.row_elems = row_elems;
  setup.done();
  O::gather_runs(p);
}

void uncertainty(int64_t vocab, int rows) {
  Setup setup;
  auto logits = random_buffer(size_t(rows) * size_t(vocab), 25);
  Buf<float> out{2 * size_t(rows)}, partials{size_t(std::max<int64_t>(4, O::uncertainty_partials_floats(vocab, rows)))};
  opt::UncertaintyParams p;
  p.logits = logits.get(), p.vocab = vocab, p.rows = rows, p.out = out.get(), p.partials = partials.get();
  setup.done();
  O::uncertainty(p);
}

void transfer(double bytes, double run_bytes, bool to_device) {
  if (bytes < 1) return;
  if (to_device && run_bytes >= 4) {
    const int64_t row_elems = std::max<int64_t>(1, std::llround(run_bytes / 4));
    gather_runs(std::max<int64_t>(1, std::llround(bytes / (4.0 * double(row_elems)))), row_elems, 1);
    return;
  }
  // One copy of n bytes, counted with its host synchronization (DeviceBuffer's upload and download are
  // blocking cudaMemcpy calls; the model's copy is an async one the stream orders: the bytes are the same).
  const size_t n = size_t(std::llround(bytes));
  if (to_device) {
    std::vector<unsigned char> host(n, 1);
    Buf<unsigned char> dev(host);
  } else {
    Setup setup;
    Buf<unsigned char> dev(std::vector<unsigned char>(n, 1));
    setup.done();
    (void)dev.download(n);
  }
}
}  // namespace kernel_blocks

PhaseKernelLink copy_link(std::string_view phase, std::function<double(const ParamValues&)> runs_per_step) {
  PhaseKernelLink l;
  l.phase = phase;
  l.runs_per_step = runs_per_step;
  l.run = [runs_per_step](const Deployment&, const ParamValues& v, const StepShape& s, const Phase& model) {
    const bool to_device = model.work.h2d_bytes > 0;
    const double runs = runs_per_step ? runs_per_step(v) : 1.0;
    // The phase's work is its total over `repeat` layers (or steps) and the batch.
    const double per = s.batch * (model.repeat > 0 ? double(model.repeat) : 1.0) * runs;
    kernel_blocks::transfer((model.work.h2d_bytes + model.work.d2h_bytes) / per, model.run_bytes, to_device);
  };
  l.kernels = "the transfer the phase models: opt::gather_runs from mapped pinned host memory (runs of the "
              "phase's run length), or one cudaMemcpyAsync (contiguous, or to the host)";
  return l;
}

double attended_tokens(const Deployment& d, const StepShape& s, const Phase& model) {
  return model.work.flops / (double(d.model->layers) * s.batch * d.hq * (4.0 * d.model->head_dim + 5));
}

double scored_vectors(const Deployment& d, const StepShape& s, const Phase& model, double heads, double dim) {
  return model.work.flops / (double(d.model->layers) * s.batch * heads * (2 * dim + 2));
}

PhaseKernelLink attention_link(std::string_view phase, std::function<int(const ParamValues&)> page_size,
                               bool scattered) {
  PhaseKernelLink l;
  l.phase = phase;
  l.kernels = std::string("opt::paged_decode_attention (split-KV, GQA") + (scattered ? ", a selected page list)" : ")");
  l.run = [page_size, scattered](const Deployment& d, const ParamValues& p, const StepShape& s, const Phase& model) {
    kernel_blocks::paged_attention(d, attended_tokens(d, s, model), page_size ? page_size(p) : 16, scattered);
  };
  return l;
}

}  // namespace kvsim
