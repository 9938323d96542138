// The simple CUDA reference kernels (kernels/reference/*.cu) against their host twins on random inputs.
// Compiles in every build; without CUDA built in, or without a GPU, each test skips and says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_device.hpp"
#include "kernels/reference/reference.hpp"
#if defined(KVSIM_HAVE_CUDA)
#include "kernels/reference/cuda.hpp"
#endif

namespace {

// Skips the calling test unless a GPU is usable.
#define REQUIRE_GPU()                                                      \
  do {                                                                     \
    std::string why;                                                       \
    if (kvsim::cuda::devices(&why).empty()) GTEST_SKIP() << "no GPU: " << why; \
  } while (0)

#if defined(KVSIM_HAVE_CUDA)
using namespace kvsim::ref;
using Vec = std::vector<float>;
template <class T>
using DBuf = cuda::DeviceBuffer<T>;

Vec randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  Vec v(n);
  for (auto& x : v) x = g(rng);
  return v;
}
void expect_close(const Vec& a, const Vec& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      EXPECT_EQ(a[i], b[i]) << i;
      continue;
    }
    EXPECT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << i;
  }
}
constexpr int D = 64;
const float kScale = 0.125f;

TEST(RefKernelsCuda, DenseGatherBiasedAttentionMatchHost) {
  REQUIRE_GPU();
  const int rows = 3;
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(200), int64_t(1000)}) {
    const Vec Q = randn(rows * D, 1), K = randn(size_t(std::max<int64_t>(n, 1)) * D, 2), V = randn(size_t(std::max<int64_t>(n, 1)) * D, 3);
    Vec ho(rows * D), hl(rows);
    gqa_decode_attention(Q.data(), rows, K.data(), V.data(), n, D, kScale, ho.data(), hl.data());
    DBuf<float> dQ(Q), dK(K), dV(V), dO(rows * D), dL(rows);
    cuda::decode_attention(dQ.get(), rows, dK.get(), dV.get(), n, D, kScale, dO.get(), dL.get());
    expect_close(dO.download(), ho, 1e-4);
    expect_close(dL.download(), hl, 1e-4);
    if (n < 10) continue;
    std::vector<int32_t> idx = {int32_t(n - 1), 0, 5, 7, 5, int32_t(n / 2)};
    gqa_gather_attention(Q.data(), rows, K.data(), V.data(), n, D, idx.data(), int64_t(idx.size()), kScale, ho.data(), hl.data());
    DBuf<int32_t> dI(idx);
    cuda::gather_attention(dQ.get(), rows, dK.get(), dV.get(), dI.get(), int64_t(idx.size()), D, kScale, dO.get(), dL.get());
    expect_close(dO.download(), ho, 1e-4);
    expect_close(dL.download(), hl, 1e-4);
    Vec bias(static_cast<size_t>(n));
    std::vector<AttnEntry> entries;
    for (int64_t i = 0; i < n; ++i) {
      bias[size_t(i)] = i % 5 == 0 ? std::log(float(1 + i % 13)) : (i % 7 == 0 ? -INFINITY : 0.f);
      entries.push_back({K.data() + i * D, V.data() + i * D, bias[size_t(i)]});
    }
    for (int r = 0; r < rows; ++r) hl[r] = biased_attention(Q.data() + r * D, entries, D, kScale, ho.data() + r * D);
    DBuf<float> dB(bias);
    cuda::biased_attention(dQ.get(), rows, dK.get(), dV.get(), dB.get(), n, D, kScale, dO.get(), dL.get());
    expect_close(dO.download(), ho, 1e-4);
    expect_close(dL.download(), hl, 1e-4);
  }
}

TEST(RefKernelsCuda, PagedAndSparsePagedMatchHost) {
  REQUIRE_GPU();
  const int ps = 16, Hkv = 2, Hq = 8, B = 3;
  const int64_t num_pages = 40;
  const Vec kp = randn(size_t(num_pages) * ps * Hkv * D, 4), vp = randn(size_t(num_pages) * ps * Hkv * D, 5);
  std::vector<int32_t> perm(num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(6));
  // Request 2 has no pages; request 1 is a sparse selection (a rewritten indices list).
  const std::vector<int32_t> indptr = {0, 20, 27, 27}, last = {3, 16, 1};
  const std::vector<int32_t> indices(perm.begin(), perm.begin() + 27);
  const Vec q = randn(size_t(B) * Hq * D, 7);
  Vec ho(size_t(B) * Hq * D), hl(size_t(B) * Hq);
  PagedKV kv{kp.data(), vp.data(), num_pages, ps, Hkv, D};
  paged_decode_attention(q.data(), Hq, kv, PageTable{indptr, indices, last}, kScale, ho.data(), hl.data());
  DBuf<float> dq(q), dkp(kp), dvp(vp), dO(ho.size()), dL(hl.size());
  DBuf<int32_t> dptr(indptr), didx(indices), dlast(last);
  cuda::paged_decode_attention(dq.get(), B, Hq, dkp.get(), dvp.get(), ps, Hkv, D, dptr.get(), didx.get(), dlast.get(),
                               kScale, dO.get(), dL.get());
  expect_close(dO.download(), ho, 1e-4);
  expect_close(dL.download(), hl, 1e-4);
}

TEST(RefKernelsCuda, MergeScoreQuestReconstructMatchHost) {
  REQUIRE_GPU();
  const int rows = 5;
  const Vec oa = randn(rows * D, 8), ob = randn(rows * D, 9);
  const Vec la = {0.5f, -INFINITY, 3.f, -INFINITY, 1.f}, lb = {1.5f, 2.f, -1.f, -INFINITY, 1.f};
  Vec ho(rows * D), hl(rows);
  for (int r = 0; r < rows; ++r) hl[r] = merge_state(oa.data() + r * D, la[r], ob.data() + r * D, lb[r], D, ho.data() + r * D);
  DBuf<float> da(oa), db(ob), dla(la), dlb(lb), dO(rows * D), dL(rows);
  cuda::merge_state(da.get(), dla.get(), db.get(), dlb.get(), rows, D, dO.get(), dL.get());
  expect_close(dO.download(), ho, 1e-5);
  expect_close(dL.download(), hl, 1e-5);

  const int64_t m = 3, n = 517;
  const Vec Q = randn(m * D, 10), M = randn(n * D, 11);
  DBuf<float> dQ(Q), dM(M), dS(m * n);
  for (bool cosine : {false, true}) {
    Vec hs(m * n);
    score_gemm(Q.data(), m, M.data(), n, D, hs.data(), cosine ? ScoreKind::cosine : ScoreKind::dot, 0.5f);
    cuda::score_gemm(dQ.get(), m, dM.get(), n, D, dS.get(), cosine, 0.5f);
    expect_close(dS.download(), hs, 1e-4);
  }

  const int64_t ntok = 300, P = 19;  // pages of 16, the last partial
  const Vec K = randn(ntok * D, 12), q = randn(D, 13);
  Vec kmin(P * D), kmax(P * D), hb(P);
  quest_page_minmax(K.data(), ntok, D, 16, kmin.data(), kmax.data());
  quest_page_bound(q.data(), kmin.data(), kmax.data(), P, D, hb.data());
  DBuf<float> dq(q), dmin(kmin), dmax(kmax), dbnd(P);
  cuda::quest_page_bound(dq.get(), dmin.get(), dmax.get(), P, D, dbnd.get());
  expect_close(dbnd.download(), hb, 1e-5);

  const Vec X = randn(96 * D, 14);
  const auto f = truncated_svd(X.data(), 96, D, 0.9, 16);
  Vec hr(96 * D);
  lowrank_reconstruct(f, hr.data());
  DBuf<float> dus(f.us), dvt(f.vt), dr(96 * D);
  cuda::lowrank_reconstruct(dus.get(), dvt.get(), 96, f.rank, D, dr.get());
  expect_close(dr.download(), hr, 1e-4);
}

TEST(RefKernelsCuda, TopkDedupGatherMatchHost) {
  REQUIRE_GPU();
  const int rows = 3;
  const int64_t n = 1000, k = 37;
  std::mt19937 rng(15);
  Vec s(rows * n);
  for (auto& x : s) x = float(rng() % 50);  // many ties
  s[17] = NAN;
  DBuf<float> ds(s);
  DBuf<int32_t> dout(rows * k);
  ASSERT_EQ(cuda::topk_rows(ds.get(), rows, n, k, dout.get()), k);
  const auto got = dout.download();
  for (int r = 0; r < rows; ++r) {
    const auto want = topk(std::span<const float>(s.data() + r * n, size_t(n)), k);
    EXPECT_EQ(std::vector<int32_t>(got.begin() + r * k, got.begin() + (r + 1) * k), want) << r;
  }
  std::vector<int32_t> ids(5000);
  for (auto& i : ids) i = int32_t(rng() % 3000);
  DBuf<int32_t> dids(ids);
  const int64_t u = cuda::dedup_inplace(dids.get(), int64_t(ids.size()));
  EXPECT_EQ(dids.download(size_t(u)), dedup(ids));
  const int64_t w = 3 * D;
  const Vec src = randn(200 * w, 16);
  const std::vector<int32_t> idx = {199, 0, 42, 42, 7};
  Vec hg(idx.size() * w);
  gather_rows(src.data(), 200, w, idx.data(), int64_t(idx.size()), hg.data());
  DBuf<float> dsrc(src), dg(hg.size());
  DBuf<int32_t> didx(idx);
  cuda::gather_rows(dsrc.get(), w, didx.get(), int64_t(idx.size()), dg.get());
  EXPECT_EQ(dg.download(), hg);
}

TEST(RefKernelsCuda, BuildersAndStagingGatherMatchHost) {
  REQUIRE_GPU();
  const int64_t n = 300;
  const Vec X = randn(n * D, 21);
  Vec w = randn(static_cast<size_t>(n), 22);
  for (auto& x : w) x = std::abs(x) + 0.1f;  // surprisals are positive
  const std::vector<int32_t> starts = {0, 5, 6, 64, 200, 299};
  for (const bool weighted : {false, true}) {
    Vec h(starts.size() * D);
    if (weighted) segment_weighted_mean(X.data(), w.data(), n, D, starts, h.data());
    else segment_mean(X.data(), n, D, starts, h.data());
    DBuf<float> dX(X), dw(w), dout(h.size());
    DBuf<int32_t> ds(starts);
    cuda::segment_weighted_mean(dX.get(), weighted ? dw.get() : nullptr, n, D, ds.get(), int64_t(starts.size()),
                                dout.get());
    expect_close(dout.download(), h, 1e-4);
  }
  const std::vector<int32_t> rs = {250, 3, 100, 0}, rl = {50, 1, 0, 17};
  Vec hg(68 * D);
  ASSERT_EQ(gather_runs(X.data(), n, D, rs, rl, hg.data()), 68);
  DBuf<float> dX(X), dg(hg.size());
  DBuf<int32_t> drs(rs), drl(rl);
  EXPECT_EQ(cuda::gather_runs(dX.get(), D, drs.get(), drl.get(), int64_t(rs.size()), dg.get()), 68);
  EXPECT_EQ(dg.download(), hg);
}

TEST(RefKernelsCuda, CtkvrBuildRecallAndRerankMatchHost) {
  REQUIRE_GPU();
  const int G = 4, C = 6, rho = 40;
  const int64_t n = 500;
  const Vec cent = randn(size_t(G) * C * D, 23), K = randn(n * D, 24), Q = randn(size_t(G) * D, 25);
  std::vector<int32_t> hivf(size_t(C) * rho);
  ASSERT_EQ(qcivf_build(cent.data(), G, C, K.data(), n, D, kScale, rho, hivf.data()), rho);
  DBuf<float> dc(cent), dK(K), dQ(Q);
  DBuf<int32_t> divf(hivf.size());
  ASSERT_EQ(cuda::qcivf_build(dc.get(), G, C, dK.get(), n, D, kScale, rho, divf.get()), rho);
  EXPECT_EQ(divf.download(), hivf);
  std::vector<int32_t> recalled = dedup(hivf);
  const auto hr = ctkvr_rerank(Q.data(), G, K.data(), n, D, recalled, kScale, 25);
  DBuf<int32_t> drec(recalled), dr(25);
  ASSERT_EQ(cuda::ctkvr_rerank(dQ.get(), G, dK.get(), D, drec.get(), int64_t(recalled.size()), kScale, 25, dr.get()),
            25);
  EXPECT_EQ(dr.download(), hr);

  // Recall over the built (overlapping) lists, so the dedup matters; C' beyond C takes every list.
  DBuf<int32_t> dout(hivf.size()), dchosen(static_cast<size_t>(C));
  for (int c_prime : {1, 4, C + 3}) {
    std::vector<int32_t> chosen;
    const auto want = ctkvr_recall(Q.data(), G, cent.data(), C, D, hivf.data(), rho, c_prime, &chosen);
    const int64_t m = cuda::ctkvr_recall(dQ.get(), G, dc.get(), C, D, divf.get(), rho, c_prime, dout.get(),
                                         dchosen.get());
    ASSERT_EQ(m, int64_t(want.size())) << c_prime;
    EXPECT_EQ(dout.download(size_t(m)), want) << c_prime;
    EXPECT_EQ(dchosen.download(chosen.size()), chosen) << c_prime;
  }
}

TEST(RefKernelsCuda, QuantileAndChessHierarchicalSelectMatchHost) {
  REQUIRE_GPU();
  // Scores rounded to a coarse grid so the thresholds fall on ties (resolved by the lower index).
  auto coarse = [](size_t n, uint32_t seed) {
    Vec v = randn(n, seed);
    for (auto& x : v) x = std::round(x * 4.f) / 4.f + 0.125f;  // never zero
    return v;
  };
  for (int64_t n : {int64_t(1), int64_t(10), int64_t(777)}) {
    const Vec s = coarse(size_t(n), 31 + uint32_t(n));
    DBuf<float> ds(s);
    DBuf<int32_t> dk(static_cast<size_t>(n));
    for (double rho : {0.0, 0.3, 0.5, 0.91, 1.0}) {
      const auto want = quantile_select(s, rho);
      ASSERT_EQ(cuda::quantile_select(ds.get(), n, rho, dk.get()), int64_t(want.size())) << n << " " << rho;
      EXPECT_EQ(dk.download(want.size()), want) << n << " " << rho;
    }
  }
  const int Nc = 4, Ng = 5;
  const int64_t P = 203, C = (P + Nc - 1) / Nc, G = (C + Ng - 1) / Ng;
  const Vec gs = coarse(size_t(G), 41), cs = coarse(size_t(C), 42), ps = coarse(size_t(P), 43);
  DBuf<float> dg(gs), dc(cs), dp(ps);
  DBuf<int32_t> og(static_cast<size_t>(G)), oc(static_cast<size_t>(C)), op(static_cast<size_t>(P));
  for (const bool masked_all : {false, true})
    for (const double rho : {0.2, 0.5, 1.0}) {
      const auto want = chess_hierarchical_select(gs, cs, ps, Nc, Ng, rho, rho * 0.9, rho * 0.7,
                                                  masked_all ? QuantileScope::masked_all : QuantileScope::survivors);
      const auto got = cuda::chess_hierarchical_select(dg.get(), dc.get(), dp.get(), P, Nc, Ng, rho, rho * 0.9,
                                                       rho * 0.7, masked_all, og.get(), oc.get(), op.get());
      EXPECT_EQ(og.download(size_t(got.grids)), want.grids) << masked_all << " " << rho;
      EXPECT_EQ(oc.download(size_t(got.chunks)), want.chunks) << masked_all << " " << rho;
      EXPECT_EQ(op.download(size_t(got.pages)), want.pages) << masked_all << " " << rho;
    }
}

TEST(RefKernelsCuda, WindowScoresPoolingChunkSumSekvRoutingMatchHost) {
  REQUIRE_GPU();
  const int G = 3, w = 8;
  const int64_t n = 333;
  const Vec Qw = randn(size_t(G) * w * D, 61), K = randn(n * D, 62);
  Vec hs(size_t(n - w));
  obs_window_scores(Qw.data(), G, w, K.data(), n, D, kScale, hs.data());
  DBuf<float> dQ(Qw), dK(K), dS(hs.size());
  cuda::obs_window_scores(dQ.get(), G, w, dK.get(), n, D, kScale, dS.get());
  expect_close(dS.download(), hs, 1e-4);

  DBuf<float> dpool(hs.size());
  for (const Pool1D kind : {Pool1D::none, Pool1D::max, Pool1D::avg})
    for (int k : {1, 4, 7}) {
      Vec hp(hs.size());
      pool1d(hs.data(), int64_t(hs.size()), k, kind, hp.data());
      cuda::pool1d(dS.get(), int64_t(hs.size()), kind == Pool1D::none ? 1 : k, kind == Pool1D::max, dpool.get());
      expect_close(dpool.download(), hp, 1e-6);
    }
  for (int chunk : {1, 10, 64}) {
    const size_t chunks = (hs.size() + chunk - 1) / chunk;
    Vec hc(chunks);
    chunk_sum(hs.data(), int64_t(hs.size()), chunk, hc.data());
    DBuf<float> dcs(chunks);
    cuda::chunk_sum(dS.get(), int64_t(hs.size()), chunk, dcs.get());
    expect_close(dcs.download(), hc, 1e-6);
  }

  const int64_t m = 57;
  const int dp = 32;
  const Vec qp = randn(dp, 63), summ = randn(size_t(m) * dp, 64);
  std::vector<int32_t> len(static_cast<size_t>(m));
  for (int64_t s = 0; s < m; ++s) len[size_t(s)] = int32_t(1 + (s * 7) % 40);
  Vec ha(static_cast<size_t>(m));
  sekv_routing_scores(qp.data(), summ.data(), m, dp, len.data(), ha.data());
  DBuf<float> dqp(qp), dsum(summ), da(static_cast<size_t>(m));
  DBuf<int32_t> dlen(len);
  cuda::sekv_routing_scores(dqp.get(), dsum.get(), m, dp, dlen.get(), da.get());
  expect_close(da.download(), ha, 1e-5);
}

TEST(RefKernelsCuda, JacobiSvdMatchesHostTruncatedSvd) {
  REQUIRE_GPU();
  const int batch = 2, d = 24;
  const int64_t n = 40;
  // Two spans: random, and a nearly rank-3 one (a fast-decaying spectrum, as span keys have).
  Vec X = randn(size_t(batch) * n * d, 71);
  const Vec a = randn(n * 3, 72), bt = randn(3 * d, 73);
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < d; ++c) {
      float s = 0.f;
      for (int j = 0; j < 3; ++j) s += a[i * 3 + j] * bt[j * d + c];
      X[size_t(n * d + i * d + c)] = s + 0.01f * X[size_t(n * d + i * d + c)];
    }
  DBuf<float> dX(X), ds(size_t(batch) * d), dus(size_t(batch) * n * d), dvt(size_t(batch) * d * d);
  cuda::svd_jacobi(dX.get(), batch, n, d, ds.get(), dus.get(), dvt.get());
  const Vec sg = ds.download(), us = dus.download(), vt = dvt.download();
  for (int b = 0; b < batch; ++b) {
    const float* Xb = X.data() + b * n * d;
    const auto full = truncated_svd(Xb, n, d, 1.0, d);
    for (int j = 0; j < full.rank; ++j) EXPECT_NEAR(sg[size_t(b * d + j)], full.sigma[size_t(j)], 1e-4 * (1 + full.sigma[0])) << b << " " << j;
    // Rank-r reconstructions agree (the factors themselves are unique only up to signs).
    const auto f = truncated_svd(Xb, n, d, 0.9, 8);
    Vec hr(size_t(n) * d), gr(size_t(n) * d, 0.f);
    lowrank_reconstruct(f, hr.data());
    for (int64_t i = 0; i < n; ++i)
      for (int c = 0; c < d; ++c)
        for (int j = 0; j < f.rank; ++j)
          gr[size_t(i * d + c)] += us[size_t(b * n * d + i * d + j)] * vt[size_t(b * d * d + j * d + c)];
    expect_close(gr, hr, 1e-3);
    double err = 0;
    for (size_t e = 0; e < gr.size(); ++e) err += double(Xb[e] - gr[e]) * (Xb[e] - gr[e]);
    EXPECT_NEAR(err, f.discarded_energy, 1e-3 * (1 + f.total_energy)) << b;
  }
}

#else  // no CUDA built in: one test that says so

TEST(RefKernelsCuda, SkippedWithoutCuda) {
  GTEST_SKIP() << "kvsim was built without CUDA (nvcc not found or KVSIM_CUDA=OFF)";
}

#endif

}  // namespace
