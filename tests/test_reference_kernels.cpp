// The host reference kernels (kernels/reference/) against direct formulas on small seeded random cases,
// plus the properties the policies rely on (select-everything equals dense, merge of halves equals the
// whole, hierarchical masking never keeps an orphan, SVD error equals the discarded energy, ...).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "kernels/reference/reference.hpp"

namespace {
using namespace kvsim::ref;
using Vec = std::vector<float>;

Vec randn(size_t n, uint32_t seed, float sd = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, sd);
  Vec v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

// Attention over explicit rows in double: out = Σ softmax(s)·v, lse = log Σ exp(s).
struct Direct {
  std::vector<double> out;
  double lse;
};
Direct direct_attention(const float* q, const std::vector<const float*>& ks, const std::vector<const float*>& vs,
                        const std::vector<double>& bias, int d, double scale) {
  Direct r{std::vector<double>(size_t(d), 0.0), -std::numeric_limits<double>::infinity()};
  if (ks.empty()) return r;
  std::vector<double> s(ks.size());
  double mx = -1e300;
  for (size_t i = 0; i < ks.size(); ++i) {
    double dot = 0;
    for (int c = 0; c < d; ++c) dot += double(q[c]) * ks[i][c];
    s[i] = scale * dot + (bias.empty() ? 0.0 : bias[i]);
    mx = std::max(mx, s[i]);
  }
  double l = 0;
  for (size_t i = 0; i < ks.size(); ++i) l += std::exp(s[i] - mx);
  for (size_t i = 0; i < ks.size(); ++i)
    for (int c = 0; c < d; ++c) r.out[size_t(c)] += std::exp(s[i] - mx) / l * vs[i][c];
  r.lse = mx + std::log(l);
  return r;
}
Direct direct_rows(const float* q, const Vec& K, const Vec& V, const std::vector<int32_t>& rows, int d, double scale) {
  std::vector<const float*> ks, vs;
  for (int32_t i : rows) {
    ks.push_back(K.data() + int64_t(i) * d);
    vs.push_back(V.data() + int64_t(i) * d);
  }
  return direct_attention(q, ks, vs, {}, d, scale);
}
std::vector<int32_t> iota_ids(int64_t n, int32_t from = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}
void expect_near_vec(const float* a, const std::vector<double>& b, double tol) {
  for (size_t c = 0; c < b.size(); ++c) EXPECT_NEAR(a[c], b[c], tol) << "at " << c;
}
void expect_near_vec(const float* a, const float* b, size_t n, double tol) {
  for (size_t c = 0; c < n; ++c) EXPECT_NEAR(a[c], b[c], tol) << "at " << c;
}

constexpr int D = 16;
const float kScale = 1.f / std::sqrt(float(D));

TEST(RefKernelsAttention, DenseMatchesFormula) {
  const int64_t n = 37;
  Vec q = randn(D, 1), K = randn(n * D, 2, 2.f), V = randn(n * D, 3);
  Vec out(D);
  const float lse = decode_attention(q.data(), K.data(), V.data(), n, D, kScale, out.data());
  const Direct r = direct_rows(q.data(), K, V, iota_ids(n), D, kScale);
  expect_near_vec(out.data(), r.out, 1e-5);
  EXPECT_NEAR(lse, r.lse, 1e-5);
  // Nothing to attend to: zeros and -inf.
  EXPECT_EQ(decode_attention(q.data(), K.data(), V.data(), 0, D, kScale, out.data()), -INFINITY);
  for (float x : out) EXPECT_EQ(x, 0.f);
}

TEST(RefKernelsAttention, GqaIsPerHeadDense) {
  const int64_t n = 29;
  const int G = 4;
  Vec Q = randn(G * D, 4), K = randn(n * D, 5), V = randn(n * D, 6);
  Vec out(G * D), lse(G), one(D);
  gqa_decode_attention(Q.data(), G, K.data(), V.data(), n, D, kScale, out.data(), lse.data());
  for (int g = 0; g < G; ++g) {
    EXPECT_FLOAT_EQ(lse[g], decode_attention(Q.data() + g * D, K.data(), V.data(), n, D, kScale, one.data()));
    expect_near_vec(out.data() + g * D, one.data(), D, 0);
  }
}

TEST(RefKernelsAttention, GatherSubsetMatchesFormulaAndAllEqualsDense) {
  const int64_t n = 41;
  Vec q = randn(D, 7), K = randn(n * D, 8), V = randn(n * D, 9);
  Vec out(D), dense(D);
  const std::vector<int32_t> sub = {3, 17, 0, 40, 22, 9};
  float lse = gather_attention(q.data(), K.data(), V.data(), n, D, sub.data(), int64_t(sub.size()), kScale, out.data());
  Direct r = direct_rows(q.data(), K, V, sub, D, kScale);
  expect_near_vec(out.data(), r.out, 1e-5);
  EXPECT_NEAR(lse, r.lse, 1e-5);
  // Select everything (in a shuffled order) = dense attention.
  auto all = iota_ids(n);
  std::shuffle(all.begin(), all.end(), std::mt19937(10));
  const float lse_all = gather_attention(q.data(), K.data(), V.data(), n, D, all.data(), n, kScale, out.data());
  const float lse_dense = decode_attention(q.data(), K.data(), V.data(), n, D, kScale, dense.data());
  expect_near_vec(out.data(), dense.data(), D, 1e-5);
  EXPECT_NEAR(lse_all, lse_dense, 1e-5);
  const int32_t bad[1] = {int32_t(n)};
  EXPECT_THROW(gather_attention(q.data(), K.data(), V.data(), n, D, bad, 1, kScale, out.data()), std::out_of_range);
}

TEST(RefKernelsAttention, BiasedMatchesFormulaAndCoarseEntryStandsForItsSpan) {
  const int64_t n = 12;
  Vec q = randn(D, 11), K = randn(n * D, 12), V = randn(n * D, 13);
  std::vector<AttnEntry> e;
  std::vector<const float*> ks, vs;
  std::vector<double> bias;
  for (int64_t i = 0; i < n; ++i) {
    const float b = float(i % 3) - 0.7f;
    e.push_back({K.data() + i * D, V.data() + i * D, b});
    ks.push_back(K.data() + i * D);
    vs.push_back(V.data() + i * D);
    bias.push_back(b);
  }
  Vec out(D);
  const float lse = biased_attention(q.data(), e, D, kScale, out.data());
  const Direct r = direct_attention(q.data(), ks, vs, bias, D, kScale);
  expect_near_vec(out.data(), r.out, 1e-5);
  EXPECT_NEAR(lse, r.lse, 1e-5);
  // A span of |S| = 5 identical tokens equals one coarse entry (its mean) with bias log|S|.
  std::vector<AttnEntry> tokens = {{K.data(), V.data(), 0.f}}, coarse = tokens;
  for (int t = 0; t < 5; ++t) tokens.push_back({K.data() + D, V.data() + D, 0.f});
  coarse.push_back({K.data() + D, V.data() + D, coarse_bias(5)});
  Vec o1(D), o2(D);
  const float l1 = biased_attention(q.data(), tokens, D, kScale, o1.data());
  const float l2 = biased_attention(q.data(), coarse, D, kScale, o2.data());
  expect_near_vec(o1.data(), o2.data(), D, 1e-5);
  EXPECT_NEAR(l1, l2, 1e-5);
}

// Two requests, GQA (4 query heads over 2 KV heads), pages scattered in a shared pool.
TEST(RefKernelsPaged, MatchesDenseAttentionPerRequestAndHead) {
  const int ps = 4, Hkv = 2, Hq = 4, B = 2;
  const std::vector<int64_t> len = {13, 8};  // partial and full last pages
  const int64_t num_pages = 9;
  Vec kp = randn(size_t(num_pages * ps * Hkv * D), 14), vp = randn(size_t(num_pages * ps * Hkv * D), 15);
  PagedKV kv{kp.data(), vp.data(), num_pages, ps, Hkv, D};
  const std::vector<int32_t> indptr = {0, 4, 6}, indices = {7, 2, 5, 0, 8, 3},
                             last = {last_page_len_for(len[0], ps), last_page_len_for(len[1], ps)};
  EXPECT_EQ(last[0], 1);
  EXPECT_EQ(last[1], 4);
  Vec q = randn(size_t(B * Hq * D), 16), out(size_t(B * Hq * D)), lse(size_t(B * Hq));
  paged_decode_attention(q.data(), Hq, kv, PageTable{indptr, indices, last}, kScale, out.data(), lse.data());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h) {
      // The request's sequence as contiguous rows of its KV head.
      Vec K, V;
      for (int64_t t = 0; t < len[size_t(b)]; ++t) {
        const int64_t off = kv.offset(indices[size_t(indptr[size_t(b)] + t / ps)], int(t % ps), h / (Hq / Hkv));
        K.insert(K.end(), kp.begin() + off, kp.begin() + off + D);
        V.insert(V.end(), vp.begin() + off, vp.begin() + off + D);
      }
      const int64_t row = b * Hq + h;
      Vec dense(D);
      const float l = decode_attention(q.data() + row * D, K.data(), V.data(), len[size_t(b)], D, kScale, dense.data());
      expect_near_vec(out.data() + row * D, dense.data(), D, 1e-5);
      EXPECT_NEAR(lse[size_t(row)], l, 1e-5);
    }
  const std::vector<int32_t> bad = {0, 4, 6, 7};
  EXPECT_THROW(paged_decode_attention(q.data(), Hq, kv, PageTable{bad, indices, last}, kScale, out.data(), lse.data()),
               std::invalid_argument);
}

// The output buffer is the kernel's to fill: a caller's stale contents (here NaN) must not leak into it,
// whether the request attends to pages or to none. (A mechanical mutant that skipped zeroing the
// accumulator survived every test, whose buffers were all fresh zeros.)
TEST(RefKernelsPaged, OutputBufferNeedsNoZeroingByTheCaller) {
  const int ps = 8;
  const int64_t n = 21;
  Vec K = randn(n * D, 31), V = randn(n * D, 32), q = randn(D, 33);
  Vec kp = paginate(K.data(), n, D, ps), vp = paginate(V.data(), n, D, ps);
  PagedKV kv{kp.data(), vp.data(), num_pages_for(n, ps), ps, 1, D};
  const auto all = iota_ids(num_pages_for(n, ps));
  Vec fresh(D, 0.f), stale(D, std::numeric_limits<float>::quiet_NaN());
  float l1 = 0, l2 = 0;
  sparse_paged_decode_attention(q.data(), 1, kv, all, last_page_len_for(n, ps), kScale, fresh.data(), &l1);
  sparse_paged_decode_attention(q.data(), 1, kv, all, last_page_len_for(n, ps), kScale, stale.data(), &l2);
  for (int c = 0; c < D; ++c) ASSERT_EQ(stale[size_t(c)], fresh[size_t(c)]) << c;
  EXPECT_EQ(l1, l2);
  // A request with no pages: out = 0 and lse = -inf, whatever the buffer held.
  const std::vector<int32_t> indptr = {0, 0}, none = {}, last = {1};
  Vec out(D, std::numeric_limits<float>::quiet_NaN());
  float lse = 0;
  paged_decode_attention(q.data(), 1, kv, PageTable{indptr, none, last}, kScale, out.data(), &lse);
  for (int c = 0; c < D; ++c) ASSERT_EQ(out[size_t(c)], 0.f) << c;
  EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
}

TEST(RefKernelsPaged, SparsePagedAllPagesIsDenseAndSubsetIsGather) {
  const int ps = 8;
  const int64_t n = 45;  // 6 pages, last holds 5
  Vec K = randn(n * D, 17), V = randn(n * D, 18), q = randn(D, 19);
  Vec kp = paginate(K.data(), n, D, ps), vp = paginate(V.data(), n, D, ps);
  const int64_t P = num_pages_for(n, ps);
  PagedKV kv{kp.data(), vp.data(), P, ps, 1, D};
  Vec out(D), dense(D);
  float lse;
  const auto all = iota_ids(P);
  sparse_paged_decode_attention(q.data(), 1, kv, all, last_page_len_for(n, ps), kScale, out.data(), &lse);
  const float ld = decode_attention(q.data(), K.data(), V.data(), n, D, kScale, dense.data());
  expect_near_vec(out.data(), dense.data(), D, 1e-5);
  EXPECT_NEAR(lse, ld, 1e-5);
  // Pages {0, 3, 5}: the tokens of those pages (page 5 partial).
  const std::vector<int32_t> pages = {0, 3, 5};
  sparse_paged_decode_attention(q.data(), 1, kv, pages, last_page_len_for(n, ps), kScale, out.data(), &lse);
  std::vector<int32_t> toks;
  for (int32_t p : pages)
    for (int64_t t = p * ps; t < std::min<int64_t>(n, (p + 1) * ps); ++t) toks.push_back(int32_t(t));
  const Direct r = direct_rows(q.data(), K, V, toks, D, kScale);
  expect_near_vec(out.data(), r.out, 1e-5);
  EXPECT_NEAR(lse, r.lse, 1e-5);
}

TEST(RefKernelsMerge, HalvesMergeToTheWhole) {
  const int64_t n = 50;
  Vec q = randn(D, 20), K = randn(n * D, 21, 2.f), V = randn(n * D, 22);
  Vec whole(D), a(D), b(D), m(D);
  const float lw = decode_attention(q.data(), K.data(), V.data(), n, D, kScale, whole.data());
  const float la = decode_attention(q.data(), K.data(), V.data(), 19, D, kScale, a.data());
  const float lb = decode_attention(q.data(), K.data() + 19 * D, V.data() + 19 * D, n - 19, D, kScale, b.data());
  EXPECT_NEAR(merge_state(a.data(), la, b.data(), lb, D, m.data()), lw, 1e-5);
  expect_near_vec(m.data(), whole.data(), D, 1e-5);
  // N-way: three parts, one of them empty.
  Vec parts(4 * D), lses(4);
  const int64_t cut[5] = {0, 10, 10, 33, n};
  for (int i = 0; i < 4; ++i)
    lses[i] = decode_attention(q.data(), K.data() + cut[i] * D, V.data() + cut[i] * D, cut[i + 1] - cut[i], D, kScale,
                               parts.data() + i * D);
  EXPECT_EQ(lses[1], -INFINITY);
  EXPECT_NEAR(merge_states(parts.data(), lses.data(), 4, D, m.data()), lw, 1e-5);
  expect_near_vec(m.data(), whole.data(), D, 1e-5);
  // An empty state is the identity; two empty states stay empty.
  Vec z(D, 0.f);
  EXPECT_FLOAT_EQ(merge_state(a.data(), la, z.data(), -INFINITY, D, m.data()), la);
  expect_near_vec(m.data(), a.data(), D, 0);
  EXPECT_EQ(merge_state(z.data(), -INFINITY, z.data(), -INFINITY, D, m.data()), -INFINITY);
}

TEST(RefKernelsScore, GemvGemmDotAndCosine) {
  const int64_t n = 23, m = 3;
  Vec Q = randn(m * D, 23), M = randn(n * D, 24);
  std::fill_n(M.begin() + 5 * D, D, 0.f);  // a zero vector scores 0 under cosine
  Vec s(n), S(m * n), c(n);
  score_gemm(Q.data(), m, M.data(), n, D, S.data(), ScoreKind::dot, 0.5f);
  score_gemv(Q.data() + D, M.data(), n, D, c.data(), ScoreKind::cosine);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < n; ++i) {
      double dot = 0;
      for (int k = 0; k < D; ++k) dot += double(Q[j * D + k]) * M[i * D + k];
      EXPECT_NEAR(S[j * n + i], 0.5 * dot, 1e-5);
    }
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0, a = 0, b = 0;
    for (int k = 0; k < D; ++k) {
      dot += double(Q[D + k]) * M[i * D + k];
      a += double(Q[D + k]) * Q[D + k];
      b += double(M[i * D + k]) * M[i * D + k];
    }
    EXPECT_NEAR(c[i], b > 0 ? dot / std::sqrt(a * b) : 0.0, 1e-6);
  }
  // The outputs start stale (NaN): the reductions own them whole (a mutant that left out[0] unset survived).
  Vec mx(n, std::numeric_limits<float>::quiet_NaN()), sm(n, std::numeric_limits<float>::quiet_NaN());
  reduce_max_rows(S.data(), m, n, mx.data());
  reduce_sum_rows(S.data(), m, n, sm.data());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(mx[i], std::max({S[i], S[n + i], S[2 * n + i]}));
    EXPECT_NEAR(sm[i], S[i] + S[n + i] + S[2 * n + i], 1e-5);
  }
}

TEST(RefKernelsSelect, TopkTieBreakAndEdges) {
  const Vec s = {1, 3, 3, 2, 3, NAN, 2};
  EXPECT_EQ(topk(s, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(topk(s, 4), (std::vector<int32_t>{1, 2, 4, 3}));
  EXPECT_EQ(topk(s, 100), (std::vector<int32_t>{1, 2, 4, 3, 6, 0, 5}));  // k >= n: all, NaN last
  EXPECT_TRUE(topk(s, 0).empty());
  // Deterministic: the same answer from a different presentation order of equal scores.
  Vec flat(20, 1.f);
  EXPECT_EQ(topk(flat, 3), (std::vector<int32_t>{0, 1, 2}));
  // Against a full stable sort on random scores with many ties.
  std::mt19937 rng(25);
  Vec r(200);
  for (auto& x : r) x = float(rng() % 17);
  auto ids = iota_ids(200);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return r[size_t(a)] > r[size_t(b)]; });
  ids.resize(37);
  EXPECT_EQ(topk(r, 37), ids);
}

TEST(RefKernelsSelect, QuantileKeepsCeilRhoN) {
  EXPECT_EQ(quantile_keep_count(0.3, 10), 3);  // 0.3·10 is 3.0000000000000004 in double
  EXPECT_EQ(quantile_keep_count(0.25, 10), 3);
  EXPECT_EQ(quantile_keep_count(0.0, 10), 0);
  EXPECT_EQ(quantile_keep_count(1.0, 10), 10);
  EXPECT_EQ(quantile_keep_count(1.5, 10), 10);
  EXPECT_EQ(quantile_keep_count(0.01, 7), 1);
  EXPECT_EQ(quantile_keep_count(0.5, 0), 0);
  const Vec s = randn(57, 26);
  for (double rho : {0.0, 0.1, 0.33, 0.5, 0.9, 1.0}) {
    const auto kept = quantile_select(s, rho);
    ASSERT_EQ(int64_t(kept.size()), quantile_keep_count(rho, 57));
    EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
    const float tau = quantile_threshold(s, rho);
    std::set<int32_t> ks(kept.begin(), kept.end());
    for (int32_t i = 0; i < 57; ++i) EXPECT_EQ(ks.count(i) == 1, s[size_t(i)] >= tau) << rho << " " << i;
  }
  EXPECT_EQ(quantile_threshold(s, 0.0), INFINITY);
}

void check_hierarchy(const HierarchicalSelection& sel, int64_t P, int Nc, int Ng) {
  std::set<int32_t> g(sel.grids.begin(), sel.grids.end()), c(sel.chunks.begin(), sel.chunks.end());
  for (int32_t ch : sel.chunks) EXPECT_TRUE(g.count(ch / Ng)) << "chunk " << ch << " of a pruned grid";
  for (int32_t p : sel.pages) {
    EXPECT_TRUE(c.count(p / Nc)) << "page " << p << " of a pruned chunk";
    EXPECT_LT(p, P);
  }
  EXPECT_TRUE(std::is_sorted(sel.pages.begin(), sel.pages.end()));
}

TEST(RefKernelsSelect, ChessHierarchicalMaskingNeverKeepsOrphansAndCounts) {
  const int Nc = 4, Ng = 3;
  const int64_t P = 50, C = (P + Nc - 1) / Nc, G = (C + Ng - 1) / Ng;  // 13 chunks, 5 grids (partial last)
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const Vec sp = randn(size_t(P), 100 + seed), sc = randn(size_t(C), 200 + seed), sg = randn(size_t(G), 300 + seed);
    const double rg = 0.4, rc = 0.5, rp = 0.3;
    const auto sel = chess_hierarchical_select(sg, sc, sp, Nc, Ng, rg, rc, rp);
    check_hierarchy(sel, P, Nc, Ng);
    // Counts: one global quantile per level over the surviving candidates.
    ASSERT_EQ(int64_t(sel.grids.size()), quantile_keep_count(rg, G));
    int64_t chunk_cands = 0, page_cands = 0;
    for (int32_t g : sel.grids) chunk_cands += std::min<int64_t>(C, (g + 1) * Ng) - g * Ng;
    ASSERT_EQ(int64_t(sel.chunks.size()), quantile_keep_count(rc, chunk_cands));
    for (int32_t c : sel.chunks) page_cands += std::min<int64_t>(P, (c + 1) * Nc) - c * Nc;
    ASSERT_EQ(int64_t(sel.pages.size()), quantile_keep_count(rp, page_cands));
    // The kept grids are the best grids, and each kept page outranks every unkept candidate page.
    EXPECT_EQ(sel.grids, quantile_select(sg, rg));
    std::set<int32_t> kp(sel.pages.begin(), sel.pages.end()), kc(sel.chunks.begin(), sel.chunks.end());
    float worst_kept = INFINITY, best_unkept = -INFINITY;
    for (int64_t p = 0; p < P; ++p) {
      if (!kc.count(int32_t(p / Nc))) continue;
      (kp.count(int32_t(p)) ? worst_kept : best_unkept) =
          kp.count(int32_t(p)) ? std::min(worst_kept, sp[size_t(p)]) : std::max(best_unkept, sp[size_t(p)]);
    }
    EXPECT_GE(worst_kept, best_unkept);
    // The literal reading of Algorithm 1 also never keeps orphans, and keeps at most ceil(rho·n) per level.
    const auto lit = chess_hierarchical_select(sg, sc, sp, Nc, Ng, rg, rc, rp, QuantileScope::masked_all);
    check_hierarchy(lit, P, Nc, Ng);
    EXPECT_LE(int64_t(lit.chunks.size()), quantile_keep_count(rc, C));
    EXPECT_LE(int64_t(lit.pages.size()), quantile_keep_count(rp, P));
  }
  // rho = 1 everywhere keeps every page.
  const Vec sp = randn(size_t(P), 1), sc = randn(size_t(C), 2), sg = randn(size_t(G), 3);
  EXPECT_EQ(chess_hierarchical_select(sg, sc, sp, Nc, Ng, 1, 1, 1).pages, iota_ids(P));
  EXPECT_THROW(chess_hierarchical_select(sg, sc, sp, Nc, Ng + 1, 1, 1, 1), std::invalid_argument);
}

TEST(RefKernelsSelect, ChessHandWorkedExample) {
  // 8 pages, N_c = 2 (4 chunks), N_g = 2 (2 grids).
  const Vec sg = {0.1f, 0.9f}, sc = {5, 5, 0.2f, 0.8f}, sp = {9, 9, 9, 9, 0.3f, 0.1f, 0.2f, 0.7f};
  const auto sel = chess_hierarchical_select(sg, sc, sp, 2, 2, 0.5, 0.5, 0.5);
  EXPECT_EQ(sel.grids, (std::vector<int32_t>{1}));   // grid 0 pruned despite its chunks' scores
  EXPECT_EQ(sel.chunks, (std::vector<int32_t>{3}));  // best of chunks {2, 3}
  EXPECT_EQ(sel.pages, (std::vector<int32_t>{7}));   // best of pages {6, 7}
  EXPECT_EQ(chess_context_pages(sel.pages, 8, 1, 2), (std::vector<int32_t>{0, 6, 7}));
}

TEST(RefKernelsQuest, BuilderAndBoundDominateEveryKey) {
  const int ps = 5;
  const int64_t n = 23, P = 5;
  Vec K = randn(n * D, 27), kmin(P * D), kmax(P * D), bound(P);
  quest_page_minmax(K.data(), n, D, ps, kmin.data(), kmax.data());
  for (int64_t p = 0; p < P; ++p)
    for (int c = 0; c < D; ++c) {
      float mn = INFINITY, mx = -INFINITY;
      for (int64_t t = p * ps; t < std::min<int64_t>(n, (p + 1) * ps); ++t) {
        mn = std::min(mn, K[t * D + c]);
        mx = std::max(mx, K[t * D + c]);
      }
      EXPECT_EQ(kmin[p * D + c], mn);
      EXPECT_EQ(kmax[p * D + c], mx);
    }
  for (uint32_t seed = 0; seed < 10; ++seed) {
    const Vec q = randn(D, 400 + seed);
    quest_page_bound(q.data(), kmin.data(), kmax.data(), P, D, bound.data());
    for (int64_t p = 0; p < P; ++p) {
      double b = 0;
      for (int c = 0; c < D; ++c) b += std::max(double(q[c]) * kmin[p * D + c], double(q[c]) * kmax[p * D + c]);
      EXPECT_NEAR(bound[p], b, 1e-5);
      for (int64_t t = p * ps; t < std::min<int64_t>(n, (p + 1) * ps); ++t) {
        double dot = 0;
        for (int c = 0; c < D; ++c) dot += double(q[c]) * K[t * D + c];
        EXPECT_GE(bound[p] + 1e-5, dot);
      }
    }
  }
}

TEST(RefKernelsGather, DedupNeverTwiceAndGatherRows) {
  std::mt19937 rng(28);
  std::vector<int32_t> ids(300);
  for (auto& i : ids) i = int32_t(rng() % 97);
  const auto u = dedup(ids);
  EXPECT_TRUE(std::adjacent_find(u.begin(), u.end(), std::greater_equal<int32_t>()) == u.end());  // strictly increasing
  EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()), std::set<int32_t>(u.begin(), u.end()));
  EXPECT_TRUE(dedup(std::vector<int32_t>{}).empty());
  const int64_t n = 10, w = 7;
  Vec src = randn(n * w, 29), dst(3 * w), back(n * w, 0.f);
  const std::vector<int32_t> idx = {9, 0, 4};
  gather_rows(src.data(), n, w, idx.data(), 3, dst.data());
  for (int i = 0; i < 3; ++i) expect_near_vec(dst.data() + i * w, src.data() + idx[size_t(i)] * w, w, 0);
  scatter_rows(dst.data(), 3, w, idx.data(), back.data(), n);
  for (int i = 0; i < 3; ++i) expect_near_vec(back.data() + idx[size_t(i)] * w, src.data() + idx[size_t(i)] * w, w, 0);
  const int32_t bad[1] = {-1};
  EXPECT_THROW(gather_rows(src.data(), n, w, bad, 1, dst.data()), std::out_of_range);
}

TEST(RefKernelsGather, GatherRunsCopiesEachRunBackToBack) {
  const int64_t n = 20, w = 5;
  const Vec src = randn(n * w, 31);
  const std::vector<int32_t> starts = {12, 0, 7, 19}, lens = {3, 2, 0, 1};
  Vec dst(6 * w, -1.f);
  ASSERT_EQ(gather_runs(src.data(), n, w, starts, lens, dst.data()), 6);
  // Direct formula: staging row j is source row starts[r] + (j - rows before run r).
  const std::vector<int32_t> want_rows = {12, 13, 14, 0, 1, 19};
  for (size_t j = 0; j < want_rows.size(); ++j)
    expect_near_vec(dst.data() + j * w, src.data() + want_rows[j] * w, w, 0);
  const std::vector<int32_t> past_end = {18}, two = {3}, neg = {-1};
  EXPECT_THROW(gather_runs(src.data(), n, w, past_end, two, dst.data()), std::out_of_range);
  EXPECT_THROW(gather_runs(src.data(), n, w, past_end, neg, dst.data()), std::invalid_argument);
  EXPECT_THROW(gather_runs(src.data(), n, w, starts, two, dst.data()), std::invalid_argument);
}

// Edges of the weighted mean that mechanical mutants found untested: a segment whose weights are all
// zero falls back to the plain mean (not 0/0), and the kernel writes exactly S x d floats (a canary after
// the last segment's row stays untouched: an off-by-one column loop overran it unnoticed).
TEST(RefKernelsPooling, WeightedMeanOfZeroWeightsAndNoWriteBeyondTheLastRow) {
  const int64_t n = 9;
  const int d = 4;
  Vec X = randn(n * d, 40), w = randn(n, 41);
  for (auto& x : w) x = std::abs(x) + 0.1f;
  for (int64_t t = 3; t < 6; ++t) w[size_t(t)] = 0.f;  // segment 1 = rows 3..5, all weights zero
  const std::vector<int32_t> starts = {0, 3, 6};
  const float canary = 12345.f;
  Vec out(3 * d + 1, 0.f), plain(3 * d + 1, 0.f);
  out.back() = plain.back() = canary;
  segment_weighted_mean(X.data(), w.data(), n, d, starts, out.data());
  segment_mean(X.data(), n, d, starts, plain.data());
  for (int c = 0; c < d; ++c) EXPECT_FLOAT_EQ(out[size_t(d + c)], plain[size_t(d + c)]) << c;
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
  EXPECT_EQ(out.back(), canary);
  EXPECT_EQ(plain.back(), canary);
}

// The sparse path checks last_page_len like the table path does.
TEST(RefKernelsPaged, SparseLastPageLenOutsideThePageIsRefused) {
  const int ps = 8;
  const int64_t n = 20;
  Vec K = randn(n * D, 42), V = randn(n * D, 43), q = randn(D, 44);
  Vec kp = paginate(K.data(), n, D, ps), vp = paginate(V.data(), n, D, ps);
  PagedKV kv{kp.data(), vp.data(), num_pages_for(n, ps), ps, 1, D};
  const std::vector<int32_t> pages = {0, 2};
  Vec out(D);
  float lse = 0;
  for (int bad : {0, -1, ps + 1})
    EXPECT_THROW(sparse_paged_decode_attention(q.data(), 1, kv, pages, bad, kScale, out.data(), &lse), std::invalid_argument)
        << bad;
  EXPECT_NO_THROW(sparse_paged_decode_attention(q.data(), 1, kv, pages, ps, kScale, out.data(), &lse));
}

TEST(RefKernelsPooling, SegmentPageWeightedHierarchical) {
  const int64_t n = 11;
  const int d = 3;
  Vec X = randn(n * d, 30), w = randn(n, 31);
  for (auto& x : w) x = std::abs(x) + 0.1f;
  auto mean_rows = [&](int64_t b, int64_t e, const Vec& src, int dd, bool weighted) {
    std::vector<double> m(size_t(dd), 0.0);
    double ws = 0;
    for (int64_t t = b; t < e; ++t) {
      const double wt = weighted ? w[size_t(t)] : 1.0;
      ws += wt;
      for (int c = 0; c < dd; ++c) m[size_t(c)] += wt * src[size_t(t * dd + c)];
    }
    for (auto& x : m) x /= ws;
    return m;
  };
  const std::vector<int32_t> starts = {0, 2, 7, 8};
  Vec seg(4 * d), wseg(4 * d), pages(3 * d);
  segment_mean(X.data(), n, d, starts, seg.data());
  segment_weighted_mean(X.data(), w.data(), n, d, starts, wseg.data());
  for (size_t s = 0; s < starts.size(); ++s) {
    const int64_t e = s + 1 < starts.size() ? starts[s + 1] : n;
    expect_near_vec(seg.data() + s * d, mean_rows(starts[s], e, X, d, false), 1e-6);
    expect_near_vec(wseg.data() + s * d, mean_rows(starts[s], e, X, d, true), 1e-6);
  }
  page_mean(X.data(), n, d, 4, pages.data());  // pages of 4, 4, 3 rows
  for (int p = 0; p < 3; ++p) expect_near_vec(pages.data() + p * d, mean_rows(p * 4, std::min<int64_t>(n, p * 4 + 4), X, d, false), 1e-6);
  Vec groups(2 * d);
  group_mean(pages.data(), 3, d, 2, groups.data());  // chunk 1 is the partial group {page 2}
  expect_near_vec(groups.data() + d, pages.data() + 2 * d, d, 1e-6);
  Vec tail(d);
  tail_mean(X.data(), n, d, 3, tail.data());
  expect_near_vec(tail.data(), mean_rows(n - 3, n, X, d, false), 1e-6);
  EXPECT_THROW(segment_mean(X.data(), n, d, std::vector<int32_t>{0, 5, 5}, seg.data()), std::invalid_argument);
  // CHESS page vectors: concat over sources of the page means.
  const Vec X2 = randn(n * d, 32);
  const float* src[2] = {X.data(), X2.data()};
  Vec pv(3 * 2 * d), p2(3 * d);
  chess_page_vectors(src, n, d, 4, pv.data());
  page_mean(X2.data(), n, d, 4, p2.data());
  for (int p = 0; p < 3; ++p) {
    expect_near_vec(pv.data() + p * 2 * d, pages.data() + p * d, d, 0);
    expect_near_vec(pv.data() + p * 2 * d + d, p2.data() + p * d, d, 0);
  }
}

TEST(RefKernelsScore, SekvRoutingScoresMatchFormula) {
  const int64_t m = 9;
  const int dp = 8;
  const Vec q = randn(dp, 41), S = randn(m * dp, 42);
  const std::vector<int32_t> len = {1, 2, 5, 16, 40, 3, 7, 100, 1};
  Vec a(m);
  sekv_routing_scores(q.data(), S.data(), m, dp, len.data(), a.data());
  for (int64_t s = 0; s < m; ++s) {
    double dot = 0;
    for (int c = 0; c < dp; ++c) dot += double(q[c]) * S[s * dp + c];
    EXPECT_NEAR(a[s], 1 / (1 + std::exp(-(dot / std::sqrt(double(dp)) + std::log(double(len[size_t(s)]))))), 1e-6);
  }
}

TEST(RefKernelsQuest, SelectKeepsLastPageAndBestOthers) {
  const Vec bound = {5, 1, 9, 9, 0.5f, 2, -1};
  EXPECT_EQ(quest_select_pages(bound.data(), 7, 3), (std::vector<int32_t>{2, 3, 6}));  // last page counts in k
  EXPECT_EQ(quest_select_pages(bound.data(), 7, 1), (std::vector<int32_t>{6}));
  EXPECT_EQ(quest_select_pages(bound.data(), 7, 100), iota_ids(7));
  EXPECT_TRUE(quest_select_pages(bound.data(), 7, 0).empty());
}

TEST(RefKernelsLowRank, PcaProjectionFindsTheDominantDirection) {
  const int64_t n = 200;
  const int d = 12, dp = 4;
  Vec u = randn(d, 43);
  double nu = 0;
  for (float x : u) nu += double(x) * x;
  for (auto& x : u) x = float(x / std::sqrt(nu));
  const Vec t = randn(n, 44, 5.f), noise = randn(n * d, 45, 0.1f);
  Vec X(n * d);
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < d; ++c) X[size_t(i * d + c)] = 3.f + t[size_t(i)] * u[size_t(c)] + noise[size_t(i * d + c)];
  const Vec W = pca_projection(X.data(), n, d, dp);
  ASSERT_EQ(W.size(), size_t(d * dp));
  for (int a = 0; a < dp; ++a)
    for (int b = 0; b < dp; ++b) {
      double g = 0;
      for (int c = 0; c < d; ++c) g += double(W[size_t(c * dp + a)]) * W[size_t(c * dp + b)];
      EXPECT_NEAR(g, a == b ? 1.0 : 0.0, 1e-5);
    }
  double align = 0;
  for (int c = 0; c < d; ++c) align += double(W[size_t(c * dp)]) * u[size_t(c)];
  EXPECT_GT(std::abs(align), 0.999);
  EXPECT_EQ(W, pca_projection(X.data(), n, d, dp));  // deterministic
}

double sq_err(const Vec& a, const Vec& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return e;
}

TEST(RefKernelsLowRank, ErrorEqualsDiscardedEnergyAndRankRespectsCap) {
  const int64_t n = 40;
  const int d = 24;
  // Rank-6 signal plus small noise.
  const Vec A = randn(n * 6, 33), B = randn(6 * d, 34), noise = randn(n * d, 35, 0.05f);
  Vec X(n * d), R(n * d);
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < d; ++c) {
      double s = noise[size_t(i * d + c)];
      for (int j = 0; j < 6; ++j) s += double(A[size_t(i * 6 + j)]) * B[size_t(j * d + c)];
      X[size_t(i * d + c)] = float(s);
    }
  for (double frac : {0.5, 0.9, 0.999, 1.0})
    for (int rmax : {2, 6, 32}) {
      const auto f = truncated_svd(X.data(), n, d, frac, rmax);
      EXPECT_LE(f.rank, std::min(rmax, d));
      lowrank_reconstruct(f, R.data());
      EXPECT_NEAR(sq_err(X, R), f.discarded_energy, 1e-4 * f.total_energy) << frac << " " << rmax;
      // Smallest rank reaching the energy fraction, unless capped.
      double kept = 0;
      for (float s : f.sigma) kept += double(s) * s;
      if (f.rank < std::min(rmax, d)) {
        EXPECT_GE(kept, frac * f.total_energy * (1 - 1e-6));
        const double last = double(f.sigma.back()) * f.sigma.back();
        EXPECT_LT(kept - last, frac * f.total_energy);
      }
    }
  // The randomized variant: same identity, near-optimal energy on a low-rank-plus-noise block, seeded.
  const auto exact = truncated_svd(X.data(), n, d, 1.0, 6);
  const auto rnd = randomized_svd(X.data(), n, d, 1.0, 6, 8, 2, 7);
  const auto rnd2 = randomized_svd(X.data(), n, d, 1.0, 6, 8, 2, 7);
  EXPECT_EQ(rnd.rank, 6);
  EXPECT_EQ(rnd.us, rnd2.us);
  lowrank_reconstruct(rnd, R.data());
  EXPECT_NEAR(sq_err(X, R), rnd.discarded_energy, 1e-4 * rnd.total_energy);
  EXPECT_LE(rnd.discarded_energy, exact.discarded_energy * 1.05 + 1e-9);
  // An all-zero block has rank 0.
  Vec Z(n * d, 0.f);
  EXPECT_EQ(truncated_svd(Z.data(), n, d, 0.9, 8).rank, 0);
}

TEST(RefKernelsCtkvr, BuildRecallRerankMatchFormulas) {
  const int G = 2, C = 6, rho = 5, cp = 2, rp = 4;
  const int64_t n = 40;
  const Vec K = randn(n * D, 36), cent = randn(G * C * D, 37), q = randn(G * D, 38);
  std::vector<int32_t> ivf(C * rho);
  ASSERT_EQ(qcivf_build(cent.data(), G, C, K.data(), n, D, kScale, rho, ivf.data()), rho);
  // Formula: softmax per head, max over the group, top rho.
  auto grouped_softmax_max = [&](auto query_of, const std::vector<int32_t>& keys) {
    std::vector<float> best(keys.size(), -INFINITY);
    for (int g = 0; g < G; ++g) {
      std::vector<double> s(keys.size());
      double mx = -1e300, l = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        double dot = 0;
        for (int c = 0; c < D; ++c) dot += double(query_of(g)[c]) * K[size_t(keys[i]) * D + c];
        mx = std::max(mx, s[i] = kScale * dot);
      }
      for (double x : s) l += std::exp(x - mx);
      for (size_t i = 0; i < keys.size(); ++i) best[i] = std::max(best[i], float(std::exp(s[i] - mx) / l));
    }
    return best;
  };
  for (int c = 0; c < C; ++c) {
    const auto a = grouped_softmax_max([&](int g) { return cent.data() + (g * C + c) * D; }, iota_ids(n));
    EXPECT_EQ(std::vector<int32_t>(ivf.begin() + c * rho, ivf.begin() + (c + 1) * rho), topk(a, rho)) << c;
  }
  std::vector<int32_t> chosen;
  const auto recalled = ctkvr_recall(q.data(), G, cent.data(), C, D, ivf.data(), rho, cp, &chosen);
  Vec cosmax(C, -INFINITY);
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < C; ++c) {
      double dot = 0, a = 0, b = 0;
      for (int k = 0; k < D; ++k) {
        const double x = q[size_t(g * D + k)], y = cent[size_t((g * C + c) * D + k)];
        dot += x * y;
        a += x * x;
        b += y * y;
      }
      cosmax[size_t(c)] = std::max(cosmax[size_t(c)], float(dot / std::sqrt(a * b)));
    }
  EXPECT_EQ(chosen, topk(cosmax, cp));
  std::set<int32_t> expect;
  for (int32_t c : chosen) expect.insert(ivf.begin() + c * rho, ivf.begin() + (c + 1) * rho);
  EXPECT_EQ(recalled, std::vector<int32_t>(expect.begin(), expect.end()));
  const auto picked = ctkvr_rerank(q.data(), G, K.data(), n, D, recalled, kScale, rp);
  const auto a = grouped_softmax_max([&](int g) { return q.data() + g * D; }, recalled);
  std::vector<int32_t> want;
  for (int32_t j : topk(a, rp)) want.push_back(recalled[size_t(j)]);
  EXPECT_EQ(picked, want);
}

TEST(RefKernelsWindow, ObservationScoresPoolingChunks) {
  const int G = 2, w = 4;
  const int64_t n = 19, prefix = n - w;
  const Vec Qw = randn(G * w * D, 39), K = randn(n * D, 40);
  Vec s(prefix);
  obs_window_scores(Qw.data(), G, w, K.data(), n, D, kScale, s.data());
  std::vector<double> want(size_t(prefix), 0.0);
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < w; ++j) {
      const float* qq = Qw.data() + (g * w + j) * D;
      std::vector<double> l(size_t(prefix + j + 1));
      double mx = -1e300, z = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        double dot = 0;
        for (int c = 0; c < D; ++c) dot += double(qq[c]) * K[i * D + c];
        mx = std::max(mx, l[i] = kScale * dot);
      }
      for (double x : l) z += std::exp(x - mx);
      for (int64_t i = 0; i < prefix; ++i) want[size_t(i)] += std::exp(l[size_t(i)] - mx) / z;
    }
  expect_near_vec(s.data(), want, 1e-5);
  const Vec in = {1, 5, 2, 0, 3, 4};
  Vec mx(6), av(6), ch(3);
  pool1d(in.data(), 6, 3, Pool1D::max, mx.data());
  pool1d(in.data(), 6, 3, Pool1D::avg, av.data());
  EXPECT_EQ(mx, (Vec{5, 5, 5, 3, 4, 4}));
  expect_near_vec(av.data(), std::vector<double>{6 / 3., 8 / 3., 7 / 3., 5 / 3., 7 / 3., 7 / 3.}, 1e-6);
  chunk_sum(in.data(), 6, 4, ch.data());
  EXPECT_EQ(ch[0], 8.f);
  EXPECT_EQ(ch[1], 7.f);
}

}  // namespace
