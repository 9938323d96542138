// Every step of the CUDA backend (kernels/backend/cuda_backend.inc: the kernels/optimized/ kernels, on a
// GPU or emulated on the CPU) against the host reference backend (kvsim::ref) at the edges: empty inputs,
// k = 0 and k >= n, ties, NaN, lengths that are not a multiple of a block or a page. Where the device
// runs the host's arithmetic (scores, means, selections) the results must be bit-identical; attention,
// PCA and SVD factors within the tolerances docs/replay.md states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/backend/backend.hpp"
#include "kernels/reference/lowrank.hpp"

using namespace kvsim::kernels;

namespace {

using Vec = std::vector<float>;
using Ids = std::vector<int32_t>;

Vec randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  Vec v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

void expect_bits(const Vec& a, const Vec& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) << i << ": " << a[i] << " vs " << b[i];
}
// Steps that take exponentials: bit-identical to the host under the emulator (the same expf runs), within
// `ulps` units in the last place on a real GPU, whose expf is not glibc's (the first H200 run saw 1 ulp;
// docs/validation/gpu-kit.md). `real_gpu`: the device backend runs on a GPU (Backend::timing_meaningful).
void expect_bits_or_ulps(const Vec& a, const Vec& b, bool real_gpu, int ulps = 4) {
  if (!real_gpu) return expect_bits(a, b);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i]) || std::isinf(a[i]) || std::isinf(b[i])) {
      EXPECT_TRUE(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) << i << ": " << a[i] << " vs " << b[i];
      continue;
    }
    const float tol = ulps * std::max(std::nextafter(std::fabs(b[i]), INFINITY) - std::fabs(b[i]), FLT_TRUE_MIN);
    EXPECT_LE(std::fabs(a[i] - b[i]), tol) << i << ": " << a[i] << " vs " << b[i];
  }
}
void expect_near(const Vec& a, const Vec& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << i;
}

}  // namespace

// A fresh pair of backends per test, destroyed with it: a CUDA backend keeps device memory (the resident
// K/V), which must be freed while the emulator's allocator is alive, not at static destruction.
class CudaBackendSteps : public ::testing::Test {
 protected:
  const Backend& dev() const { return *dev_; }
  const Backend& host() const { return *host_; }

 private:
  std::unique_ptr<Backend> dev_ = make_cuda_backend();
  std::unique_ptr<Backend> host_ = make_host_backend();
};

TEST_F(CudaBackendSteps, EveryStepRunsOnTheDeviceWithNamedKernels) {
  for (int s = 0; s <= int(Step::sekv_zoom); ++s) {
    SCOPED_TRACE(step_name(Step(s)));
    EXPECT_EQ(dev().where(Step(s)), Where::device);
    EXPECT_NE(dev().kernels(Step(s)).find("opt::"), std::string::npos);
  }
}

TEST_F(CudaBackendSteps, DedupEmptyDuplicatesAndWideIds) {
  EXPECT_TRUE(dev().dedup({.ids = nullptr, .n = 0}).empty());
  for (const Ids& ids : {Ids{7}, Ids{3, 3, 3}, Ids{31, 32, 0, 31, 33, 64, 63}, Ids{100000, 5, 99999, 5, 70000}}) {
    EXPECT_EQ(dev().dedup({.ids = ids.data(), .n = int64_t(ids.size())}),
              host().dedup({.ids = ids.data(), .n = int64_t(ids.size())}));
  }
  // Thousands of ids over more bitmap words than one block's tile.
  std::mt19937 rng(3);
  Ids many(5000);
  for (auto& x : many) x = int32_t(rng() % 200003);
  EXPECT_EQ(dev().dedup({.ids = many.data(), .n = 5000}), host().dedup({.ids = many.data(), .n = 5000}));
  const Ids neg = {1, -2};
  EXPECT_THROW(dev().dedup({.ids = neg.data(), .n = 2}), std::runtime_error);
}

TEST_F(CudaBackendSteps, TopkTiesNanAndK) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Vec s = {1, nan, 3, 3, -0.f, 0.f, 3, nan, -1};
  for (int64_t k : {0, 1, 3, 5, 9, 20})
    EXPECT_EQ(dev().topk({.scores = s.data(), .n = int64_t(s.size()), .k = k}),
              host().topk({.scores = s.data(), .n = int64_t(s.size()), .k = k}))
        << k;
  const Vec r = randn(1000, 4);
  EXPECT_EQ(dev().topk({.scores = r.data(), .n = 1000, .k = 257}), host().topk({.scores = r.data(), .n = 1000, .k = 257}));
}

TEST_F(CudaBackendSteps, PositionIdsEdges) {
  for (auto [n, sinks, window] : std::vector<std::array<int64_t, 3>>{
           {0, 4, 8}, {1, 4, 8}, {10, 4, 3}, {10, 20, 0}, {10, 0, 20}, {10, 6, 6}, {1000, 4, 257}, {10, -1, -1}})
    EXPECT_EQ(dev().position_ids({.n = n, .sinks = sinks, .window = window}),
              host().position_ids({.n = n, .sinks = sinks, .window = window}))
        << n << " " << sinks << " " << window;
}

TEST_F(CudaBackendSteps, ScoresAreBitIdentical) {
  const int d = 7;
  const int64_t n = 300, m = 3;
  Vec M = randn(size_t(n * d), 5), Q = randn(size_t(m * d), 6);
  std::fill_n(M.begin() + 5 * d, d, 0.f);  // a zero row: cosine 0
  for (bool cosine : {false, true}) {
    Vec a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    dev().score_gemv({.q = Q.data(), .M = M.data(), .n = n, .d = d, .cosine = cosine, .scale = 0.5f, .scores = a.data()});
    host().score_gemv({.q = Q.data(), .M = M.data(), .n = n, .d = d, .cosine = cosine, .scale = 0.5f, .scores = b.data()});
    expect_bits(a, b);
  }
  Vec a(size_t(m * n)), b(size_t(m * n));
  dev().score_gemm({.Q = Q.data(), .m = m, .M = M.data(), .n = n, .d = d, .scale = 0.25f, .S = a.data()});
  host().score_gemm({.Q = Q.data(), .m = m, .M = M.data(), .n = n, .d = d, .scale = 0.25f, .S = b.data()});
  expect_bits(a, b);
}

TEST_F(CudaBackendSteps, MeansAreBitIdentical) {
  const int d = 5;
  const Vec X = randn(70 * d, 7);
  const Ids starts = {0, 1, 9, 40, 69};
  Vec a(starts.size() * d), b(starts.size() * d);
  dev().segment_mean({.X = X.data(), .n = 70, .d = d, .starts = starts.data(), .segments = 5, .out = a.data()});
  host().segment_mean({.X = X.data(), .n = 70, .d = d, .starts = starts.data(), .segments = 5, .out = b.data()});
  expect_bits(a, b);
  const Ids bad = {0, 80};
  EXPECT_THROW(dev().segment_mean({.X = X.data(), .n = 70, .d = d, .starts = bad.data(), .segments = 2, .out = a.data()}),
               std::invalid_argument);
  // Page vectors of three sources, 70 rows in pages of 32 (the last partial).
  const Vec Y = randn(70 * d, 8), Z = randn(70 * d, 9);
  const float* src[3] = {X.data(), Y.data(), Z.data()};
  Vec pa(3 * 3 * d), pb(3 * 3 * d);
  dev().chess_page_vectors({.sources = src, .count = 3, .n = 70, .d = d, .page_size = 32, .out = pa.data()});
  host().chess_page_vectors({.sources = src, .count = 3, .n = 70, .d = d, .page_size = 32, .out = pb.data()});
  expect_bits(pa, pb);
  for (int64_t w : {0, 1, 4, 70, 100}) {
    Vec ta(d), tb(d);
    dev().tail_mean({.X = X.data(), .m = 70, .d = d, .w = w, .out = ta.data()});
    host().tail_mean({.X = X.data(), .m = 70, .d = d, .w = w, .out = tb.data()});
    expect_bits(ta, tb);
  }
  Vec ga(24 * d), gb(24 * d);
  dev().group_mean({.X = X.data(), .m = 70, .d = d, .group = 3, .out = ga.data()});
  host().group_mean({.X = X.data(), .m = 70, .d = d, .group = 3, .out = gb.data()});
  expect_bits(ga, gb);
}

TEST_F(CudaBackendSteps, ContextPagesUnionSinksAndWindow) {
  const Ids sel = {5, 2, 5, 9};
  for (auto [pages, sinks, window] : std::vector<std::array<int64_t, 3>>{
           {12, 1, 4}, {12, 0, 0}, {3, 5, 5}, {40, 2, 1}, {0, 1, 1}, {12, 1, -2}}) {
    const int64_t count = pages == 0 ? 0 : 4;
    EXPECT_EQ(dev().chess_context_pages({.selected = sel.data(), .count = count, .num_pages = pages, .sink_pages = sinks,
                                         .window_pages = window}),
              host().chess_context_pages({.selected = sel.data(), .count = count, .num_pages = pages,
                                          .sink_pages = sinks, .window_pages = window}))
        << pages << " " << sinks << " " << window;
  }
}

TEST_F(CudaBackendSteps, WindowPoolAndChunkAreBitIdentical) {
  const int d = 8, G = 2, w = 3;
  const int64_t n = 300;
  const Vec K = randn(size_t(n) * d, 10), Qw = randn(size_t(G) * w * d, 11);
  Vec a(size_t(n - w)), b(size_t(n - w));
  dev().obs_window_scores({.queries = Qw.data(), .groups = G, .window = w, .keys = K.data(), .n = n, .d = d,
                           .scale = 0.3f, .scores = a.data()});
  host().obs_window_scores({.queries = Qw.data(), .groups = G, .window = w, .keys = K.data(), .n = n, .d = d,
                            .scale = 0.3f, .scores = b.data()});
  expect_bits_or_ulps(a, b, dev().timing_meaningful());
  EXPECT_THROW(dev().obs_window_scores({.queries = Qw.data(), .groups = G, .window = 0, .keys = K.data(), .n = n,
                                        .d = d, .scale = 1, .scores = a.data()}),
               std::invalid_argument);
  for (int k : {1, 3, 4, 7})
    for (bool is_max : {true, false}) {
      Vec pa(a.size()), pb(a.size());
      dev().pool1d({.in = a.data(), .n = int64_t(a.size()), .kernel = k, .is_max = is_max, .out = pa.data()});
      host().pool1d({.in = a.data(), .n = int64_t(a.size()), .kernel = k, .is_max = is_max, .out = pb.data()});
      expect_bits(pa, pb);
    }
  Vec ca(43), cb(43);
  dev().chunk_sum({.scores = a.data(), .n = int64_t(a.size()), .chunk = 7, .out = ca.data()});
  host().chunk_sum({.scores = a.data(), .n = int64_t(a.size()), .chunk = 7, .out = cb.data()});
  expect_bits(ca, cb);
}

TEST_F(CudaBackendSteps, QuestPagesBoundsAndSelection) {
  const int d = 6, page = 16;
  const int64_t n = 100, pages = 7;  // the last page partial
  const Vec K = randn(size_t(n) * d, 12), q = randn(d, 13);
  Vec lo(pages * d), hi(pages * d), lo2(pages * d), hi2(pages * d);
  dev().quest_page_minmax({.keys = K.data(), .n = n, .d = d, .page_size = page, .kmin = lo.data(), .kmax = hi.data()});
  host().quest_page_minmax({.keys = K.data(), .n = n, .d = d, .page_size = page, .kmin = lo2.data(), .kmax = hi2.data()});
  expect_bits(lo, lo2);
  expect_bits(hi, hi2);
  Vec ba(pages), bb(pages);
  dev().quest_page_bound({.q = q.data(), .kmin = lo.data(), .kmax = hi.data(), .pages = pages, .d = d, .bound = ba.data()});
  host().quest_page_bound({.q = q.data(), .kmin = lo.data(), .kmax = hi.data(), .pages = pages, .d = d, .bound = bb.data()});
  expect_bits(ba, bb);
  ba[1] = ba[2] = ba[4];  // ties: the lower page first
  ba[3] = std::numeric_limits<float>::quiet_NaN();  // NaN ranks last
  for (int64_t k : {0, 1, 2, 4, 7, 10})
    EXPECT_EQ(dev().quest_select_pages({.bound = ba.data(), .pages = pages, .k = k}),
              host().quest_select_pages({.bound = ba.data(), .pages = pages, .k = k}))
        << k;
  // Several rows in one call (a layer's KV heads): row by row the same pages as one call per row, at a
  // length that splits each row over blocks (the bound rows are pages long; the last page is never a
  // candidate, so each row's scores sit inside the longer bound row).
  const int rows = 3;
  const int64_t many = 9001;
  std::mt19937 rng(5);
  Vec rb(static_cast<size_t>(rows * many));
  for (auto& x : rb) x = float(int(rng() % 300));  // ties
  rb[17] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t k : {int64_t(1), int64_t(2), int64_t(500), many}) {
    const Ids all = dev().quest_select_pages({.bound = rb.data(), .pages = many, .k = k, .rows = rows});
    Ids want;
    for (int r = 0; r < rows; ++r) {
      const Ids one = host().quest_select_pages({.bound = rb.data() + r * many, .pages = many, .k = k});
      want.insert(want.end(), one.begin(), one.end());
    }
    EXPECT_EQ(all, want) << k;
    EXPECT_EQ(host().quest_select_pages({.bound = rb.data(), .pages = many, .k = k, .rows = rows}), want) << k;
  }
}

// A KV head's whole group in one call (each page's min/max read once): the largest of the heads' bounds,
// bit-identical to the host's, for a GQA group of 4 and a multi-query group above the kernel's 16
// running sums; a NaN bound of one head is passed over as std::max from -inf passes it.
TEST_F(CudaBackendSteps, QuestPageBoundOfAWholeGroup) {
  const int d = 10;
  const int64_t pages = 37;
  const Vec lo = randn(size_t(pages) * d, 21), hi = randn(size_t(pages) * d, 22);
  for (int heads : {1, 4, 19}) {
    Vec q = randn(size_t(heads) * d, 23 + heads);
    if (heads > 1) q[size_t(d) + 3] = std::numeric_limits<float>::quiet_NaN();  // head 1: every bound NaN
    Vec ba(pages), bb(pages), one(pages);
    dev().quest_page_bound({.q = q.data(), .kmin = lo.data(), .kmax = hi.data(), .pages = pages, .d = d,
                            .heads = heads, .bound = ba.data()});
    host().quest_page_bound({.q = q.data(), .kmin = lo.data(), .kmax = hi.data(), .pages = pages, .d = d,
                             .heads = heads, .bound = bb.data()});
    expect_bits(ba, bb);
    // The host's grouped call is the per-head calls folded by std::max from -inf.
    Vec want(pages, -std::numeric_limits<float>::infinity());
    for (int h = 0; h < heads; ++h) {
      host().quest_page_bound({.q = q.data() + h * d, .kmin = lo.data(), .kmax = hi.data(), .pages = pages, .d = d,
                               .bound = one.data()});
      for (int64_t i = 0; i < pages; ++i) want[size_t(i)] = std::max(want[size_t(i)], one[size_t(i)]);
    }
    expect_bits(bb, want);
  }
}

TEST_F(CudaBackendSteps, ChessLevelsMatchTheReference) {
  const int64_t P = 300;  // pages; 8 per chunk (the last partial), 8 chunks per grid
  const int64_t C = (P + 7) / 8, G = (C + 7) / 8;
  Vec s = randn(size_t(G + C + P), 14);
  s[G + C + 3] = s[G + C + 4];  // a tie among the pages
  s[G + C + 10] = s[G + 1] = std::numeric_limits<float>::quiet_NaN();  // NaN ranks last
  for (auto [rg, rc, rp] : std::vector<std::array<double, 3>>{{0.5, 0.2, 0.1}, {1, 1, 1}, {0, 0.5, 0.5}, {0.3, 0.7, 0.01}}) {
    const ChessSelectParams p{.grid_scores = s.data(), .chunk_scores = s.data() + G, .page_scores = s.data() + G + C,
                              .pages = P, .pages_per_chunk = 8, .chunks_per_grid = 8, .rho_g = rg, .rho_c = rc, .rho_p = rp};
    const ChessKept a = dev().chess_select(p), b = host().chess_select(p);
    EXPECT_EQ(a.grids, b.grids);
    EXPECT_EQ(a.chunks, b.chunks);
    EXPECT_EQ(a.pages, b.pages);
  }
}

TEST_F(CudaBackendSteps, BiasedAttentionAndMergeWithinTolerance) {
  const int d = 40, rows = 3;  // d not a multiple of 32: partial lanes
  const int64_t m = 37;
  const Vec Q = randn(rows * d, 15), K = randn(m * d, 16), V = randn(m * d, 17);
  Vec bias = randn(m, 18);
  bias[4] = -INFINITY;
  Vec oa(rows * d), ob(rows * d), la(rows), lb(rows);
  for (int64_t mm : {int64_t(0), m}) {
    dev().biased_attention({.queries = Q.data(), .rows = rows, .keys = K.data(), .values = V.data(), .bias = bias.data(),
                            .m = mm, .d = d, .scale = 0.2f, .out = oa.data(), .lse = la.data()});
    host().biased_attention({.queries = Q.data(), .rows = rows, .keys = K.data(), .values = V.data(), .bias = bias.data(),
                             .m = mm, .d = d, .scale = 0.2f, .out = ob.data(), .lse = lb.data()});
    expect_near(oa, ob, 1e-5);
    for (int r = 0; r < rows; ++r)
      if (mm == 0)
        EXPECT_TRUE(std::isinf(la[r]) && std::isinf(lb[r]));
      else
        EXPECT_NEAR(la[r], lb[r], 1e-5);
  }
  // Merge in place (out aliases a), one side empty.
  Vec a = randn(rows * d, 19), b = randn(rows * d, 20), lsa = {0.5f, -INFINITY, 2.f}, lsb = {1.f, 0.f, -INFINITY};
  Vec a2 = a, outl(rows), outl2(rows);
  dev().merge_state({.out_a = a.data(), .lse_a = lsa.data(), .out_b = b.data(), .lse_b = lsb.data(), .rows = rows, .d = d,
                     .out = a.data(), .lse = outl.data()});
  host().merge_state({.out_a = a2.data(), .lse_a = lsa.data(), .out_b = b.data(), .lse_b = lsb.data(), .rows = rows,
                      .d = d, .out = a2.data(), .lse = outl2.data()});
  expect_bits_or_ulps(a, a2, dev().timing_meaningful());
  expect_bits_or_ulps(outl, outl2, dev().timing_meaningful());
}

TEST_F(CudaBackendSteps, CtkvrBuildRecallRerankAreIdentical) {
  const int d = 8, G = 2, C = 5, rho = 7;
  const int64_t n = 90;
  const Vec K = randn(n * d, 21), cent = randn(G * C * d, 22), q = randn(G * d, 23);
  Ids ia(C * rho), ib(C * rho);
  EXPECT_EQ(dev().qcivf_build({.centroids = cent.data(), .groups = G, .C = C, .keys = K.data(), .n = n, .d = d,
                               .scale = 0.35f, .rho = rho, .ivf = ia.data()}),
            host().qcivf_build({.centroids = cent.data(), .groups = G, .C = C, .keys = K.data(), .n = n, .d = d,
                                .scale = 0.35f, .rho = rho, .ivf = ib.data()}));
  EXPECT_EQ(ia, ib);
  for (int cp : {0, 1, 3, 5, 9}) {
    const CtkvrRecallParams p{.q = q.data(), .groups = G, .centroids = cent.data(), .C = C, .d = d, .ivf = ia.data(),
                              .rho = rho, .c_prime = cp};
    const Ids ra = dev().ctkvr_recall(p), rb = host().ctkvr_recall(p);
    EXPECT_EQ(ra, rb) << cp;
    for (int rp : {0, 1, 4, 100}) {
      const CtkvrRerankParams r{.q = q.data(), .groups = G, .keys = K.data(), .n = n, .resident_rows = n, .d = d,
                                .recalled = rb.data(), .m = int64_t(rb.size()), .scale = 0.35f, .rho_prime = rp};
      EXPECT_EQ(dev().ctkvr_rerank(r), host().ctkvr_rerank(r)) << cp << " " << rp;
    }
  }
}

TEST_F(CudaBackendSteps, PcaDirectionsWithinTolerance) {
  const int d = 12, dp = 4;
  const int64_t n = 50;
  Vec K = randn(n * d, 24);
  for (int64_t t = 0; t < n; ++t)  // clearly separated variances: the directions are well defined
    for (int c = 0; c < d; ++c) K[t * d + c] *= float(1 + 2 * (d - c));
  const Vec a = dev().pca_projection({.keys = K.data(), .n = n, .d = d, .d_proj = dp});
  const Vec b = host().pca_projection({.keys = K.data(), .n = n, .d = d, .d_proj = dp});
  expect_near(a, b, 1e-5);
  EXPECT_TRUE(dev().pca_projection({.keys = K.data(), .n = n, .d = d, .d_proj = 0}).empty());
}

TEST_F(CudaBackendSteps, SpanSvdReconstructsWithinTolerance) {
  const int d = 16;
  for (int64_t n : {1, 5, 16, 40}) {  // wide (n <= d) and tall
    SCOPED_TRACE(n);
    const Vec X = randn(n * d, uint32_t(25 + n));
    for (double ef : {0.5, 0.9, 1.0}) {
      const auto a = dev().truncated_svd({.X = X.data(), .n = n, .d = d, .energy_fraction = ef, .r_max = 8});
      const auto b = host().truncated_svd({.X = X.data(), .n = n, .d = d, .energy_fraction = ef, .r_max = 8});
      ASSERT_EQ(a.rank, b.rank);
      EXPECT_NEAR(a.total_energy, b.total_energy, 1e-9 * b.total_energy);
      EXPECT_NEAR(a.discarded_energy, b.discarded_energy, 1e-6 * b.total_energy);
      expect_near(a.sigma, b.sigma, 1e-4);
      Vec ra(n * d), rb(n * d);
      kvsim::ref::lowrank_reconstruct(a, ra.data());
      kvsim::ref::lowrank_reconstruct(b, rb.data());
      expect_near(ra, rb, 1e-4);
    }
  }
  const Vec zero(8 * d, 0.f);
  EXPECT_EQ(dev().truncated_svd({.X = zero.data(), .n = 8, .d = d, .energy_fraction = 0.9, .r_max = 4}).rank, 0);
}

TEST_F(CudaBackendSteps, SekvSummariesRoutingAndZoomAreIdentical) {
  const int d = 8, dp = 3, rows = 3;
  const int64_t n = 60;
  const Vec K = randn(n * d, 30), V = randn(n * d, 31), W = randn(d * dp, 32), Q = randn(rows * d, 33);
  Vec sur(n);
  for (int64_t t = 0; t < n; ++t) sur[t] = float(t % 5);  // a zero-weight span falls back to the plain mean
  const Ids b = {0, 5, 20, 23, 50}, e = {5, 20, 23, 50, 60};
  const Ids len = {5, 15, 3, 27, 10};
  for (const float* w : {static_cast<const float*>(nullptr), static_cast<const float*>(sur.data())}) {
    Vec ka(5 * d), va(5 * d), sa(5 * dp), kb(5 * d), vb(5 * d), sb(5 * dp);
    dev().sekv_summaries({.keys = K.data(), .values = V.data(), .n = n, .d = d, .weights = w, .span_begin = b.data(),
                          .span_end = e.data(), .spans = 5, .W = W.data(), .d_proj = dp, .kbar = ka.data(),
                          .vbar = va.data(), .summaries = sa.data()});
    host().sekv_summaries({.keys = K.data(), .values = V.data(), .n = n, .d = d, .weights = w, .span_begin = b.data(),
                           .span_end = e.data(), .spans = 5, .W = W.data(), .d_proj = dp, .kbar = kb.data(),
                           .vbar = vb.data(), .summaries = sb.data()});
    expect_bits(ka, kb);
    expect_bits(va, vb);
    expect_bits(sa, sb);
    Vec ga(5), gb(5);
    dev().sekv_routing({.queries = Q.data(), .rows = rows, .d = d, .W = W.data(), .d_proj = dp, .summaries = sa.data(),
                        .span_len = len.data(), .spans = 5, .best = ga.data()});
    host().sekv_routing({.queries = Q.data(), .rows = rows, .d = d, .W = W.data(), .d_proj = dp, .summaries = sa.data(),
                         .span_len = len.data(), .spans = 5, .best = gb.data()});
    expect_bits(ga, gb);
  }
  // The zoom: ties by the lower span, the threshold, incomplete spans, the budget's first misfit.
  const Vec gate = {0.9f, 0.04f, 0.9f, std::numeric_limits<float>::quiet_NaN(), 0.8f};  // a tie, below tau, NaN
  for (int64_t pos : {4, 30, 60})
    for (double room : {0.0, 5.0, 20.0, 23.0, 1e9}) {
      double ua = -1, ub = -1;
      const Ids za = dev().sekv_zoom({.gate = gate.data(), .span_len = len.data(), .span_end = e.data(), .spans = 5,
                                      .position = pos, .threshold = 0.05, .room = room, .used = &ua});
      const Ids zb = host().sekv_zoom({.gate = gate.data(), .span_len = len.data(), .span_end = e.data(), .spans = 5,
                                       .position = pos, .threshold = 0.05, .room = room, .used = &ub});
      EXPECT_EQ(za, zb) << pos << " " << room;
      EXPECT_EQ(ua, ub);
    }
  double u = -1;
  EXPECT_TRUE(dev().sekv_zoom({.gate = nullptr, .spans = 0, .used = &u}).empty());
  EXPECT_EQ(u, 0);
  // Many spans (more candidates than the budget's 1024 threads, so each sums a chunk of the ranking):
  // 3000 zoomed in one block in shared memory, 5000 ranked through global memory (a row split over
  // blocks in the ranking's top-k); the cut at a misfit anywhere in the ranking, at none, at the first
  // candidate, and no candidate at all.
  for (const int64_t many : {int64_t(3000), int64_t(5000)}) {
    std::mt19937 rng(77);
    Vec g(static_cast<size_t>(many));
    std::vector<int32_t> ln(static_cast<size_t>(many)), en(static_cast<size_t>(many));
    int32_t end = 0;
    for (int64_t i = 0; i < many; ++i) {
      g[size_t(i)] = float(rng() % 1000) / 1000.f;  // ties
      ln[size_t(i)] = int32_t(1 + rng() % 40);
      en[size_t(i)] = end += ln[size_t(i)];
    }
    for (double tau : {0.3, 2.0})
      for (double room : {0.0, 1.0, 777.0, 30000.0, 1e12}) {
        double ua = -1, ub = -1;
        const Ids za = dev().sekv_zoom({.gate = g.data(), .span_len = ln.data(), .span_end = en.data(), .spans = many,
                                        .position = int64_t(end) - 100, .threshold = tau, .room = room, .used = &ua});
        const Ids zb = host().sekv_zoom({.gate = g.data(), .span_len = ln.data(), .span_end = en.data(), .spans = many,
                                         .position = int64_t(end) - 100, .threshold = tau, .room = room, .used = &ub});
        EXPECT_EQ(za, zb) << many << " " << tau << " " << room;
        EXPECT_EQ(ua, ub) << many << " " << tau << " " << room;
      }
  }
}
