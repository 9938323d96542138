// The optimized host kernels (kernels/host/) against the reference (kvsim::ref): every score a selection
// is made from bit for bit, every selection id for id, attention outputs to float rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <numeric>
#include <vector>

#include "kernels/host/host.hpp"
#include "kernels/reference/reference.hpp"

using namespace kvsim;

namespace {
std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

// Shapes that exercise the 16-key tiles, a partial last tile, rows in passes of 4 and their remainders,
// head dims that are and are not multiples of 8, and gathered rows.
TEST(HostKernels, ExactDotsAreBitIdenticalToTheReferenceScores) {
  for (int d : {128, 64, 20, 7})
    for (int R : {1, 3, 4, 9})
      for (int64_t n : {int64_t(1), int64_t(15), int64_t(16), int64_t(37), int64_t(300)}) {
        SCOPED_TRACE("d=" + std::to_string(d) + " R=" + std::to_string(R) + " n=" + std::to_string(n));
        const auto Q = random_floats(size_t(R) * d, 1), K = random_floats(size_t(n) * d, 2);
        std::vector<float> ref(size_t(R) * n), got(size_t(R) * n, NAN);
        ref::score_gemm(Q.data(), R, K.data(), n, d, ref.data(), ref::ScoreKind::dot, 0.125f);
        host::exact_dots(Q.data(), R, d, K.data(), nullptr, n, d, 0.125f, got.data(), n);
        EXPECT_TRUE(same_bits(ref, got));
        // Gathered rows: every other row, backwards.
        std::vector<int32_t> idx;
        for (int64_t i = n - 1; i >= 0; i -= 2) idx.push_back(int32_t(i));
        const int64_t m = int64_t(idx.size());
        std::vector<float> rows(size_t(m) * d), ref2(size_t(R) * m), got2(size_t(R) * m, NAN);
        ref::gather_rows(K.data(), n, d, idx.data(), m, rows.data());
        ref::score_gemm(Q.data(), R, rows.data(), m, d, ref2.data(), ref::ScoreKind::dot, 1.f);
        host::exact_dots(Q.data(), R, d, K.data(), idx.data(), m, d, 1.f, got2.data(), m);
        EXPECT_TRUE(same_bits(ref2, got2));
      }
}

TEST(HostKernels, ObservationWindowScoresAreBitIdentical) {
  for (int64_t n : {int64_t(40), int64_t(333)})
    for (int w : {1, 8, 33}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " w=" + std::to_string(w));
      const int G = 4, d = 64;
      const auto Q = random_floats(size_t(G) * w * d, 3, -3.f, 3.f), K = random_floats(size_t(n) * d, 4);
      std::vector<float> a(size_t(n - w)), b(size_t(n - w), NAN);
      ref::obs_window_scores(Q.data(), G, w, K.data(), n, d, 0.125f, a.data());
      host::obs_window_scores(Q.data(), G, w, K.data(), n, d, 0.125f, b.data());
      EXPECT_TRUE(same_bits(a, b));
    }
}

TEST(HostKernels, TopkMatchesTheReferenceWithTiesAndNaN) {
  std::mt19937 g(5);
  for (int64_t n : {int64_t(1), int64_t(10), int64_t(1000), int64_t(70000)})
    for (int64_t k : {int64_t(0), int64_t(1), int64_t(7), int64_t(64), n - 1, n, n + 3}) {
      std::vector<float> s(static_cast<size_t>(n));
      std::uniform_int_distribution<int> coarse(0, 20);  // many ties
      for (auto& x : s) x = float(coarse(g)) * 0.25f - 2.f;
      if (n > 3) {
        s[1] = NAN;
        s[2] = -0.f;
        s[3] = 0.f;
        s[0] = std::numeric_limits<float>::infinity();
      }
      const auto ref = ref::topk(s, k);
      EXPECT_EQ(ref, host::topk(s.data(), n, k)) << "n=" << n << " k=" << k;
    }
}

TEST(HostKernels, CtkvrRerankAndQcivfAreIdenticalToTheReference) {
  const int G = 4, d = 128, C = 5, rho = 40;
  const int64_t n = 700;
  const auto K = random_floats(size_t(n) * d, 6), cent = random_floats(size_t(G) * C * d, 7, -2.f, 2.f);
  std::vector<int32_t> a(size_t(C) * rho), b(size_t(C) * rho, -1);
  EXPECT_EQ(ref::qcivf_build(cent.data(), G, C, K.data(), n, d, 0.088f, rho, a.data()),
            host::qcivf_build(cent.data(), G, C, K.data(), n, d, 0.088f, rho, b.data()));
  EXPECT_EQ(a, b);
  const auto q = random_floats(size_t(G) * d, 8, -2.f, 2.f);
  std::vector<int32_t> recalled;
  for (int32_t i = 3; i < n; i += 3) recalled.push_back(i);
  EXPECT_EQ(ref::ctkvr_rerank(q.data(), G, K.data(), n, d, recalled, 0.088f, 50),
            host::ctkvr_rerank(q.data(), G, K.data(), n, d, recalled.data(), int64_t(recalled.size()), 0.088f, 50));
  // A contiguous id range takes the in-place path.
  std::vector<int32_t> range(300);
  for (int i = 0; i < 300; ++i) range[size_t(i)] = 100 + i;
  EXPECT_EQ(ref::ctkvr_rerank(q.data(), G, K.data(), n, d, range, 0.088f, 64),
            host::ctkvr_rerank(q.data(), G, K.data(), n, d, range.data(), 300, 0.088f, 64));
  const int32_t bad[2] = {1, int32_t(n)};
  EXPECT_THROW(host::ctkvr_rerank(q.data(), G, K.data(), n, d, bad, 2, 1.f, 1), std::out_of_range);
}

TEST(HostKernels, GatherAndBiasedAttentionAgreeToFloatRounding) {
  const int G = 4, d = 128;
  const int64_t n = 500;
  const auto K = random_floats(size_t(n) * d, 9, -2.f, 2.f), V = random_floats(size_t(n) * d, 10);
  const auto Q = random_floats(size_t(G) * d, 11, -2.f, 2.f);
  for (int64_t m : {int64_t(0), int64_t(1), int64_t(31), int64_t(32), int64_t(333)}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    std::vector<int32_t> idx;
    for (int64_t i = 0; i < m; ++i) idx.push_back(int32_t((i * 7) % n));
    std::vector<float> o1(size_t(G) * d), l1(G), o2(size_t(G) * d, NAN), l2(G, NAN);
    ref::gqa_gather_attention(Q.data(), G, K.data(), V.data(), n, d, idx.data(), m, 0.088f, o1.data(), l1.data());
    host::attend_rows({.queries = Q.data(), .rows = G, .keys = K.data(), .values = V.data(), .idx = idx.data(),
                       .m = m, .n = n, .d = d, .scale = 0.088f, .out = o2.data(), .lse = l2.data()});
    for (size_t i = 0; i < o1.size(); ++i) EXPECT_NEAR(o1[i], o2[i], 1e-5f) << i;
    for (int r = 0; r < G; ++r) {
      if (m == 0) EXPECT_EQ(l2[size_t(r)], -INFINITY);
      else EXPECT_NEAR(l1[size_t(r)], l2[size_t(r)], 1e-5f);
    }
  }
  // Biased entries (SEKV's coarse means with bias log|S|), contiguous.
  const int64_t m = 77;
  std::vector<float> bias(static_cast<size_t>(m));
  std::vector<ref::AttnEntry> entries;
  for (int64_t e = 0; e < m; ++e) {
    bias[size_t(e)] = ref::coarse_bias(1 + e % 9);
    entries.push_back({K.data() + e * d, V.data() + e * d, bias[size_t(e)]});
  }
  std::vector<float> o2(size_t(G) * d), l2(G);
  host::attend_rows({.queries = Q.data(), .rows = G, .keys = K.data(), .values = V.data(), .bias = bias.data(),
                     .m = m, .n = m, .d = d, .scale = 0.088f, .out = o2.data(), .lse = l2.data()});
  for (int r = 0; r < G; ++r) {
    std::vector<float> o1(static_cast<size_t>(d));
    const float l1 = ref::biased_attention(Q.data() + r * d, entries, d, 0.088f, o1.data());
    EXPECT_NEAR(l1, l2[size_t(r)], 1e-5f);
    for (int c = 0; c < d; ++c) EXPECT_NEAR(o1[size_t(c)], o2[size_t(r) * d + c], 1e-5f);
  }
  const int32_t bad[1] = {int32_t(n)};
  std::vector<float> o(size_t(G) * d), l(G);
  EXPECT_THROW(host::attend_rows({.queries = Q.data(), .rows = G, .keys = K.data(), .values = V.data(), .idx = bad,
                                  .m = 1, .n = n, .d = d, .scale = 1, .out = o.data(), .lse = l.data()}),
               std::out_of_range);
}

// Row counts that are not a multiple of the one-pass kernel's row quads (its last quad is padded) and
// more than one quad, key counts that end in a partial step, head dims 16 and 64, and the same rows
// given contiguously: the same outputs as the reference to float rounding.
TEST(HostKernels, GatherAttentionOverRowAndKeyTails) {
  const int64_t n = 300;
  for (const int d : {16, 64})
    for (const int G : {1, 3, 6, 16})
      for (const int64_t m : {int64_t(5), int64_t(8), int64_t(61)}) {
        SCOPED_TRACE("d=" + std::to_string(d) + " G=" + std::to_string(G) + " m=" + std::to_string(m));
        const auto K = random_floats(size_t(n) * d, 31, -2.f, 2.f), V = random_floats(size_t(n) * d, 32);
        const auto Q = random_floats(size_t(G) * d, 33, -2.f, 2.f);
        std::vector<int32_t> idx, dense(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i) idx.push_back(int32_t((i * 37 + 11) % n));
        std::iota(dense.begin(), dense.end(), 0);
        for (const auto* ids : {&idx, &dense}) {
          std::vector<float> o1(size_t(G) * d), l1(G), o2(size_t(G) * d, NAN), l2(G, NAN);
          ref::gqa_gather_attention(Q.data(), G, K.data(), V.data(), n, d, ids->data(), m, 0.3f, o1.data(), l1.data());
          host::attend_rows({.queries = Q.data(), .rows = G, .keys = K.data(), .values = V.data(),
                             .idx = ids == &idx ? idx.data() : nullptr, .m = m, .n = n, .d = d, .scale = 0.3f,
                             .out = o2.data(), .lse = l2.data()});
          for (size_t i = 0; i < o1.size(); ++i) EXPECT_NEAR(o1[i], o2[i], 1e-5f) << i;
          for (int r = 0; r < G; ++r) EXPECT_NEAR(l1[size_t(r)], l2[size_t(r)], 1e-5f);
        }
      }
}

TEST(HostKernels, SpanSvdAndPcaAgreeWithTheReference) {
  const int d = 128;
  for (int64_t n : {int64_t(5), int64_t(21), int64_t(200)}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    // Low-rank-ish rows: a few directions plus noise, as keys are.
    const auto basis = random_floats(size_t(4) * d, 12), coef = random_floats(size_t(n) * 4, 13),
               noise = random_floats(size_t(n) * d, 14, -0.01f, 0.01f);
    std::vector<float> X(size_t(n) * d);
    for (int64_t i = 0; i < n; ++i)
      for (int c = 0; c < d; ++c) {
        float x = noise[size_t(i) * d + c];
        for (int j = 0; j < 4; ++j) x += coef[size_t(i) * 4 + j] * basis[size_t(j) * d + c];
        X[size_t(i) * d + c] = x;
      }
    const auto a = ref::truncated_svd(X.data(), n, d, 0.95, 16);
    const auto b = host::truncated_svd(X.data(), n, d, 0.95, 16);
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_NEAR(a.total_energy, b.total_energy, 1e-9 * a.total_energy);
    EXPECT_NEAR(a.discarded_energy, b.discarded_energy, 1e-6 * a.total_energy);
    for (int i = 0; i < a.rank; ++i) EXPECT_NEAR(a.sigma[size_t(i)], b.sigma[size_t(i)], 1e-4f * a.sigma[0]);
    std::vector<float> ra(X.size()), rb(X.size());
    ref::lowrank_reconstruct(a, ra.data());
    ref::lowrank_reconstruct(b, rb.data());
    for (size_t i = 0; i < X.size(); ++i) EXPECT_NEAR(ra[i], rb[i], 1e-4f) << i;
    const auto wa = ref::pca_projection(X.data(), n, d, 8), wb = host::pca_projection(X.data(), n, d, 8);
    ASSERT_EQ(wa.size(), wb.size());
    // Directions of clearly separated variance agree (the first three here; the 4th+ are noise).
    for (int j = 0; j < 3; ++j)
      for (int c = 0; c < d; ++c) EXPECT_NEAR(wa[size_t(c) * 8 + j], wb[size_t(c) * 8 + j], 1e-4f);
  }
}

TEST(HostKernels, StagingGatherMergesRunsAndMatchesTheReference) {
  const int64_t n = 100, e = 32;
  const auto src = random_floats(size_t(n) * e, 15);
  const std::vector<int32_t> idx = {3, 4, 5, 6, 50, 10, 11, 99};
  std::vector<float> a(idx.size() * e), b(idx.size() * e, NAN);
  ref::gather_rows(src.data(), n, e, idx.data(), int64_t(idx.size()), a.data());
  EXPECT_EQ(host::gather_rows(src.data(), n, e, idx.data(), int64_t(idx.size()), b.data()), 4);
  EXPECT_TRUE(same_bits(a, b));
  const int32_t bad[1] = {-1};
  EXPECT_THROW(host::gather_rows(src.data(), n, e, bad, 1, b.data()), std::out_of_range);
}

TEST(HostKernels, QuestPageBoundIsBitIdentical) {
  for (int d : {128, 12})
    for (int64_t pages : {int64_t(1), int64_t(8), int64_t(13), int64_t(70)}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " pages=" + std::to_string(pages));
      const auto K = random_floats(size_t(pages) * 16 * d, 16), q = random_floats(size_t(d), 17, -2.f, 2.f);
      std::vector<float> mn(size_t(pages) * d), mx(size_t(pages) * d);
      ref::quest_page_minmax(K.data(), pages * 16, d, 16, mn.data(), mx.data());
      std::vector<float> a(static_cast<size_t>(pages)), b(static_cast<size_t>(pages), NAN);
      ref::quest_page_bound(q.data(), mn.data(), mx.data(), pages, d, a.data());
      host::quest_page_bound(q.data(), mn.data(), mx.data(), pages, d, b.data());
      EXPECT_TRUE(same_bits(a, b));
    }
}

TEST(HostKernels, TopkOnOneMagnitudeUsesTheSecondHistogramAndStaysExact) {
  // Scores of one sign and exponent land in one first-level bin: the refinement path.
  std::mt19937 g(18);
  std::uniform_real_distribution<float> u(0.5f, 0.75f);
  std::vector<float> s(50000);
  for (auto& x : s) x = u(g);
  for (int i = 0; i < 100; ++i) s[size_t(i) * 7] = 0.625f;  // ties
  // 3000 and 10000: the radix path narrows its candidates by the second 11 bits.
  for (int64_t k : {int64_t(1), int64_t(10), int64_t(1000), int64_t(3000), int64_t(10000), int64_t(49999)})
    EXPECT_EQ(ref::topk(s, k), host::topk(s.data(), int64_t(s.size()), k)) << k;
}

TEST(HostKernels, TopkLargeKTakesTheRadixPathAndStaysExact) {
  // k above the threshold pass's limit with k·16 <= n: candidates in index order, then the stable
  // radix sort by key (ties by index, NaN last, -0 = +0).
  std::mt19937 g(21);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<float> s(100003);
  for (auto& x : s) x = u(g);
  for (size_t i = 0; i < s.size(); i += 11) s[i] = 1.5f;  // ties across the k-th
  s[5] = NAN;
  s[6] = -0.f;
  s[7] = 0.f;
  s[8] = -std::numeric_limits<float>::infinity();
  for (int64_t k : {int64_t(2049), int64_t(6000), int64_t(50000), int64_t(100003)})
    EXPECT_EQ(ref::topk(s, k), host::topk(s.data(), int64_t(s.size()), k)) << k;
}

TEST(HostKernels, GroupSoftmaxMaxIsBitIdenticalToTheReference) {
  // Rows of 4 (the 4-row exp path) and 3 (the per-row path), lengths off the SIMD width, a row that is
  // all -inf (the reference's zero row), a row with a NaN and one with -inf entries.
  for (int G : {1, 3, 4, 6})
    for (int64_t n : {int64_t(1), int64_t(13), int64_t(1000)}) {
      std::vector<float> S = random_floats(size_t(G) * size_t(n), uint32_t(30 + G), -8.f, 8.f);
      if (G > 1)
        for (int64_t i = 0; i < n; ++i) S[size_t(n + i)] = -std::numeric_limits<float>::infinity();
      if (G > 2) S[size_t(2 * n + n / 2)] = NAN;
      S[size_t(n - 1)] = -std::numeric_limits<float>::infinity();
      std::vector<float> a = S, b = S, ra(static_cast<size_t>(n)), rb(static_cast<size_t>(n), 7.f);
      ref::softmax_rows(a.data(), G, n);
      ref::reduce_max_rows(a.data(), G, n, ra.data());
      host::group_softmax_max(b.data(), G, n, n, rb.data());
      EXPECT_TRUE(same_bits(ra, rb)) << "G=" << G << " n=" << n;
      EXPECT_TRUE(same_bits(a, b)) << "G=" << G << " n=" << n;
    }
}

TEST(HostKernels, TopkSmallKStaysExactWhenEveryScoreBeatsTheThreshold) {
  // Rising scores: each one displaces the running threshold (the small-k pass's worst case: a
  // compaction every 3k candidates), with a tail of ties at the top value and a NaN among them.
  std::vector<float> s(9000);
  for (size_t i = 0; i < s.size(); ++i) s[i] = float(i) * 0.5f - 100.f;
  for (size_t i = 8000; i < s.size(); ++i) s[i] = 4000.f;
  s[8500] = NAN;
  for (int64_t k : {int64_t(1), int64_t(64), int64_t(500)})
    EXPECT_EQ(ref::topk(s, k), host::topk(s.data(), int64_t(s.size()), k)) << k;
}

TEST(HostKernels, BitmapDedupEqualsSortUnique) {
  std::mt19937 g(21);
  for (int range : {1, 100, 40000, 2000000000}) {  // the last: sparse ids, the sort fallback
    std::uniform_int_distribution<int> u(0, range - 1);
    for (int n : {0, 1, 5, 3000}) {
      std::vector<int32_t> a(static_cast<size_t>(n));
      for (auto& x : a) x = u(g);
      std::vector<int32_t> b = a;
      a.resize(size_t(ref::dedup_inplace(a.data(), n)));
      b.resize(size_t(host::dedup_inplace(b.data(), n)));
      EXPECT_EQ(a, b) << "range " << range << " n " << n;
    }
  }
  std::vector<int32_t> neg = {4, -3, 4, 0, -3}, want = {-3, 0, 4};  // a negative id: the fallback
  neg.resize(size_t(host::dedup_inplace(neg.data(), 5)));
  EXPECT_EQ(neg, want);
}

TEST(HostKernels, FactoredSegmentsMatchTheReconstructedRows) {
  // SEKV's zoomed spans in factored form (U·Σ [n, r], Vᵀ [r, d]) next to a plain segment with biases,
  // against biased attention over the reconstructed rows.
  const int G = 4, d = 64;
  const auto Q = random_floats(size_t(G) * d, 19, -2.f, 2.f);
  const int64_t n1 = 45, n2 = 13;
  const int rk = 5, rv = 3;
  const auto kus = random_floats(size_t(n1) * rk, 20), kvt = random_floats(size_t(rk) * d, 21);
  const auto vus = random_floats(size_t(n1) * rv, 22), vvt = random_floats(size_t(rv) * d, 23);
  const auto K2 = random_floats(size_t(n2) * d, 24), V2 = random_floats(size_t(n2) * d, 25);
  std::vector<float> b2(static_cast<size_t>(n2));
  for (int64_t i = 0; i < n2; ++i) b2[size_t(i)] = ref::coarse_bias(2 + i);
  std::vector<float> K1(size_t(n1) * d), V1(size_t(n1) * d);
  ref::lowrank_reconstruct(kus.data(), kvt.data(), n1, rk, d, K1.data());
  ref::lowrank_reconstruct(vus.data(), vvt.data(), n1, rv, d, V1.data());
  std::vector<ref::AttnEntry> entries;
  for (int64_t i = 0; i < n1; ++i) entries.push_back({K1.data() + i * d, V1.data() + i * d, 0.f});
  for (int64_t i = 0; i < n2; ++i) entries.push_back({K2.data() + i * d, V2.data() + i * d, b2[size_t(i)]});
  const host::AttendSegment segs[2] = {
      {.m = n1, .k_us = kus.data(), .k_vt = kvt.data(), .v_us = vus.data(), .v_vt = vvt.data(), .k_rank = rk,
       .v_rank = rv},
      {.keys = K2.data(), .values = V2.data(), .bias = b2.data(), .m = n2}};
  std::vector<float> out(size_t(G) * d), lse(G);
  host::attend_segments(Q.data(), G, segs, 2, d, 0.125f, out.data(), lse.data());
  for (int r = 0; r < G; ++r) {
    std::vector<float> o(static_cast<size_t>(d));
    const float l = ref::biased_attention(Q.data() + r * d, entries, d, 0.125f, o.data());
    EXPECT_NEAR(l, lse[size_t(r)], 1e-4f);
    for (int c = 0; c < d; ++c) EXPECT_NEAR(o[size_t(c)], out[size_t(r) * d + c], 1e-4f) << r << " " << c;
  }
}

// CHESS's cascade: the same kept ids per level as the reference, with ties, NaN and ±0 in every level,
// partial last chunks and grids, ratios 0 and 1, and page counts small and large (the radix top-k path).
TEST(HostKernels, ChessSelectIsIdenticalToTheReference) {
  std::mt19937 g(11);
  std::uniform_int_distribution<int> coarse(0, 12);  // many ties
  for (int64_t P : {int64_t(1), int64_t(7), int64_t(100), int64_t(4099), int64_t(262144)})
    for (const auto& [Nc, Ng] : {std::pair{8, 8}, std::pair{3, 5}, std::pair{1, 1}})
      for (const auto& [rg, rc, rp] : {std::tuple{0.5, 0.5, 0.25}, std::tuple{1.0, 1.0, 1.0}, std::tuple{0.0, 0.5, 0.5},
                                       std::tuple{0.3, 0.7, 0.11}}) {
        const int64_t C = (P + Nc - 1) / Nc, Gr = (C + Ng - 1) / Ng;
        auto fill = [&](int64_t n) {
          std::vector<float> v(static_cast<size_t>(n));
          for (auto& x : v) x = float(coarse(g)) * 0.5f - 3.f;
          if (n > 3) v[1] = NAN, v[2] = -0.f, v[3] = 0.f;
          return v;
        };
        const auto sg = fill(Gr), sc = fill(C), sp = fill(P);
        const auto want = ref::chess_hierarchical_select(sg, sc, sp, Nc, Ng, rg, rc, rp);
        const auto got = host::chess_select(sg.data(), sc.data(), sp.data(), P, Nc, Ng, rg, rc, rp);
        EXPECT_EQ(want.grids, got.grids) << "P=" << P << " Nc=" << Nc << " rho_g=" << rg;
        EXPECT_EQ(want.chunks, got.chunks) << "P=" << P << " Nc=" << Nc << " rho_c=" << rc;
        EXPECT_EQ(want.pages, got.pages) << "P=" << P << " Nc=" << Nc << " rho_p=" << rp;
      }
  const std::vector<float> one{1.f};
  EXPECT_THROW(host::chess_select(one.data(), one.data(), one.data(), 1, 0, 1, 1, 1, 1), std::invalid_argument);
}
