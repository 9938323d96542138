// The host reference kernels as validation cases. Each counts its work the way the model counts the
// phase it stands for (policies/blocks.hpp and the policies): CTKVR's cpu_rerank and
// cpu_attention exactly as policies/ctkvr/cost.cpp does, the rest with the formulas of their GPU twins' phases
// (score, select, gather, build, reconstruct) applied to the CPU. Inputs are float32, head_dim 128, a
// GQA group of 4 query heads per KV head; every thread runs its own instance (one KV head each).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "kernels/host/host.hpp"
#include "kernels/reference/reference.hpp"
#include "validate/parallel_time.hpp"
#include "validate/validate.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvsim::validate {
namespace {
using Vec = std::vector<float>;
using Ids = std::vector<int32_t>;
constexpr int D = 128, G = 4;
// Which kernels the cases below run where an optimized host kernel exists (kernels/host/): set by
// host_cases() for the list it builds. Cases without one run the reference in both lists.
thread_local bool g_optimized = true;
constexpr double kRow = D * 4.0;  // bytes of one fp32 key row
const float kScale = 1.f / std::sqrt(float(D));

// Uniform in [-1, 1), never exactly zero in practice; fast enough to fill hundreds of MiB.
std::shared_ptr<Vec> random_vec(size_t n, uint32_t seed) {
  auto v = std::make_shared<Vec>(n);
  std::minstd_rand rng(seed + 1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : *v) x = u(rng);
  return v;
}
// k distinct ids from [0, n), in random order.
Ids random_ids(int64_t n, int64_t k, uint32_t seed) {
  Ids all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  all.resize(size_t(std::min(n, k)));
  return all;
}

Case cpu_attention() {
  Case c{"cpu_attention", false, PhaseKind::host_kernel, CurveVariable::bytes,
         "gqa_gather_attention (CTKVR's CPU sparse attention over the chosen tokens)", {512, 2048, 8192, 32768},
         256, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t m = int64_t(s), n = 2 * m;
    Instance in = cycled(2.0 * n * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto K = random_vec(size_t(n) * D, seed), V = random_vec(size_t(n) * D, seed + 7), Q = random_vec(G * D, seed + 9);
      auto idx = std::make_shared<Ids>(random_ids(n, m, seed));
      auto out = std::make_shared<Vec>(G * D), lse = std::make_shared<Vec>(G);
      if (g_optimized)
        return std::function<void()>([=] {
          host::attend_rows({.queries = Q->data(), .rows = G, .keys = K->data(), .values = V->data(), .idx = idx->data(),
                             .m = m, .n = n, .d = D, .scale = kScale, .out = out->data(), .lse = lse->data()});
        });
      return std::function<void()>([=] { ref::gqa_gather_attention(Q->data(), G, K->data(), V->data(), n, D, idx->data(),
                                                                   m, kScale, out->data(), lse->data()); });
    });
    in.work.flops = G * double(m) * (4 * D + 5);
    in.work.dram_bytes = double(m) * 2 * kRow;
    in.run_bytes = kRow;
    return in;
  };
  return c;
}

Case cpu_rerank() {
  Case c{"cpu_rerank", false, PhaseKind::host_kernel, CurveVariable::bytes,
         "ctkvr_rerank (gather the recalled keys, q.k for the group, softmax, max over the group, top rho')",
         {1024, 4096, 16384, 65536}, 512, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t m = int64_t(s), n = 2 * m;
    Instance in = cycled(double(n) * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto K = random_vec(size_t(n) * D, seed), Q = random_vec(G * D, seed + 3);
      auto ids = std::make_shared<Ids>(random_ids(n, m, seed));
      std::sort(ids->begin(), ids->end());  // recall returns a dedup'd, sorted list
      if (g_optimized)
        return std::function<void()>(
            [=] { (void)host::ctkvr_rerank(Q->data(), G, K->data(), n, D, ids->data(), m, kScale, int(m / 8)); });
      return std::function<void()>([=] { (void)ref::ctkvr_rerank(Q->data(), G, K->data(), n, D, *ids, kScale, int(m / 8)); });
    });
    in.work.flops = double(m) * (2 * D * G + 4);
    in.work.dram_bytes = double(m) * kRow;
    in.run_bytes = kRow;
    return in;
  };
  return c;
}

Case cpu_decode_attention() {
  Case c{"cpu_decode_attention", false, PhaseKind::attention, CurveVariable::context_tokens,
         "gqa_decode_attention (dense decode attention, GQA group 4)", {1024, 4096, 16384, 65536}, 512, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    Instance in = cycled(2.0 * n * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto K = random_vec(size_t(n) * D, seed), V = random_vec(size_t(n) * D, seed + 5), Q = random_vec(G * D, seed + 6);
      auto out = std::make_shared<Vec>(G * D), lse = std::make_shared<Vec>(G);
      if (g_optimized)
        return std::function<void()>([=] {
          host::attend_rows({.queries = Q->data(), .rows = G, .keys = K->data(), .values = V->data(), .m = n, .n = n,
                             .d = D, .scale = kScale, .out = out->data(), .lse = lse->data()});
        });
      return std::function<void()>(
          [=] { ref::gqa_decode_attention(Q->data(), G, K->data(), V->data(), n, D, kScale, out->data(), lse->data()); });
    });
    in.work.flops = G * double(n) * (4 * D + 5);
    in.work.dram_bytes = double(n) * 2 * kRow;
    in.context_tokens = double(n);
    return in;
  };
  return c;
}

Case cpu_paged_attention() {
  Case c{"cpu_paged_attention", false, PhaseKind::attention, CurveVariable::batch,
         "paged_decode_attention (FlashInfer CSR page table, 4096 tokens per request, pages of 16, shuffled)",
         {1, 2, 4, 8}, 1, nullptr};
  c.make = [](double s, int t, double cold) {
    const int B = int(s), ctx = 4096, page = 16, per = ctx / page;
    const int64_t pages = int64_t(B) * per;
    Instance in = cycled(2.0 * B * ctx * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto K = random_vec(size_t(pages) * page * D, seed), V = random_vec(size_t(pages) * page * D, seed + 1);
      auto q = random_vec(size_t(B) * G * D, seed + 2);
      auto indices = std::make_shared<Ids>(random_ids(pages, pages, seed));
      auto indptr = std::make_shared<Ids>(size_t(B) + 1), last = std::make_shared<Ids>(size_t(B), page);
      for (int b = 0; b <= B; ++b) (*indptr)[size_t(b)] = b * per;
      auto out = std::make_shared<Vec>(size_t(B) * G * D), lse = std::make_shared<Vec>(size_t(B) * G);
      return [=] {
        const ref::PagedKV kv{K->data(), V->data(), pages, page, 1, D};
        const ref::PageTable table{*indptr, *indices, *last};
        ref::paged_decode_attention(q->data(), G, kv, table, kScale, out->data(), lse->data());
      };
    });
    in.work.flops = double(B) * G * ctx * (4 * D + 5);
    in.work.dram_bytes = double(B) * ctx * 2 * kRow;
    in.run_bytes = page * kRow;
    in.context_tokens = ctx;
    in.batch = B;
    return in;
  };
  return c;
}

Case cpu_merge() {
  Case c{"cpu_merge", false, PhaseKind::host_kernel, CurveVariable::bytes,
         "merge_state per row (exact partial-softmax merge of two states)", {1024, 8192, 65536}, 256, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t R = int64_t(s);
    Instance in = cycled(3.0 * R * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto a = random_vec(size_t(R) * D, seed), b = random_vec(size_t(R) * D, seed + 1);
      auto la = random_vec(size_t(R), seed + 2), lb = random_vec(size_t(R), seed + 3);
      auto out = std::make_shared<Vec>(size_t(R) * D);
      return [=] {
        for (int64_t r = 0; r < R; ++r)
          (void)ref::merge_state(a->data() + r * D, (*la)[size_t(r)], b->data() + r * D, (*lb)[size_t(r)], D,
                                 out->data() + r * D);
      };
    });
    in.work.flops = double(R) * D * 6;  // as policies/ctkvr/cost.cpp's merge phase
    in.work.dram_bytes = double(R) * (3 * kRow + 8);
    return in;
  };
  return c;
}

Case cpu_score() {
  Case c{"cpu_score", false, PhaseKind::score, CurveVariable::bytes,
         "score_gemv (one query against stored summaries / centroids / page vectors)", {4096, 32768, 262144}, 1024,
         nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    Instance in = cycled(double(n) * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto M = random_vec(size_t(n) * D, seed), q = random_vec(D, seed + 1);
      auto out = std::make_shared<Vec>(static_cast<size_t>(n));
      if (g_optimized)
        return std::function<void()>(
            [=] { host::exact_dots(q->data(), 1, D, M->data(), nullptr, n, D, 1.f, out->data(), n); });
      return std::function<void()>([=] { ref::score_gemv(q->data(), M->data(), n, D, out->data()); });
    });
    in.work.flops = double(n) * (2 * D + 2);
    in.work.dram_bytes = double(n) * (kRow + 4);
    return in;
  };
  return c;
}

Case cpu_quest_bound() {
  Case c{"cpu_quest_bound", false, PhaseKind::score, CurveVariable::bytes,
         "quest_page_bound (Quest's per-page upper bound from channel min/max)", {1024, 8192, 65536}, 256, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t P = int64_t(s);
    Instance in = cycled(2.0 * P * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto lo = random_vec(size_t(P) * D, seed), hi = random_vec(size_t(P) * D, seed + 1), q = random_vec(D, seed + 2);
      auto out = std::make_shared<Vec>(static_cast<size_t>(P));
      if (g_optimized)
        return std::function<void()>(
            [=] { host::quest_page_bound(q->data(), lo->data(), hi->data(), P, D, out->data()); });
      return std::function<void()>([=] { ref::quest_page_bound(q->data(), lo->data(), hi->data(), P, D, out->data()); });
    });
    in.work.flops = double(P) * D * 3;
    in.work.dram_bytes = double(P) * (2 * kRow + 4);
    return in;
  };
  return c;
}

// blocks::select: ~4 FLOPs per element, the scores read once, the chosen ids written
// (docs/validation/phase-bytes.md, rule 1).
void select_work(Instance& in, double elements, double chosen) {
  in.work.flops = 4 * elements;
  in.work.dram_bytes = elements * 4 + chosen * 4;
}

Case cpu_topk() {
  Case c{"cpu_topk", false, PhaseKind::select, CurveVariable::bytes, "topk_indices (k = n/16, rank order)",
         {16384, 131072, 1048576}, 4096, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s), k = n / 16;
    Instance in = cycled(double(n) * 4, cold, uint32_t(t), [=](uint32_t seed) {
      auto sc = random_vec(static_cast<size_t>(n), seed);
      auto out = std::make_shared<Ids>(static_cast<size_t>(k));
      if (g_optimized) return std::function<void()>([=] { (void)host::topk_indices(sc->data(), n, k, out->data()); });
      return std::function<void()>([=] { (void)ref::topk_indices(sc->data(), n, k, out->data()); });
    });
    select_work(in, double(n), double(k));
    return in;
  };
  return c;
}

Case cpu_chess_select() {
  Case c{"cpu_chess_select", false, PhaseKind::select, CurveVariable::bytes,
         "chess_hierarchical_select (grid -> chunk -> page quantiles, N_c = N_g = 8)", {4096, 32768, 262144}, 1024,
         nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t P = int64_t(s), C = (P + 7) / 8, Gr = (C + 7) / 8;
    Instance in = cycled(double(P + C + Gr) * 4, cold, uint32_t(t), [=](uint32_t seed) {
      auto p = random_vec(size_t(P), seed), ch = random_vec(size_t(C), seed + 1), g = random_vec(size_t(Gr), seed + 2);
      if (g_optimized)
        return std::function<void()>(
            [=] { (void)host::chess_select(g->data(), ch->data(), p->data(), P, 8, 8, 0.5, 0.5, 0.25); });
      return std::function<void()>([=] { (void)ref::chess_hierarchical_select(*g, *ch, *p, 8, 8, 0.5, 0.5, 0.25); });
    });
    select_work(in, double(P + C + Gr), double(P) / 16);
    return in;
  };
  return c;
}

Case cpu_dedup() {
  Case c{"cpu_dedup", false, PhaseKind::select, CurveVariable::bytes,
         "dedup (CTKVR's DedupIdx: sorted unique probed ids, half of them repeats; optimized: a bitmap)", {16384, 131072, 1048576},
         4096, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    Instance in = cycled(double(n) * 4, cold, uint32_t(t), [=](uint32_t seed) {
      auto ids = std::make_shared<Ids>(static_cast<size_t>(n));
      std::minstd_rand rng(seed + 1);
      for (auto& i : *ids) i = int32_t(rng() % uint32_t(n / 2));
      if (g_optimized)
        return std::function<void()>([=] {
          thread_local std::vector<int32_t> work;
          work.assign(ids->begin(), ids->end());
          (void)host::dedup_inplace(work.data(), int64_t(work.size()));
        });
      return std::function<void()>([=] { (void)ref::dedup(*ids); });
    });
    select_work(in, double(n), double(n) / 2);
    return in;
  };
  return c;
}

Case staging_gather() {
  Case c{"staging_gather", true, PhaseKind::gather, CurveVariable::run_bytes,
         "gather_runs (runs of run_bytes into a staging buffer, 4 MiB per thread from 16 MiB, rows of 64 B)",
         {64, 256, 1024, 4096, 32768, 131072}, 1024, nullptr};
  c.make = [](double s, int t, double cold) {
    // Rows of one cache line, so runs can be as short as a bf16 token's key row of a small head or shorter.
    const int64_t row = 16;
    const double row_bytes = row * 4.0;
    const int64_t rows_per_run = std::max<int64_t>(1, int64_t(s / row_bytes));
    const int64_t src_rows = (int64_t(16) << 20) / int64_t(row_bytes), total_rows = src_rows / 4;
    const int64_t runs = std::max<int64_t>(1, total_rows / rows_per_run);
    Instance in = cycled(double(src_rows + total_rows) * row_bytes, cold, uint32_t(t), [=](uint32_t seed) {
      auto src = random_vec(size_t(src_rows * row), seed);
      auto dst = std::make_shared<Vec>(size_t(runs * rows_per_run * row));
      // Non-overlapping runs at random aligned slots, in random order.
      Ids slots = random_ids(src_rows / rows_per_run, runs, seed);
      auto starts = std::make_shared<Ids>(), lens = std::make_shared<Ids>(size_t(runs), int32_t(rows_per_run));
      for (int32_t sl : slots) starts->push_back(int32_t(sl * rows_per_run));
      if (g_optimized) {
        auto ids = std::make_shared<Ids>();  // the runs as the row-id list a selection produces
        for (int32_t st : *starts)
          for (int64_t r = 0; r < rows_per_run; ++r) ids->push_back(int32_t(st + r));
        return std::function<void()>(
            [=] { (void)host::gather_rows(src->data(), src_rows, row, ids->data(), int64_t(ids->size()), dst->data()); });
      }
      return std::function<void()>([=] { (void)ref::gather_runs(src->data(), src_rows, row, *starts, *lens, dst->data()); });
    });
    in.work.dram_bytes = 2.0 * double(runs * rows_per_run) * row_bytes;  // read and write, as blocks::gather
    in.run_bytes = double(rows_per_run) * row_bytes;
    return in;
  };
  return c;
}

Case host_memcpy() {
  Case c{"host_memcpy", false, PhaseKind::copy, CurveVariable::bytes,
         "std::memcpy of one contiguous block (a host-side staging copy)", {65536, 1048576, 16777216, 67108864},
         65536, nullptr};
  c.make = [](double s, int t, double cold) {
    const size_t n = size_t(s);
    Instance in = cycled(2.0 * double(n), cold, uint32_t(t), [=](uint32_t seed) {
      auto src = random_vec(n / 4, seed), dst = std::make_shared<Vec>(n / 4);
      return [=] { std::memcpy(dst->data(), src->data(), n / 4 * 4); };
    });
    in.work.dram_bytes = 2.0 * double(n / 4 * 4);
    return in;
  };
  return c;
}

Case cpu_page_means() {
  Case c{"cpu_page_means", false, PhaseKind::build, CurveVariable::bytes,
         "page_mean (pages of 16 key rows: CHESS/Quest page summaries)", {4096, 32768, 131072}, 1024, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    Instance in = cycled(double(n) * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto X = random_vec(size_t(n) * D, seed);
      auto out = std::make_shared<Vec>(size_t((n + 15) / 16) * D);
      return [=] { ref::page_mean(X->data(), n, D, 16, out->data()); };
    });
    in.work.flops = double(n) * D;
    in.work.dram_bytes = double(n) * kRow * (1 + 1.0 / 16);
    return in;
  };
  return c;
}

Case cpu_surprisal_means() {
  Case c{"cpu_surprisal_means", false, PhaseKind::build, CurveVariable::bytes,
         "segment_weighted_mean (SEKV's surprisal-weighted span means, spans of 8..40 tokens)", {4096, 32768, 131072},
         1024, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    auto starts = std::make_shared<Ids>();
    std::minstd_rand rng(uint32_t(t) + 11);
    for (int64_t p = 0; p < n; p += 8 + int64_t(rng() % 33)) starts->push_back(int32_t(p));
    const double S = double(starts->size());
    Instance in = cycled(double(n) * (kRow + 4), cold, uint32_t(t), [=](uint32_t seed) {
      auto X = random_vec(size_t(n) * D, seed), w = random_vec(size_t(n), seed + 1);
      for (auto& x : *w) x = std::abs(x) + 0.01f;  // surprisals are positive
      auto out = std::make_shared<Vec>(size_t(S) * D);
      return [=] { ref::segment_weighted_mean(X->data(), w->data(), n, D, *starts, out->data()); };
    });
    in.work.flops = 2.0 * double(n) * D;
    in.work.dram_bytes = double(n) * (kRow + 4) + S * kRow;
    return in;
  };
  return c;
}

Case cpu_span_svd() {
  Case c{"cpu_span_svd", false, PhaseKind::build, CurveVariable::bytes,
         "randomized_svd (R_max 32, oversample 8, one power iteration; Eigen in double)", {256, 1024, 4096}, 128,
         nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    Instance in = cycled(double(n) * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto X = random_vec(size_t(n) * D, seed);
      return [=] { (void)ref::randomized_svd(X->data(), n, D, 0.9, 32, 8, 1, seed); };
    });
    // As sekv.cpp's span_svd: 8 n d k + 4 n k^2 FLOPs with k = r + 8, three passes over the block.
    const double k = std::min<double>(40, std::min<double>(double(n), D));
    in.work.flops = 8 * double(n) * D * k + 4 * double(n) * k * k;
    in.work.dram_bytes = 3 * double(n) * kRow;
    return in;
  };
  return c;
}

Case cpu_qcivf_build() {
  Case c{"cpu_qcivf_build", false, PhaseKind::build, CurveVariable::bytes,
         "qcivf_build (CTKVR's query-centroid IVF: C = 16 centroids per head, rho = n/8)", {2048, 8192, 32768}, 512,
         nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    const int C = 16;
    Instance in = cycled(double(n) * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto K = random_vec(size_t(n) * D, seed), cent = random_vec(size_t(G) * C * D, seed + 1);
      auto ivf = std::make_shared<Ids>(size_t(C) * size_t(n / 8));
      if (g_optimized)
        return std::function<void()>(
            [=] { (void)host::qcivf_build(cent->data(), G, C, K->data(), n, D, kScale, int(n / 8), ivf->data()); });
      return std::function<void()>(
          [=] { (void)ref::qcivf_build(cent->data(), G, C, K->data(), n, D, kScale, int(n / 8), ivf->data()); });
    });
    // Scores, softmax and max per (centroid, head, key); the keys stream once per centroid.
    in.work.flops = double(C) * G * double(n) * (2 * D + 7);
    in.work.dram_bytes = double(C) * double(n) * (kRow + 4);
    return in;
  };
  return c;
}

Case cpu_obs_window() {
  Case c{"cpu_obs_window", false, PhaseKind::score, CurveVariable::bytes,
         "obs_window_scores (SnapKV/ChunkKV/SentenceKV prefill: a window of 32 queries x 4 heads against n keys, "
         "causal softmax, summed)",
         {2048, 8192, 32768}, 1024, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    const int w = 32;
    Instance in = cycled(double(n) * kRow, cold, uint32_t(t), [=](uint32_t seed) {
      auto K = random_vec(size_t(n) * D, seed), Q = random_vec(size_t(G) * w * D, seed + 1);
      auto out = std::make_shared<Vec>(size_t(n - w));
      if (g_optimized)
        return std::function<void()>(
            [=] { host::obs_window_scores(Q->data(), G, w, K->data(), n, D, kScale, out->data()); });
      return std::function<void()>([=] { ref::obs_window_scores(Q->data(), G, w, K->data(), n, D, kScale, out->data()); });
    });
    // A score GEMM of G w rows against the keys plus a softmax per row: compute-bound.
    in.work.flops = double(G) * w * double(n) * (2 * D + 4);
    in.work.dram_bytes = double(n) * kRow;
    return in;
  };
  return c;
}

Case cpu_reconstruct() {
  Case c{"cpu_reconstruct", false, PhaseKind::reconstruct, CurveVariable::bytes,
         "lowrank_reconstruct (rank 32 factors back to [n, 128])", {1024, 8192, 32768}, 256, nullptr};
  c.make = [](double s, int t, double cold) {
    const int64_t n = int64_t(s);
    const int r = 32;
    Instance in = cycled(double(n) * (r + D) * 4, cold, uint32_t(t), [=](uint32_t seed) {
      auto us = random_vec(size_t(n) * r, seed), vt = random_vec(size_t(r) * D, seed + 1);
      auto out = std::make_shared<Vec>(size_t(n) * D);
      return [=] { ref::lowrank_reconstruct(us->data(), vt->data(), n, r, D, out->data()); };
    });
    in.work.flops = 2.0 * double(n) * r * D;
    in.work.dram_bytes = (double(n) * r + double(r) * D + double(n) * D) * 4;
    return in;
  };
  return c;
}

// Sum of the m rows rows[idx[i]] (d floats each) of `arrays` arrays, prefetching the rows `ahead` keys
// on one 64-byte line at a time, as attend_rows does; four independent accumulators so that the adds
// never bind. What a kernel over the same scattered rows cannot beat on this machine: it does the
// reads and nearly nothing else. Fma = 4 adds 4 FMAs per loaded 8-float vector into 8 independent
// register chains (128 per key of cpu_attention, as many as its logits and values for 4 rows): the
// same reads with a kernel's arithmetic in between, to see whether this core overlaps the two.
// Arrays, d = D and Fma are compile-time: the loops unroll fully, as they do in the kernels (with a
// runtime row length the same loop kept half as many lines in flight, measured).
template <int Fma, int Arrays>
float gather_read(const float* const* arrays, const int32_t* idx, int64_t m, int ahead) {
  constexpr int narrays = Arrays, d = D;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 f0 = _mm256_setzero_ps(), f1 = f0, f2 = f0, f3 = f0, f4 = f0, f5 = f0, f6 = f0, f7 = f0;
  const __m256 w = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < m; ++i) {
    if (ahead > 0 && i + ahead < m)
      for (int a = 0; a < narrays; ++a)
        for (int b = 0; b < d; b += 16)
          _mm_prefetch(reinterpret_cast<const char*>(arrays[a] + int64_t(idx[i + ahead]) * d + b), _MM_HINT_T0);
    for (int a = 0; a < narrays; ++a) {
      const float* r = arrays[a] + int64_t(idx[i]) * d;
      for (int c = 0; c + 16 <= d; c += 16) {
        const __m256 x = _mm256_loadu_ps(r + c), y = _mm256_loadu_ps(r + c + 8);
        acc[(c / 8) & 3] = _mm256_add_ps(acc[(c / 8) & 3], x);
        acc[(c / 8 + 1) & 3] = _mm256_add_ps(acc[(c / 8 + 1) & 3], y);
        if constexpr (Fma == 4) {
          f0 = _mm256_fmadd_ps(x, w, f0), f1 = _mm256_fmadd_ps(x, w, f1);
          f2 = _mm256_fmadd_ps(x, w, f2), f3 = _mm256_fmadd_ps(x, w, f3);
          f4 = _mm256_fmadd_ps(y, w, f4), f5 = _mm256_fmadd_ps(y, w, f5);
          f6 = _mm256_fmadd_ps(y, w, f6), f7 = _mm256_fmadd_ps(y, w, f7);
        }
      }
    }
  }
  acc[0] = _mm256_add_ps(acc[0], _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(f0, f1), _mm256_add_ps(f2, f3)),
                                               _mm256_add_ps(_mm256_add_ps(f4, f5), _mm256_add_ps(f6, f7))));
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
#else
  (void)ahead;
  float s = 0.f;
  for (int64_t i = 0; i < m; ++i)
    for (int a = 0; a < narrays; ++a)
      for (int c = 0; c < d; ++c) s += arrays[a][int64_t(idx[i]) * d + c] * (Fma ? 1.5f : 1.f);
  return s;
#endif
}
}  // namespace

std::vector<Case> gather_read_cases(const std::vector<int>& prefetch, const std::vector<int>& with_fma) {
  std::vector<std::pair<int, bool>> variants;
  for (const int pf : prefetch) variants.push_back({pf, false});
  for (const int pf : with_fma) variants.push_back({pf, true});
  std::vector<Case> out;
  for (const auto& [pf, fma] : variants) {
    const std::string tail = "/pf" + std::to_string(pf) + (fma ? "+fma4" : "");
    // cpu_attention's rows: K and V rows of m = s of n = 2m keys, in random order (random_ids, same seeds).
    Case a{"gather_read/cpu_attention" + tail, false, PhaseKind::host_kernel, CurveVariable::bytes,
           "scattered K and V row reads of cpu_attention", cpu_attention().grid, 256, nullptr};
    a.make = [pf, fma](double s, int t, double cold) {
      const int64_t m = int64_t(s), n = 2 * m;
      Instance in = cycled(2.0 * n * kRow, cold, uint32_t(t), [=](uint32_t seed) {
        auto K = random_vec(size_t(n) * D, seed), V = random_vec(size_t(n) * D, seed + 7);
        auto idx = std::make_shared<Ids>(random_ids(n, m, seed));
        auto sink = std::make_shared<float>(0.f);
        return std::function<void()>([=] {
          const float* arrays[2] = {K->data(), V->data()};
          *sink += fma ? gather_read<4, 2>(arrays, idx->data(), m, pf) : gather_read<0, 2>(arrays, idx->data(), m, pf);
        });
      });
      in.work.dram_bytes = double(m) * 2 * kRow;
      in.run_bytes = kRow;
      return in;
    };
    out.push_back(a);
    // cpu_rerank's rows: K rows of m = s recalled of n = 2m, sorted (recall's dedup'd list).
    Case r{"gather_read/cpu_rerank" + tail, false, PhaseKind::host_kernel, CurveVariable::bytes,
           "scattered K row reads of cpu_rerank", cpu_rerank().grid, 512, nullptr};
    r.make = [pf, fma](double s, int t, double cold) {
      const int64_t m = int64_t(s), n = 2 * m;
      Instance in = cycled(double(n) * kRow, cold, uint32_t(t), [=](uint32_t seed) {
        auto K = random_vec(size_t(n) * D, seed);
        auto ids = std::make_shared<Ids>(random_ids(n, m, seed));
        std::sort(ids->begin(), ids->end());
        auto sink = std::make_shared<float>(0.f);
        return std::function<void()>([=] {
          const float* arrays[1] = {K->data()};
          *sink += fma ? gather_read<4, 1>(arrays, ids->data(), m, pf) : gather_read<0, 1>(arrays, ids->data(), m, pf);
        });
      });
      in.work.dram_bytes = double(m) * kRow;
      in.run_bytes = kRow;
      return in;
    };
    out.push_back(r);
  }
  return out;
}

std::vector<Case> host_cases(bool optimized) {
  std::vector<Case> all = {cpu_attention(),   cpu_rerank(),   cpu_decode_attention(), cpu_paged_attention(),
                           cpu_merge(),       cpu_score(),    cpu_quest_bound(),      cpu_topk(),
                           cpu_chess_select(), cpu_dedup(),   staging_gather(),       host_memcpy(),
                           cpu_page_means(),  cpu_surprisal_means(), cpu_span_svd(),  cpu_qcivf_build(),
                           cpu_obs_window(),  cpu_reconstruct()};
  // The phases with an optimized kernel (kernels/host/): the list says which kernels ran.
  static const std::set<std::string> with_optimized = {
      "cpu_attention", "cpu_rerank",      "cpu_decode_attention", "cpu_score",     "cpu_quest_bound",
      "cpu_topk",      "staging_gather",  "cpu_qcivf_build",      "cpu_obs_window", "cpu_dedup",
      "cpu_chess_select"};
  for (Case& c : all) {
    const bool opt = optimized && with_optimized.count(c.phase) > 0;
    c.kernels = std::string(opt ? "kvsim::host " : "kvsim::ref ") + c.kernels;
    auto inner = c.make;
    c.make = [inner, opt](double s, int t, double cold) {
      g_optimized = opt;
      return inner(s, t, cold);
    };
  }
  return all;
}

Timer cpu_timer(bool wall_clock) {
  const Clock clock = wall_clock ? Clock::wall : Clock::thread_cpu;
  return [clock](const std::vector<Instance>& inst, int inner, int samples) {
    std::vector<double> out;
    for (int s = 0; s < samples; ++s)
      out.push_back(parallel_time(int(inst.size()), [&](int i) {
                      for (int k = 0; k < inner; ++k) inst[size_t(i)].run();
                    }, clock) /
                    inner);
    return out;
  };
}

}  // namespace kvsim::validate
