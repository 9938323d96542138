// The optimized CUDA kernels (kernels/optimized/*.cu) against the host reference (kvsim::ref) on random,
// non-zero inputs (the cases are in tests/optimized_cuda_cases.inc). As tests/test_reference_cuda.cpp
// does it: every build runs them on the CPU through the CUDA emulator (suite OptKernelsCudaEmu), none
// skipping for want of a GPU; where nvcc built the kernels and a GPU is present they run there as well
// (suite OptKernelsCudaGpu, registered only then). The host-side run planner is tested directly
// (suite OptRunPlanner).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda_device.hpp"
#include "kernels/emu/counters.hpp"
#include "tests/cuda_case.hpp"
#include "kernels/optimized/cuda.hpp"
#include "kernels/optimized/run_planner.hpp"
#include "kernels/reference/cuda.hpp"
#include "kernels/reference/reference.hpp"
#include "validate/validate.hpp"

namespace {

using namespace kvsim::ref;
using kvsim::opt::CentroidRecallParams;
using kvsim::opt::GatherRunsParams;
using kvsim::opt::PagedDecodeParams;
using kvsim::opt::TopkParams;
using Vec = std::vector<float>;

// Normal values shifted away from zero, so no product or sum vanishes by accident.
Vec randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  Vec v(n);
  for (auto& x : v) {
    x = g(rng);
    x += x >= 0.f ? 0.05f : -0.05f;
  }
  return v;
}
using kvsim::test::expect_close;

using Case = kvsim::test::CudaCaseDef;

namespace on_cpu {
namespace cuda = kvsim::opt::cuda_emu;
namespace refcuda = kvsim::ref::cuda_emu;
template <class T>
using DBuf = refcuda::DeviceBuffer<T>;
std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
#include "tests/optimized_cuda_cases.inc"
}  // namespace on_cpu

#if defined(KVSIM_HAVE_CUDA)
namespace on_gpu {
namespace cuda = kvsim::opt::cuda;
namespace refcuda = kvsim::ref::cuda;
template <class T>
using DBuf = refcuda::DeviceBuffer<T>;
std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
#include "tests/optimized_cuda_cases.inc"
}  // namespace on_gpu
#endif

[[maybe_unused]] const bool registered = [] {
  kvsim::test::register_cuda_cases("OptKernelsCudaEmu", on_cpu::cases());
#if defined(KVSIM_HAVE_CUDA)
  if (!kvsim::cuda::devices().empty()) kvsim::test::register_cuda_cases("OptKernelsCudaGpu", on_gpu::cases());
#endif
  return true;
}();

TEST(OptRunPlanner, MergesAdjacentPagesKeepsOrderAndCapsRuns) {
  const std::vector<int32_t> pages = {3, 4, 5, 9, 10, 2, 3, 7};
  auto r = kvsim::opt::plan_page_runs(pages, 2);
  EXPECT_EQ(r.src_row, (std::vector<int32_t>{6, 18, 4, 14}));
  EXPECT_EQ(r.rows, (std::vector<int32_t>{6, 4, 4, 2}));
  EXPECT_EQ(r.dst_row, (std::vector<int32_t>{0, 6, 10, 14}));
  EXPECT_EQ(r.total_rows, 16);
  r = kvsim::opt::plan_page_runs(pages, 1, 2);  // {3,4} {5} {9,10} {2,3} {7}
  EXPECT_EQ(r.src_row, (std::vector<int32_t>{3, 5, 9, 2, 7}));
  EXPECT_EQ(r.rows, (std::vector<int32_t>{2, 1, 2, 2, 1}));
  EXPECT_EQ(kvsim::opt::plan_page_runs({}, 4).size(), 0);
  EXPECT_THROW(kvsim::opt::plan_page_runs(pages, 0), std::invalid_argument);
  const std::vector<int32_t> bad = {1, -1};
  EXPECT_THROW(kvsim::opt::plan_page_runs(bad, 1), std::invalid_argument);
}

// Launches, memsets and host synchronizations per phase (issue #28 item 4), as the emulator counts the
// CUDA calls: the CHESS select and the centroid recall are two stream-ordered launches with one host
// synchronization, the read-back of what the caller needs (the kept counts, the recalled count), and no
// memset; top-k, paged decode and the gather synchronize nowhere (their results stay on the device and
// the caller's own copy is the synchronization). A device-wide sync or a read-back between stages, or a
// scratch memset, would show up here.
TEST(OptKernelsLaunches, EachPhaseLaunchesAndSynchronizesOnlyAsItMust) {
  namespace cuda = kvsim::opt::cuda_emu;
  using kvsim::emu::CountScope;
  using kvsim::ref::cuda_emu::DeviceBuffer;
  const auto expect = [](const kvsim::emu::Counts& c, uint64_t launches, uint64_t syncs, const char* what) {
    EXPECT_EQ(c.kernel_launches(), launches) << what;
    EXPECT_EQ(c.host_syncs, syncs) << what;
    EXPECT_EQ(c.memsets, 0u) << what;
    EXPECT_EQ(c.copies, syncs) << what;  // the only copies are the read-backs
  };
  {  // CHESS select: 300 pages, chunks of 4, grids of 4 chunks
    const int64_t P = 300, C = 75, G = 19, n = G + C + P;
    const int d = 32;
    DeviceBuffer<float> a(randn(d, 1)), M(randn(size_t(n) * d, 2)), s{size_t(n)};
    DeviceBuffer<int32_t> g{size_t(G)}, c{size_t(C)}, pg{size_t(P)}, counts{3};
    kvsim::opt::ChessSelectParams p;
    p.anchor = a.get(), p.summaries = M.get(), p.scores = s.get();
    p.num_pages = P, p.pages_per_chunk = 4, p.chunks_per_grid = 4, p.d = d, p.rho_g = 0.5, p.rho_c = 0.5, p.rho_p = 0.3;
    p.grids = g.get(), p.chunks = c.get(), p.pages = pg.get(), p.level_counts = counts.get();
    {
      CountScope scope;
      const auto kept = cuda::chess_select(p);
      EXPECT_GT(kept.pages, 0);
      expect(scope.counts(), 2, 1, "chess_select");
    }
    // The levels alone on given scores (the replay's CHESS step): one launch, one read-back.
    kvsim::opt::ChessLevelsParams l;
    l.grid_scores = s.get(), l.chunk_scores = s.get() + G, l.page_scores = s.get() + G + C;
    l.pages = P, l.pages_per_chunk = 4, l.chunks_per_grid = 4, l.rho_g = 0.5, l.rho_c = 0.5, l.rho_p = 0.3;
    l.grids = g.get(), l.chunks = c.get(), l.kept_pages = pg.get(), l.level_counts = counts.get();
    CountScope scope;
    EXPECT_GT(cuda::chess_levels(l).pages, 0);
    expect(scope.counts(), 1, 1, "chess_levels");
  }
  {  // centroid recall: 64 centroids, C' 8, rho 16
    const int G = 2, C = 64, d = 32, rho = 16;
    std::vector<int32_t> ivf(size_t(C) * rho);
    for (size_t j = 0; j < ivf.size(); ++j) ivf[j] = int32_t(j * 7 % 500);
    DeviceBuffer<float> q(randn(size_t(G) * d, 3)), cent(randn(size_t(G) * C * d, 4)), sc{size_t(C)};
    DeviceBuffer<int32_t> divf(ivf), chosen{size_t(C)}, count{1}, out{size_t(C) * rho};
    CentroidRecallParams p;
    p.q = q.get(), p.centroids = cent.get(), p.ivf = divf.get(), p.out = out.get(), p.chosen = chosen.get();
    p.G = G, p.C = C, p.d = d, p.rho = rho, p.c_prime = 8, p.num_keys = 500;
    p.centroid_scores = sc.get(), p.count = count.get();
    CountScope scope;
    EXPECT_GT(cuda::centroid_recall(p), 0);
    expect(scope.counts(), 2, 1, "centroid_recall");
  }
  {  // top-k: one launch whatever the order
    DeviceBuffer<float> sc(randn(1000, 5));
    DeviceBuffer<int32_t> out{size_t(100)};
    TopkParams p;
    p.scores = sc.get(), p.out = out.get(), p.rows = 1, p.n = 1000, p.k = 100;
    CountScope scope;
    cuda::topk(p);
    expect(scope.counts(), 1, 0, "topk");
    EXPECT_EQ(cuda::topk_launches(p), 1);
  }
  {  // top-k of a row split over blocks: one memset of the select state, 3 passes, the slice counts and
     // the compaction; in rank order the tile sort, and a merge round per doubling above 4096 survivors;
     // k = n: no memset and no pass. Never a host synchronization. topk_launches says the same.
    const int64_t n = 20000;
    DeviceBuffer<float> sc(randn(size_t(n), 5));
    DeviceBuffer<int32_t> out{size_t(n)};
    for (const auto& [k, rank_order, launches, memsets] :
         std::vector<std::tuple<int64_t, bool, uint64_t, uint64_t>>{
             {100, false, 5, 1}, {100, true, 6, 1}, {9000, true, 8, 1}, {n, false, 2, 0}, {n, true, 6, 0}}) {
      SCOPED_TRACE(testing::Message() << "k " << k << " rank_order " << rank_order);
      TopkParams p;
      p.scores = sc.get(), p.out = out.get(), p.rows = 1, p.n = n, p.k = k, p.rank_order = rank_order;
      DeviceBuffer<unsigned long long> ws{size_t(cuda::topk_workspace_words(p))};
      p.workspace = ws.get();
      CountScope scope;
      cuda::topk(p);
      const auto& c = scope.counts();
      EXPECT_EQ(c.kernel_launches(), launches);
      EXPECT_EQ(c.memsets, memsets);
      EXPECT_EQ(c.host_syncs, 0u);
      EXPECT_EQ(c.copies, 0u);
      EXPECT_EQ(uint64_t(cuda::topk_launches(p)), launches + memsets);
    }
  }
  {  // paged decode: the split kernel, then the merge when there are several splits
    const int ps = 16, Hq = 4, Hkv = 2, hd = 32, pages = 8;
    std::vector<int32_t> idx(pages);
    std::iota(idx.begin(), idx.end(), 0);
    DeviceBuffer<float> kp(randn(size_t(pages) * ps * Hkv * hd, 6)), vp(randn(size_t(pages) * ps * Hkv * hd, 7));
    DeviceBuffer<float> q(randn(size_t(Hq) * hd, 8)), o{size_t(Hq) * hd}, l{size_t(Hq)}, ws{size_t(Hq) * 8 * (hd + 1)};
    DeviceBuffer<int32_t> ptr(std::vector<int32_t>{0, pages}), didx(idx), last(std::vector<int32_t>{ps});
    PagedDecodeParams p;
    p.q = q.get(), p.k_pages = kp.get(), p.v_pages = vp.get(), p.indptr = ptr.get(), p.indices = didx.get();
    p.last_page_len = last.get(), p.out = o.get(), p.lse = l.get(), p.workspace = ws.get();
    p.batch = 1, p.num_qo_heads = Hq, p.num_kv_heads = Hkv, p.head_dim = hd, p.page_size = ps, p.scale = 0.2f;
    p.max_pages_per_request = pages;
    for (int split : {pages, 2}) {
      p.pages_per_split = split;
      CountScope scope;
      cuda::paged_decode_attention(p);
      expect(scope.counts(), split == pages ? 1 : 2, 0, "paged_decode_attention");
    }
  }
}

// Coalescing (issue #28 item 4): every launch of every optimized kernel, at shapes like the validation
// cases' (head dim 128, pages of 16, CHESS levels of 8, rho 64), uses at least 90% of the 32-byte sector
// bytes its warps fetch (kernels/optimized/README.md gives each kernel's expected ratio and why). The
// counts come from the emulator's sector counting; an emulator without it reports no sectors, and the
// test says so and skips rather than passing on nothing.
TEST(OptKernelsCoalescing, EveryLaunchUsesNinetyPercentOfItsSectorBytes) {
  namespace cuda = kvsim::opt::cuda_emu;
  using kvsim::ref::cuda_emu::DeviceBuffer;
  kvsim::emu::CountScope scope;
  {  // paged decode, 4 splits + merge: 1024 tokens, GQA 4/1, head dim 128, 4 and 8 floats per lane
    const int ps = 16, Hq = 4, Hkv = 1, hd = 128, pages = 64;
    std::vector<int32_t> idx(pages);
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), std::mt19937(9));
    DeviceBuffer<float> kp(randn(size_t(pages) * ps * Hkv * hd, 10)), vp(randn(size_t(pages) * ps * Hkv * hd, 11));
    DeviceBuffer<float> q(randn(size_t(Hq) * hd, 12)), o{size_t(Hq) * hd}, l{size_t(Hq)};
    DeviceBuffer<float> ws{size_t(Hq) * 4 * (hd + 2)};
    DeviceBuffer<int32_t> ptr(std::vector<int32_t>{0, pages}), didx(idx), last(std::vector<int32_t>{ps});
    PagedDecodeParams p;
    p.q = q.get(), p.k_pages = kp.get(), p.v_pages = vp.get(), p.indptr = ptr.get(), p.indices = didx.get();
    p.last_page_len = last.get(), p.out = o.get(), p.lse = l.get(), p.workspace = ws.get();
    p.batch = 1, p.num_qo_heads = Hq, p.num_kv_heads = Hkv, p.head_dim = hd, p.page_size = ps, p.scale = 0.1f;
    p.max_pages_per_request = pages, p.pages_per_split = 16;
    for (int lane_floats : {4, 8}) p.lane_floats = lane_floats, cuda::paged_decode_attention(p);
  }
  {  // top-k of 65536 scores split over 16 blocks, k = 1024 and 8192 (a merge round), both orders
    DeviceBuffer<float> sc(randn(65536, 13));
    DeviceBuffer<int32_t> out{size_t(8192)};
    TopkParams p;
    p.scores = sc.get(), p.out = out.get(), p.rows = 1, p.n = 65536;
    for (int64_t k : {1024, 8192})
      for (bool rank_order : {true, false}) {
        p.k = k, p.rank_order = rank_order;
        DeviceBuffer<unsigned long long> ws{size_t(cuda::topk_workspace_words(p))};
        p.workspace = ws.get();
        cuda::topk(p);
      }
  }
  {  // one-block top-k: 4096 scores, k = 64, both orders
    DeviceBuffer<float> sc(randn(4096, 15));
    DeviceBuffer<int32_t> out{size_t(64)};
    TopkParams p;
    p.scores = sc.get(), p.out = out.get(), p.rows = 1, p.n = 4096, p.k = 64;
    for (bool rank_order : {true, false}) p.rank_order = rank_order, cuda::topk(p);
  }
  {  // the staging gather: 24 pages of 16 KiB in runs
    const int64_t row = 16 * 2 * 128;
    std::vector<int32_t> pages;
    for (int32_t pg : {3, 4, 5, 6, 20, 21, 40, 41, 42, 43, 44, 45, 46, 47, 9, 10, 11, 12, 13, 30, 31, 32, 33, 0})
      pages.push_back(pg);
    const auto runs = kvsim::opt::plan_page_runs(pages, 1, 0);
    DeviceBuffer<float> src(randn(size_t(48 * row), 14)), dst{size_t(runs.total_rows * row)};
    DeviceBuffer<int32_t> sr(runs.src_row), dr(runs.dst_row), rr(runs.rows);
    GatherRunsParams p;
    p.src = src.get(), p.dst = dst.get(), p.src_row = sr.get(), p.dst_row = dr.get(), p.rows = rr.get();
    p.num_runs = runs.size(), p.row_elems = row;
    cuda::gather_runs(p);
  }
  {  // centroid recall: G 4, 1024 centroids of 128, C' 64, rho 64, 16384 keys
    const int G = 4, C = 1024, d = 128, rho = 64;
    std::vector<int32_t> ivf(size_t(C) * rho);
    std::mt19937 rng(15);
    for (auto& id : ivf) id = int32_t(rng() % 16384u);
    DeviceBuffer<float> q(randn(size_t(G) * d, 16)), cent(randn(size_t(G) * C * d, 17)), sc{size_t(C)};
    DeviceBuffer<int32_t> divf(ivf), chosen{size_t(64)}, count{1}, out{size_t(64) * rho};
    CentroidRecallParams p;
    p.q = q.get(), p.centroids = cent.get(), p.ivf = divf.get(), p.out = out.get(), p.chosen = chosen.get();
    p.G = G, p.C = C, p.d = d, p.rho = rho, p.c_prime = 64, p.num_keys = 16384;
    p.centroid_scores = sc.get(), p.count = count.get();
    cuda::centroid_recall(p);
  }
  {  // CHESS: 4096 pages, chunks of 8, grids of 8, d 128, retentions 0.5 / 0.5 / 0.25
    const int64_t P = 4096, C = 512, G = 64, n = G + C + P;
    const int d = 128;
    DeviceBuffer<float> a(randn(d, 18)), M(randn(size_t(n) * d, 19)), s{size_t(n)};
    DeviceBuffer<int32_t> g{size_t(G)}, c{size_t(C)}, pg{size_t(P)}, counts{3};
    kvsim::opt::ChessSelectParams p;
    p.anchor = a.get(), p.summaries = M.get(), p.scores = s.get();
    p.num_pages = P, p.pages_per_chunk = 8, p.chunks_per_grid = 8, p.d = d, p.rho_g = 0.5, p.rho_c = 0.5, p.rho_p = 0.25;
    p.grids = g.get(), p.chunks = c.get(), p.pages = pg.get(), p.level_counts = counts.get();
    cuda::chess_select(p);
  }
  {  // the deployment's score GEMVs: SEKV's routing (32 heads, d' 32), sentence scores and Quest bounds
     // (8 KV heads of 4, d 128), SEKV's reconstruction (64 blocks of 32 rows, rank 16)
    const int64_t spans = 1000;
    DeviceBuffer<float> q(randn(32 * 128, 20)), W(randn(32 * 128 * 32, 21)), S(randn(size_t(32 * spans * 32), 22));
    DeviceBuffer<int32_t> len(std::vector<int32_t>(size_t(spans), 32));
    DeviceBuffer<float> gates{size_t(32 * spans)};
    kvsim::opt::RouteGatesParams r;
    r.q = q.get(), r.W = W.get(), r.summaries = S.get(), r.span_len = len.get(), r.gates = gates.get();
    r.heads = 32, r.d = 128, r.d_proj = 32, r.spans = spans;
    cuda::route_gates(r);
    DeviceBuffer<float> lo(randn(size_t(8 * 1000 * 128), 23)), hi(randn(size_t(8 * 1000 * 128), 24)), out{size_t(32 * 1000)};
    kvsim::opt::GroupScoreParams g;
    g.q = q.get(), g.vectors = lo.get(), g.out = out.get(), g.kv_heads = 8, g.group = 4, g.d = 128, g.n = 1000;
    cuda::group_scores(g);
    g.hi = hi.get();
    cuda::group_scores(g);
    const int blocks = 64, rows = 32, rank = 16, d = 128;
    std::vector<int64_t> off(static_cast<size_t>(blocks)), at(static_cast<size_t>(blocks));
    for (int b = 0; b < blocks; ++b) off[size_t(b)] = int64_t(b) * rank * (rows + d), at[size_t(b)] = int64_t(b) * rows;
    DeviceBuffer<float> f(randn(size_t(blocks) * rank * (rows + d), 25)), x{size_t(blocks) * rows * d};
    DeviceBuffer<int64_t> doff(off), dat(at);
    DeviceBuffer<int32_t> drows(std::vector<int32_t>(size_t(blocks), rows)), drank(std::vector<int32_t>(size_t(blocks), rank));
    kvsim::opt::ReconstructParams rc;
    rc.factors = f.get(), rc.factor_offset = doff.get(), rc.rows = drows.get(), rc.rank = drank.get();
    rc.out_row = dat.get(), rc.blocks = blocks, rc.d = d, rc.out = x.get();
    cuda::sekv_reconstruct(rc);
  }
  const auto& launches = scope.counts().launches;
  // decode 2 per lane width; split top-k 3 passes + count + write (+ tile sort, + 1 merge round at
  // k = 8192): 6 + 5 + 7 + 5, one-block top-k 1 per order; gather 1, recall 2, CHESS 2; routing 1,
  // group scores 2, reconstruction 1.
  ASSERT_EQ(launches.size(), 38u);
  if (scope.counts().sectors() == 0) GTEST_SKIP() << "this emulator does not count sectors yet";
  for (const auto& l : launches) {
    EXPECT_GE(l.efficiency(), 0.9) << l.kernel;
    std::cout << "  " << l.kernel << ": " << l.useful_bytes() << " useful of " << l.sector_bytes()
              << " sector bytes (" << 100 * l.efficiency() << "%; loads " << l.load_useful_bytes << "/"
              << 32 * l.load_sectors << ", stores " << l.store_useful_bytes << "/" << 32 * l.store_sectors
              << ", atomics " << l.atomic_useful_bytes << "/" << 32 * l.atomic_sectors << ")\n";
  }
}

// `kvsim validate --device cuda` times every optimized kernel: its case list holds them where CUDA is
// built in (the list is empty without it, and validate stops before it).
TEST(OptKernelsValidate, CudaCaseListIncludesTheOptimizedKernels) {
  std::vector<std::string> names;
  for (const auto& c : kvsim::validate::cuda_cases()) names.push_back(c.phase);
#if defined(KVSIM_HAVE_CUDA)
  for (const char* want : {"cuda_opt_paged_decode", "cuda_opt_sparse_paged", "cuda_opt_topk", "cuda_opt_gather_runs",
                           "cuda_opt_centroid_recall", "cuda_opt_chess_select", "cuda_opt_uncertainty",
                           "cuda_opt_sekv_zoom", "cuda_opt_sekv_reconstruct", "cuda_opt_route_gates",
                           "cuda_opt_group_scores", "cuda_opt_quest_bounds"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
#else
  EXPECT_TRUE(names.empty());
#endif
}

}  // namespace

// The emulator's cases, for the access checker's barrier-deletion test (tests/test_emu_checker.cpp).
const std::vector<kvsim::test::CudaCaseDef>& kvsim::test::optimized_emu_cases() { return on_cpu::cases(); }
