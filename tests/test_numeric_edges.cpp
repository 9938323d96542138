// Numeric edges of every kernel family against INDEPENDENT expectations (closed forms or double-precision
// sums written here), never against another kernel: every selector and host kernel shares ref::softmax_rows
// and the online softmax of hd.hpp, so comparing kernels with each other cannot catch a softmax that
// forgot its max-subtraction (exp(1e4) overflows float). Each case runs on the three kernel backends the
// replay can use — the reference (kvsim::ref), the optimized host (kvsim::host) and the optimized CUDA
// kernels (kvsim::opt, emulated on the CPU) — and the softmax-bearing kernels are also called directly:
// ref::softmax_rows, host::group_softmax_max and the reference CUDA twins.
//
// The edge policy these tests pin (docs/robustness.md, "Numeric edges"): NaN and +-Inf in data are an
// InputError at the input boundary (the trace reader and writer); inside the kernels -inf is the masking
// value (weight 0; an all-masked row gives out = 0, lse = -inf) and selections rank NaN after every
// number (ties by the lower index).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/backend/backend.hpp"
#include "kernels/host/group_softmax.hpp"
#include "kernels/reference/cuda.hpp"
#include "kernels/reference/reference.hpp"

using namespace kvsim;
using namespace kvsim::kernels;

namespace {

using Vec = std::vector<float>;
using Ids = std::vector<int32_t>;
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

// softmax of [1e4, 1e4 - 1] in closed form: 1 / (1 + e^-1) and e^-1 / (1 + e^-1).
const double kP0 = 1.0 / (1.0 + std::exp(-1.0)), kP1 = std::exp(-1.0) / (1.0 + std::exp(-1.0));

// Softmax of logits in double (the independent expectation).
std::vector<double> softmax_double(const std::vector<double>& s) {
  double mx = -INFINITY;
  for (double x : s) mx = std::max(mx, x);
  std::vector<double> p(s.size());
  double z = 0;
  for (size_t i = 0; i < s.size(); ++i) z += (p[i] = std::exp(s[i] - mx));
  for (double& x : p) x /= z;
  return p;
}
double lse_double(const std::vector<double>& s) {
  double mx = -INFINITY;
  for (double x : s) mx = std::max(mx, x);
  double z = 0;
  for (double x : s) z += std::exp(x - mx);
  return mx + std::log(z);
}
// Ids ranked by the documented order (higher first, ties by the lower id, NaN last), first k.
Ids ranked(const Vec& s, int64_t k) {
  Ids id(s.size());
  std::iota(id.begin(), id.end(), 0);
  std::stable_sort(id.begin(), id.end(), [&](int32_t a, int32_t b) {
    const float x = s[size_t(a)], y = s[size_t(b)];
    if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
    return x > y;
  });
  id.resize(size_t(std::clamp<int64_t>(k, 0, int64_t(s.size()))));
  return id;
}

// One backend per test instance, destroyed with it (a CUDA backend's device memory must be freed while
// the emulator's allocator lives).
std::unique_ptr<Backend> make_backend(const std::string& which) {
  if (which == "reference") return make_host_backend();
  if (which == "host_optimized") return make_host_optimized_backend();
  return make_cuda_backend();
}

class NumericEdges : public ::testing::TestWithParam<std::string> {
 protected:
  const Backend& be() const { return *be_; }

 private:
  std::unique_ptr<Backend> be_ = make_backend(GetParam());
};

constexpr int D = 4;  // q = e_0 below, so a key's logit is scale * k[0]: logits are set exactly

// Keys whose logit against q = e_0 is logits[i]; values v_i = (i, 1, -i, 0.5 i).
struct Rows {
  Vec q = {1, 0, 0, 0}, keys, values;
  explicit Rows(const Vec& logits) {
    for (size_t i = 0; i < logits.size(); ++i) {
      keys.insert(keys.end(), {logits[i], 0, 0, 0});
      values.insert(values.end(), {float(i), 1.f, -float(i), 0.5f * float(i)});
    }
  }
  // Expected output of attention over rows with logits s (in double).
  std::vector<double> expected_out(const std::vector<double>& s) const {
    const auto p = softmax_double(s);
    std::vector<double> o(D, 0.0);
    for (size_t i = 0; i < p.size(); ++i)
      for (int c = 0; c < D; ++c) o[size_t(c)] += p[i] * values[i * D + size_t(c)];
    return o;
  }
};

// Logits L - (i % 3): huge in magnitude, a spread of a few nats; m not a multiple of any tile.
Vec huge_logits(float L, int64_t m) {
  Vec s(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) s[size_t(i)] = L - float(i % 3);
  return s;
}
std::vector<double> to_double(const Vec& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, NumericEdges, ::testing::Values("reference", "host_optimized", "cuda"),
                         [](const auto& info) { return info.param; });

// ---- softmax with huge logits, against the closed form ----

TEST(NumericEdgesDirect, SoftmaxOfHugeLogitsIsTheClosedForm) {
  for (const float L : {1e4f, -1e4f}) {
    SCOPED_TRACE(L);
    Vec s = {L, L - 1};
    ref::softmax_rows(s.data(), 1, 2);
    EXPECT_NEAR(s[0], kP0, 1e-6);
    EXPECT_NEAR(s[1], kP1, 1e-6);

    // host::group_softmax_max: G = 1 and G = 5 (its 4-row blocked path plus a remainder row).
    for (int G : {1, 5}) {
      Vec S;
      for (int g = 0; g < G; ++g) S.insert(S.end(), {L, L - 1});
      Vec A(2);
      host::group_softmax_max(S.data(), G, 2, 2, A.data());
      EXPECT_NEAR(A[0], kP0, 1e-6) << G;
      EXPECT_NEAR(A[1], kP1, 1e-6) << G;
    }

    // The reference CUDA twin (emulated).
    ref::cuda_emu::DeviceBuffer<float> d(Vec{L, L - 1});
    ref::cuda_emu::softmax_rows(d.get(), 1, 2);
    const Vec got = d.download();
    EXPECT_NEAR(got[0], kP0, 1e-6);
    EXPECT_NEAR(got[1], kP1, 1e-6);
  }
}

TEST(NumericEdgesDirect, SoftmaxRowsMasksMinusInfinityAndAnAllMaskedRowIsZero) {
  Vec s = {1e4f, -kInf, 1e4f - 1, -kInf, -kInf, -kInf};
  ref::softmax_rows(s.data(), 2, 3);
  EXPECT_NEAR(s[0], kP0, 1e-6);
  EXPECT_EQ(s[1], 0.f);
  EXPECT_NEAR(s[2], kP1, 1e-6);
  for (int i = 3; i < 6; ++i) EXPECT_EQ(s[size_t(i)], 0.f) << i;
}

TEST(NumericEdgesDirect, ReferenceCudaGatherAttentionOfHugeLogits) {
  namespace cu = ref::cuda_emu;
  for (const float L : {1e4f, -1e4f})
    for (const int64_t m : {int64_t(2), int64_t(37), int64_t(129)}) {
      SCOPED_TRACE(std::to_string(L) + " m=" + std::to_string(m));
      const Vec logits = huge_logits(L, m);
      const Rows r(logits);
      Ids idx(static_cast<size_t>(m));
      std::iota(idx.begin(), idx.end(), 0);
      cu::DeviceBuffer<float> dq(r.q), dk(r.keys), dv(r.values), dout(static_cast<size_t>(D)), dlse(1);
      cu::DeviceBuffer<int32_t> di(idx);
      cu::gather_attention(dq.get(), 1, dk.get(), dv.get(), di.get(), m, D, 1.f, dout.get(), dlse.get());
      const auto want = r.expected_out(to_double(logits));
      const Vec out = dout.download();
      for (int c = 0; c < D; ++c) EXPECT_NEAR(out[size_t(c)], want[size_t(c)], 1e-4 * (1 + std::abs(want[size_t(c)])));
      EXPECT_NEAR(dlse.download()[0], lse_double(to_double(logits)), 4e-3);
    }
}

TEST_P(NumericEdges, GatherAttentionOfHugeLogitsIsTheClosedForm) {
  for (const float L : {1e4f, -1e4f})
    for (const int64_t m : {int64_t(2), int64_t(37), int64_t(129), int64_t(1000)}) {
      SCOPED_TRACE(std::to_string(L) + " m=" + std::to_string(m));
      const Vec logits = huge_logits(L, m);
      const Rows r(logits);
      Ids idx(static_cast<size_t>(m));
      std::iota(idx.begin(), idx.end(), 0);
      Vec out(D), lse(1);
      // A fresh backend per case: a device backend keeps K/V resident keyed by the host pointer (the
      // trace's arrays never change during a replay), and this loop's vectors may reuse an address.
      make_backend(GetParam())->gather_attention({.queries = r.q.data(), .rows = 1, .keys = r.keys.data(), .values = r.values.data(),
                             .resident_rows = m, .d = D, .idx = idx.data(), .m = m, .scale = 1.f,
                             .out = out.data(), .lse = lse.data()});
      const auto want = r.expected_out(to_double(logits));
      for (int c = 0; c < D; ++c) EXPECT_NEAR(out[size_t(c)], want[size_t(c)], 1e-4 * (1 + std::abs(want[size_t(c)])));
      // lse = L + log Σ e^-(i%3); float's spacing at 1e4 is 1e-3.
      EXPECT_NEAR(lse[0], lse_double(to_double(logits)), 4e-3);
    }
}

TEST_P(NumericEdges, BiasedAttentionOfHugeLogitsAndMaskedEntries) {
  // Logit = key part L plus bias -(i%3), or -inf (masked) for every fifth entry.
  for (const float L : {1e4f, -1e4f}) {
    const int64_t m = 53;
    const Rows r(Vec(size_t(m), L));
    Vec bias(static_cast<size_t>(m));
    std::vector<double> s(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      bias[size_t(i)] = i % 5 == 4 ? -kInf : -float(i % 3);
      s[size_t(i)] = double(L) + double(bias[size_t(i)]);
    }
    Vec out(D), lse(1);
    be().biased_attention({.queries = r.q.data(), .rows = 1, .keys = r.keys.data(), .values = r.values.data(),
                           .bias = bias.data(), .m = m, .d = D, .scale = 1.f, .out = out.data(), .lse = lse.data()});
    const auto want = r.expected_out(s);
    for (int c = 0; c < D; ++c) EXPECT_NEAR(out[size_t(c)], want[size_t(c)], 1e-4 * (1 + std::abs(want[size_t(c)]))) << L;
    EXPECT_NEAR(lse[0], lse_double(s), 4e-3) << L;

    // Every entry masked: out = 0, lse = -inf (the empty state).
    const Vec masked(static_cast<size_t>(m), -kInf);
    be().biased_attention({.queries = r.q.data(), .rows = 1, .keys = r.keys.data(), .values = r.values.data(),
                           .bias = masked.data(), .m = m, .d = D, .scale = 1.f, .out = out.data(), .lse = lse.data()});
    for (float x : out) EXPECT_EQ(x, 0.f);
    EXPECT_EQ(lse[0], -kInf);
  }
}

TEST_P(NumericEdges, EmptySelectionsGiveTheEmptyState) {
  const Rows r(Vec{1, 2, 3});
  Vec out(D, 7.f), lse(1, 7.f);
  be().gather_attention({.queries = r.q.data(), .rows = 1, .keys = r.keys.data(), .values = r.values.data(),
                         .resident_rows = 3, .d = D, .idx = nullptr, .m = 0, .scale = 1.f, .out = out.data(),
                         .lse = lse.data()});
  for (float x : out) EXPECT_EQ(x, 0.f);
  EXPECT_EQ(lse[0], -kInf);
  const Vec no_scores;
  EXPECT_TRUE(be().topk({.scores = no_scores.data(), .n = 0, .k = 5}).empty());
  EXPECT_TRUE(be().dedup({.ids = nullptr, .n = 0}).empty());
  EXPECT_TRUE(be().position_ids({.n = 0, .sinks = 4, .window = 8}).empty());
}

TEST_P(NumericEdges, MergeStateOfHugeLsesAndEmptyStates) {
  const Vec a = {1, 0}, b = {0, 1};
  for (const float L : {1e4f, -1e4f}) {
    const Vec la = {L}, lb = {L - 1};
    Vec out(2), lse(1);
    be().merge_state({.out_a = a.data(), .lse_a = la.data(), .out_b = b.data(), .lse_b = lb.data(), .rows = 1, .d = 2,
                      .out = out.data(), .lse = lse.data()});
    EXPECT_NEAR(out[0], kP0, 1e-6) << L;
    EXPECT_NEAR(out[1], kP1, 1e-6) << L;
    EXPECT_NEAR(lse[0], double(L) + std::log1p(std::exp(-1.0)), 2e-3) << L;
  }
  // An empty side (lse = -inf) is the identity; two empty sides stay empty.
  const Vec la = {5.f}, empty = {-kInf};
  Vec out(2), lse(1);
  be().merge_state({.out_a = a.data(), .lse_a = la.data(), .out_b = b.data(), .lse_b = empty.data(), .rows = 1,
                    .d = 2, .out = out.data(), .lse = lse.data()});
  EXPECT_EQ(out, a);
  EXPECT_EQ(lse[0], 5.f);
  be().merge_state({.out_a = a.data(), .lse_a = empty.data(), .out_b = b.data(), .lse_b = empty.data(), .rows = 1,
                    .d = 2, .out = out.data(), .lse = lse.data()});
  EXPECT_EQ(out, (Vec{0, 0}));
  EXPECT_EQ(lse[0], -kInf);
}

TEST_P(NumericEdges, WindowScoresOfHugeLogitsAreTheClosedForm) {
  // One head, a window of w queries (all q = e_0), n keys with logits L - (i % 3): query j sees keys
  // 0 .. n-w+j, and scores[i] sums its probabilities over the window. n - w is no multiple of a tile.
  for (const float L : {1e4f, -1e4f})
    for (const int w : {1, 3}) {
      const int64_t n = 67;
      const Vec logits = huge_logits(L, n);
      const Rows r(logits);
      Vec Q;
      for (int j = 0; j < w; ++j) Q.insert(Q.end(), r.q.begin(), r.q.end());
      Vec scores(size_t(n - w));
      be().obs_window_scores({.queries = Q.data(), .groups = 1, .window = w, .keys = r.keys.data(), .n = n, .d = D,
                              .scale = 1.f, .scores = scores.data()});
      std::vector<double> want(size_t(n - w), 0.0);
      for (int j = 0; j < w; ++j) {
        const auto p = softmax_double(std::vector<double>(logits.begin(), logits.begin() + (n - w + j + 1)));
        for (int64_t i = 0; i < n - w; ++i) want[size_t(i)] += p[size_t(i)];
      }
      for (int64_t i = 0; i < n - w; ++i) EXPECT_NEAR(scores[size_t(i)], want[size_t(i)], 1e-5) << L << " w=" << w << " i=" << i;
    }
}

TEST_P(NumericEdges, CtkvrRanksByTheSoftmaxOfHugeLogits) {
  // Two query heads against five keys: head 0 sees logits around +1e4, head 1 around -1e4. The ranking is
  // by the max over the heads of each head's softmax (computed here in double): keys 3, 1, 4, 0, 2.
  const Vec k0 = {9998, 10000, 9999, 9997, 9999.5f};
  const Rows r(k0);
  const Vec q = {1, 0, 0, 0, -1, 0, 0, 0};
  const auto p0 = softmax_double(to_double(k0));
  std::vector<double> neg(k0.size());
  for (size_t i = 0; i < k0.size(); ++i) neg[i] = -double(k0[i]);
  const auto p1 = softmax_double(neg);
  Vec akv(k0.size());
  for (size_t i = 0; i < k0.size(); ++i) akv[i] = float(std::max(p0[i], p1[i]));
  const Ids want = ranked(akv, 3);
  ASSERT_EQ(want, (Ids{3, 1, 4}));

  Ids ivf(3);
  EXPECT_EQ(be().qcivf_build({.centroids = q.data(), .groups = 2, .C = 1, .keys = r.keys.data(), .n = 5, .d = D,
                              .scale = 1.f, .rho = 3, .ivf = ivf.data()}),
            3);
  EXPECT_EQ(ivf, want);
  const Ids recalled = {0, 1, 2, 3, 4};
  EXPECT_EQ(be().ctkvr_rerank({.q = q.data(), .groups = 2, .keys = r.keys.data(), .n = 5, .resident_rows = 5, .d = D,
                               .recalled = recalled.data(), .m = 5, .scale = 1.f, .rho_prime = 3}),
            want);
}

// ---- selection: ties, k = 0, k >= n, NaN and +-inf, denormals, lengths off the tile ----

TEST_P(NumericEdges, TopkTiesKEdgesNonFiniteAndOddLengths) {
  const float den = std::numeric_limits<float>::denorm_min();
  const Vec s = {1, 3, kNan, 3, -kInf, 3, -0.f, 0.f, kInf, 2 * den, den, -den};
  EXPECT_EQ(be().topk({.scores = s.data(), .n = int64_t(s.size()), .k = 0}), Ids{});
  for (int64_t k : {int64_t(1), int64_t(4), int64_t(12), int64_t(20)})
    EXPECT_EQ(be().topk({.scores = s.data(), .n = int64_t(s.size()), .k = k}), ranked(s, k)) << k;
  // Exactly what the order says: +inf, the three 3s by id, 1, denormals above zero, ±0 tied by id, the
  // negative denormal, -inf, NaN last.
  EXPECT_EQ(be().topk({.scores = s.data(), .n = int64_t(s.size()), .k = 12}),
            (Ids{8, 1, 3, 5, 0, 9, 10, 6, 7, 11, 4, 2}));

  // Long runs of ties over lengths that are not a multiple of any block (1000 + 3, 4099).
  for (const int64_t n : {int64_t(1003), int64_t(4099)}) {
    Vec t(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t[size_t(i)] = float((i * 7919) % 13);
    for (int64_t k : {int64_t(1), int64_t(77), n - 1, n, n + 5})
      EXPECT_EQ(be().topk({.scores = t.data(), .n = n, .k = k}), ranked(t, k)) << n << " " << k;
  }
}

TEST_P(NumericEdges, DenormalScoresAreKeptNotFlushed) {
  // score_gemv of q = e_0 against keys whose first component is a denormal: the scores are those
  // denormals exactly (no flush to zero), so their ranking survives.
  const float den = std::numeric_limits<float>::denorm_min();
  const Vec first = {3 * den, 1e-40f, -1e-40f, 0.f, 7 * den};
  const Rows r(first);
  Vec scores(first.size());
  be().score_gemv({.q = r.q.data(), .M = r.keys.data(), .n = int64_t(first.size()), .d = D, .cosine = false,
                   .scale = 1.f, .scores = scores.data()});
  EXPECT_EQ(scores, first);
  EXPECT_EQ(be().topk({.scores = scores.data(), .n = 5, .k = 5}), (Ids{1, 4, 0, 3, 2}));
}

TEST_P(NumericEdges, QuestPageSelectKEdges) {
  // k = 0 keeps nothing, k = 1 only the last page (always kept), k >= pages every page; between, the last
  // page plus the best others, ties by the lower page, a -inf bound last. Ascending.
  const Vec bound = {0.5f, 2, 2, -kInf, 1, 0.25f, 3};
  const int64_t P = int64_t(bound.size());
  auto sel = [&](int64_t k) { return be().quest_select_pages({.bound = bound.data(), .pages = P, .k = k}); };
  EXPECT_EQ(sel(0), Ids{});
  EXPECT_EQ(sel(1), Ids{6});
  EXPECT_EQ(sel(3), (Ids{1, 2, 6}));
  EXPECT_EQ(sel(6), (Ids{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(sel(P), (Ids{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(sel(P + 3), (Ids{0, 1, 2, 3, 4, 5, 6}));
}
