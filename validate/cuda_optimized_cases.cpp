// The optimized CUDA kernels (kernels/optimized/*.cu) as validation cases (`kvsim validate --device
// cuda`), timed with CUDA events like the reference ones (cuda_cases.cpp appends this list). Each
// case's Work is the kernel's bound from kernels/optimized/README.md, so the report's efficiency is the
// fraction of that bound the kernel reaches on the user's GPU. Compiled everywhere; empty without CUDA.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "validate/cuda_inputs.hpp"
#include "validate/validate.hpp"
#if defined(KVSIM_HAVE_CUDA)
#include "kernels/optimized/cuda.hpp"
#include "kernels/optimized/run_planner.hpp"
#include "kernels/reference/cuda.hpp"
#endif

namespace kvsim::validate {

#if defined(KVSIM_HAVE_CUDA)
namespace {
using Vec = std::vector<float>;
template <class T>
using DBuf = ref::cuda::DeviceBuffer<T>;
template <class T>
using Shared = std::shared_ptr<DBuf<T>>;
// Llama-3-8B's attention per GPU: 32 query heads on 8 KV heads of 128; FlashInfer's default page of 16.
constexpr int kHq = 32, kHkv = 8, kD = 128, kPage = 16;

// Split-KV paged decode over n tokens of one request, pages in cache order (dense) or a random
// selection of pages from a cache 4 times larger (sparse page list, CHESS's zero-copy selection).
Instance paged_instance(int64_t n, bool sparse, double cold) {
  const int64_t pages = (n + kPage - 1) / kPage, cache_pages = sparse ? 4 * pages : pages;
  const double kv_bytes = 2.0 * double(n) * kHkv * kD * 4;  // K and V read once per KV head
  Instance in = cycled(2.0 * double(cache_pages) * kPage * kHkv * kD * 4, cold, 0, [=](uint32_t seed) {
    const size_t cache = size_t(cache_pages) * kPage * kHkv * kD;
    auto K = device_random(cache, seed), V = device_random(cache, seed + 1), q = device_random(size_t(kHq) * kD, seed + 2);
    std::vector<int32_t> idx(static_cast<size_t>(cache_pages));
    std::iota(idx.begin(), idx.end(), 0);
    if (sparse) std::shuffle(idx.begin(), idx.end(), std::mt19937(seed));
    idx.resize(size_t(pages));
    const std::vector<int32_t> indptr = {0, int32_t(pages)}, last = {int32_t(n - (pages - 1) * kPage)};
    auto dptr = std::make_shared<DBuf<int32_t>>(indptr), didx = std::make_shared<DBuf<int32_t>>(idx),
         dlast = std::make_shared<DBuf<int32_t>>(last);
    auto out = std::make_shared<DBuf<float>>(size_t(kHq) * kD), lse = std::make_shared<DBuf<float>>(size_t(kHq));
    opt::PagedDecodeParams p;
    p.q = q->get(), p.k_pages = K->get(), p.v_pages = V->get();
    p.indptr = dptr->get(), p.indices = didx->get(), p.last_page_len = dlast->get();
    p.out = out->get(), p.lse = lse->get();
    p.batch = 1, p.num_qo_heads = kHq, p.num_kv_heads = kHkv, p.head_dim = kD, p.page_size = kPage;
    p.scale = 1.f / std::sqrt(float(kD)), p.max_pages_per_request = int(pages);
    auto ws = std::make_shared<DBuf<float>>(size_t(std::max<int64_t>(1, opt::cuda::paged_decode_workspace_floats(p))));
    p.workspace = ws->get();
    return [=] {
      (void)K, (void)V, (void)q, (void)dptr, (void)didx, (void)dlast, (void)out, (void)lse, (void)ws;
      opt::cuda::paged_decode_attention(p);
    };
  }, 16);
  in.work.flops = double(kHq) * double(n) * (4 * kD + 5);
  in.work.hbm_bytes = kv_bytes;
  in.work.launches = 2;
  in.context_tokens = double(n);
  return in;
}

Case cuda_opt_paged_decode() {
  Case c{"cuda_opt_paged_decode", false, PhaseKind::attention, CurveVariable::context_tokens,
         "opt::paged_decode_attention (split-KV, GQA 32/8, float4, one request)", {4096, 16384, 65536, 131072}, 16384,
         nullptr};
  c.make = [](double s, int, double cold) { return paged_instance(int64_t(s), false, cold); };
  return c;
}

Case cuda_opt_sparse_paged() {
  Case c{"cuda_opt_sparse_paged", false, PhaseKind::attention, CurveVariable::context_tokens,
         "opt::paged_decode_attention over a shuffled page list (sparse, GQA 32/8)", {1024, 4096, 16384, 65536}, 4096,
         nullptr};
  c.make = [](double s, int, double cold) { return paged_instance(int64_t(s), true, cold); };
  return c;
}

Case cuda_opt_topk() {
  Case c{"cuda_opt_topk", false, PhaseKind::select, CurveVariable::bytes,
         "opt::topk (radix select + bitonic sort, one row, k = n/64)", {16384, 65536, 262144, 1048576}, 65536, nullptr};
  c.make = [](double s, int, double cold) {
    const int64_t n = int64_t(s), k = std::max<int64_t>(1, n / 64);
    Instance in = cycled(double(n) * 4, cold, 0, [=](uint32_t seed) {
      auto scores = device_random(size_t(n), seed);
      auto out = std::make_shared<DBuf<int32_t>>(size_t(k));
      auto ws = std::make_shared<DBuf<unsigned long long>>(size_t(std::max<int64_t>(1, opt::cuda::topk_workspace_words(k, n))));
      opt::TopkParams p;
      p.scores = scores->get(), p.out = out->get(), p.rows = 1, p.n = n, p.k = k, p.workspace = ws->get();
      return [=] {
        (void)scores, (void)out, (void)ws;
        opt::cuda::topk(p);
      };
    }, 64);
    in.work.hbm_bytes = double(n) * 4 + double(k) * 4;  // the floor: one read of the scores
    in.work.launches = 1;
    return in;
  };
  return c;
}

// The staging gather from mapped pinned host memory into device memory: 256 MiB of KV pages of 64 KiB
// (16 tokens · 8 KV heads · 128 · 4 B), scattered, merged into runs of run_bytes / 64 KiB pages.
Case cuda_opt_gather_runs() {
  Case c{"cuda_opt_gather_runs", false, PhaseKind::gather, CurveVariable::run_bytes,
         "opt::gather_runs (pinned host pages -> device, adjacent pages merged into runs)",
         {65536, 262144, 1048576, 4194304}, 1048576, nullptr};
  c.make = [](double s, int, double) {
    const int64_t page_elems = int64_t(kPage) * kHkv * kD, run_pages = std::max<int64_t>(1, int64_t(s) / (page_elems * 4));
    const int64_t src_pages = 4096, take = 1024;  // 256 MiB pinned, 64 MiB gathered
    auto host = std::shared_ptr<void>(ref::cuda::pinned_alloc(size_t(src_pages * page_elems * 4)), ref::cuda::pinned_free);
    std::fill_n(static_cast<float*>(host.get()), src_pages * page_elems, 0.5f);
    // Runs of run_pages adjacent pages at random run-aligned places.
    std::vector<int32_t> starts(static_cast<size_t>(src_pages / run_pages));
    std::iota(starts.begin(), starts.end(), 0);
    std::shuffle(starts.begin(), starts.end(), std::mt19937(7));
    std::vector<int32_t> pages;
    for (int32_t st : starts) {
      if (int64_t(pages.size()) >= take) break;
      for (int64_t j = 0; j < run_pages; ++j) pages.push_back(int32_t(st * run_pages + j));
    }
    const auto runs = opt::plan_page_runs(pages, 1, 0);
    auto sr = std::make_shared<DBuf<int32_t>>(runs.src_row), dr = std::make_shared<DBuf<int32_t>>(runs.dst_row),
         rr = std::make_shared<DBuf<int32_t>>(runs.rows);
    auto dst = std::make_shared<DBuf<float>>(size_t(runs.total_rows * page_elems));
    opt::GatherRunsParams p;
    p.src = static_cast<const float*>(host.get()), p.dst = dst->get();
    p.src_row = sr->get(), p.dst_row = dr->get(), p.rows = rr->get(), p.num_runs = runs.size(), p.row_elems = page_elems;
    Instance in;
    in.run = [=] {
      (void)host, (void)sr, (void)dr, (void)rr, (void)dst;
      opt::cuda::gather_runs(p);
    };
    in.work.h2d_bytes = double(runs.total_rows * page_elems) * 4;
    in.work.launches = 1;
    in.run_bytes = double(run_pages * page_elems) * 4;
    return in;
  };
  return c;
}

Case cuda_opt_centroid_recall() {
  Case c{"cuda_opt_centroid_recall", false, PhaseKind::score, CurveVariable::bytes,
         "opt::centroid_recall (G 4 cosines per centroid; top C/16 + bitmap dedup of rho 64 in one block)",
         {1024, 4096, 16384, 65536},
         4096, nullptr};
  c.make = [](double s, int, double cold) {
    const int G = 4, C = int(s), rho = 64, cp = std::max(1, C / 16);
    const int64_t num_keys = int64_t(C) * 16;
    Instance in = cycled(double(G) * C * kD * 4, cold, 0, [=](uint32_t seed) {
      auto cent = device_random(size_t(G) * C * kD, seed), q = device_random(size_t(G) * kD, seed + 1);
      std::vector<int32_t> ivf(size_t(C) * rho);
      std::minstd_rand rng(seed);
      for (auto& id : ivf) id = int32_t(rng() % uint32_t(num_keys));
      auto divf = std::make_shared<DBuf<int32_t>>(ivf);
      auto out = std::make_shared<DBuf<int32_t>>(size_t(cp) * rho), chosen = std::make_shared<DBuf<int32_t>>(size_t(cp)),
           count = std::make_shared<DBuf<int32_t>>(1);
      auto scores = std::make_shared<DBuf<float>>(size_t(C));
      opt::CentroidRecallParams p;
      p.q = q->get(), p.centroids = cent->get(), p.ivf = divf->get(), p.out = out->get(), p.chosen = chosen->get();
      p.G = G, p.C = C, p.d = kD, p.rho = rho, p.c_prime = cp, p.num_keys = num_keys;
      p.centroid_scores = scores->get(), p.count = count->get();
      return [=] {
        (void)cent, (void)q, (void)divf, (void)out, (void)chosen, (void)count, (void)scores;
        opt::cuda::centroid_recall(p);
      };
    }, 64);
    in.work.flops = double(G) * C * (6.0 * kD);
    // The centroids once, the chosen lists once (the dedup bitmap is on-chip), the ids out once.
    in.work.hbm_bytes = double(G) * C * kD * 4 + double(cp) * rho * 4 * 2;
    in.work.launches = 2;  // cosines; top C' + dedup + compaction in one block
    return in;
  };
  return c;
}
// CHESS's selection at P pages (N_c = 8, N_g = 8, d = 128, retentions 0.5/0.5/0.25).
Case cuda_opt_chess_select() {
  Case c{"cuda_opt_chess_select", false, PhaseKind::select, CurveVariable::bytes,
         "opt::chess_select (summary GEMV, warp per vector, then the three-level select in one block)",
         {1024, 4096, 16384, 65536}, 4096, nullptr};
  c.make = [](double s, int, double cold) {
    const int64_t P = int64_t(s), C = (P + 7) / 8, G = (C + 7) / 8, n = G + C + P;
    Instance in = cycled(double(n) * kD * 4, cold, 0, [=](uint32_t seed) {
      auto M = device_random(size_t(n) * kD, seed), a = device_random(size_t(kD), seed + 1);
      auto sc = std::make_shared<DBuf<float>>(size_t(n));
      auto g = std::make_shared<DBuf<int32_t>>(size_t(G)), ch = std::make_shared<DBuf<int32_t>>(size_t(C)),
           pg = std::make_shared<DBuf<int32_t>>(size_t(P));
      auto counts = std::make_shared<DBuf<int32_t>>(size_t(3));
      opt::ChessSelectParams p;
      p.anchor = a->get(), p.summaries = M->get(), p.scores = sc->get();
      p.num_pages = P, p.pages_per_chunk = 8, p.chunks_per_grid = 8, p.d = kD;
      p.rho_g = 0.5, p.rho_c = 0.5, p.rho_p = 0.25;
      p.grids = g->get(), p.chunks = ch->get(), p.pages = pg->get(), p.level_counts = counts->get();
      return [=] {
        (void)M, (void)a, (void)sc, (void)g, (void)ch, (void)pg, (void)counts;
        opt::cuda::chess_select(p);
      };
    }, 64);
    in.work.flops = 2.0 * double(n) * kD;
    in.work.hbm_bytes = double(n) * kD * 4 + double(n) * 4;  // the summaries once, the scores once
    in.work.launches = 2;  // scores; the three levels in one block (+ one read-back of the counts)
    return in;
  };
  return c;
}
}  // namespace

std::vector<Case> cuda_optimized_cases() {
  return {cuda_opt_paged_decode(), cuda_opt_sparse_paged(), cuda_opt_topk(), cuda_opt_gather_runs(),
          cuda_opt_centroid_recall(), cuda_opt_chess_select()};
}
#else
std::vector<Case> cuda_optimized_cases() { return {}; }
#endif

}  // namespace kvsim::validate
