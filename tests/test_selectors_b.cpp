// Trace selectors for sekv (seed 003) and ctkvr (seed 004) on synthetic traces (suites SelectorsB*).
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/reference/reference.hpp"
#include "replay/replay.hpp"
#include "model/policy.hpp"
#include "traces/select/selector.hpp"
#include "policies/ctkvr/selector.hpp"
#include "policies/sekv/selector.hpp"
#include "traces/synthetic/synthetic.hpp"
#include "policies/registry.hpp"
#include "policies/sekv/policy.hpp"
#include "policies/ctkvr/policy.hpp"

namespace kvsim {
namespace {

using replay::HeadSelection;
using replay::TraceData;

// The trace in float, as replay loads it (no memory limit in tests).
TraceData make_data(const SyntheticTrace& tr) { return replay::load_trace_data(tr, 1e15, "test trace"); }

struct Tiny {
  SyntheticTrace tr;
  TraceData D;
  explicit Tiny(std::vector<std::pair<std::string, std::string>> o = {})
      : tr(load_synthetic_config("tiny", o)), D(make_data(tr)) {}
  int64_t first_decode() const {
    for (int64_t s = 0; s < D.S; ++s)
      if (D.position(s) >= D.P) return s;
    return -1;
  }
};

const Tiny& tiny() {
  static const Tiny t;
  return t;
}

ParamValues params(const char* policy, std::vector<std::pair<std::string, double>> set) {
  const Policy* p = find_policy(policy);
  ParamValues v = p->defaults();
  for (const auto& [k, x] : set) {
    const int i = p->param_index(k);
    EXPECT_GE(i, 0) << k;
    v[size_t(i)] = x;
  }
  return v;
}

std::vector<HeadSelection> run_select(replay::TraceSelector& sel, const TraceData& D, int64_t s) {
  std::vector<HeadSelection> out(size_t(D.layers) * D.kv_heads);
  for (auto& h : out) h.clear();
  sel.select(D, s, out);
  for (auto& h : out) h.flatten_extras(D.d);  // the checks below read the entries as one array
  return out;
}

// Attention of query row s of query-head slot qh over a HeadSelection (tokens + extra entries).
float selection_attention(const TraceData& D, int l, int h, int qh, int64_t s, const HeadSelection& hs, float* out) {
  std::vector<ref::AttnEntry> e;
  for (int32_t t : hs.tokens) e.push_back({D.k(l, h) + int64_t(t) * D.d, D.v(l, h) + int64_t(t) * D.d, 0.f});
  for (size_t i = 0; i < hs.extra_bias.size(); ++i)
    e.push_back({hs.extra_k.data() + i * D.d, hs.extra_v.data() + i * D.d, hs.extra_bias[i]});
  return ref::biased_attention(D.q(l, qh, s), e, D.d, 1.f / std::sqrt(float(D.d)), out);
}

// ---------------------------------------------------------------- sekv

TEST(SelectorsBSekv, BoundariesAreSurprisalAboveMuPlusAlphaSigma) {
  const Tiny& t = tiny();
  const auto& H = t.tr.tokens().surprisal;
  for (double alpha : {0.5, 1.0, 2.0}) {
    policies::sekv::SekvSelector sel(params("sekv", {{"alpha", alpha}, {"local_window", 64}}));
    sel.prefill(t.D);
    double mu = 0, var = 0;
    for (int64_t i = 1; i < t.D.P; ++i) mu += H[size_t(i)];
    mu /= double(t.D.P - 1);
    for (int64_t i = 1; i < t.D.P; ++i) var += (H[size_t(i)] - mu) * (H[size_t(i)] - mu);
    const double sigma = std::sqrt(var / double(t.D.P - 1));
    EXPECT_NEAR(sel.mu(), mu, 1e-9);
    EXPECT_NEAR(sel.sigma(), sigma, 1e-9);
    std::vector<int32_t> want;
    for (int64_t i = 1; i < t.D.P; ++i)
      if (H[size_t(i)] > mu + alpha * sigma) want.push_back(int32_t(i));
    EXPECT_EQ(sel.anchors(), want) << "alpha " << alpha;
    EXPECT_FALSE(want.empty());
    // Spans lie between anchors, are at least L_min long, and with the full-resolution tokens they
    // cover the prompt exactly once.
    std::vector<int> cover(size_t(t.D.P), 0);
    for (int32_t x : sel.full_tokens()) ++cover[size_t(x)];
    const std::set<int32_t> anchors(want.begin(), want.end());
    for (const auto& sp : sel.spans()) {
      EXPECT_GE(sp.len(), 16);
      for (int32_t x = sp.begin; x < sp.end; ++x) {
        ++cover[size_t(x)];
        EXPECT_EQ(anchors.count(x), 0u);
      }
      // maximal: the tokens around a span are anchors or the local window / prompt start
      if (sp.begin > 0) {
        EXPECT_TRUE(anchors.count(sp.begin - 1)) << sp.begin;
      }
      if (sp.end < t.D.P - 64) {
        EXPECT_TRUE(anchors.count(sp.end)) << sp.end;
      }
    }
    for (int64_t i = 0; i < t.D.P; ++i) EXPECT_EQ(cover[size_t(i)], 1) << i;
    for (int32_t a : want) EXPECT_TRUE(std::binary_search(sel.full_tokens().begin(), sel.full_tokens().end(), a));
  }
}

TEST(SelectorsBSekv, ReconstructionErrorEqualsDiscardedEnergy) {
  const Tiny& t = tiny();
  policies::sekv::SekvSelector sel(params("sekv", {{"local_window", 64}, {"max_rank", 8}, {"min_span", 8}}),
                           policies::sekv::SekvOptions{0.8, 0.05, -1});
  sel.prefill(t.D);
  ASSERT_GT(sel.spans().size(), 5u);
  const int d = t.D.d;
  int checked = 0;
  for (int l = 0; l < t.D.layers; ++l)
    for (int h = 0; h < t.D.kv_heads; ++h) {
      const auto& hs = sel.head(l, h);
      for (size_t i = 0; i < sel.spans().size(); i += 3) {
        const auto sp = sel.spans()[i];
        for (int kv = 0; kv < 2; ++kv) {
          const ref::LowRankFactors& f = kv ? hs.fv[i] : hs.fk[i];
          const float* X = (kv ? t.D.v(l, h) : t.D.k(l, h)) + int64_t(sp.begin) * d;
          std::vector<float> R(size_t(sp.len()) * d);
          ref::lowrank_reconstruct(f, R.data());
          double err = 0, tot = 0;
          for (size_t j = 0; j < R.size(); ++j) {
            err += (double(X[j]) - R[j]) * (double(X[j]) - R[j]);
            tot += double(X[j]) * X[j];
          }
          EXPECT_NEAR(f.total_energy, tot, 1e-4 * tot);
          EXPECT_NEAR(err, f.discarded_energy, 1e-4 * tot) << "span " << i;
          EXPECT_LE(f.rank, std::min(sp.len(), 8));
          // the energy rule: either the cap binds or >= 80% of the energy is kept
          if (f.rank < std::min(sp.len(), 8)) {
            EXPECT_LE(f.discarded_energy, 0.2 * f.total_energy + 1e-9);
          }
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 8);
  const auto st = sel.statistics();
  ASSERT_TRUE(st.count("effective_rank"));
  EXPECT_GT(st.at("effective_rank").value, 0);
  EXPECT_LE(st.at("effective_rank").value, 8);
  EXPECT_LE(st.at("rank_ratio").value, 1.0);
  // The ranks are counted over spans for K and V together; each error over the spans of one of them.
  ASSERT_TRUE(st.count("recon_error_k") && st.count("recon_error_v"));
  EXPECT_EQ(st.at("recon_error_k").samples * 2, st.at("effective_rank").samples);
  EXPECT_EQ(st.at("recon_error_v").samples, st.at("recon_error_k").samples);
}

TEST(SelectorsBSekv, CoarseEntriesAreWeightedMeansWithLogSpanBias) {
  const Tiny& t = tiny();
  policies::sekv::SekvSelector sel(params("sekv", {{"local_window", 64}, {"budget_ratio", 0.01}}));
  sel.prefill(t.D);
  EXPECT_EQ(sel.zoom_budget(), 0.0);
  const int64_t s = t.first_decode() + 5;
  const int64_t p = t.D.position(s);
  auto out = run_select(sel, t.D, s);
  const auto& H = t.tr.tokens().surprisal;
  const int d = t.D.d;
  const size_t m = sel.spans().size();
  for (int l = 0; l < t.D.layers; ++l)
    for (int h = 0; h < t.D.kv_heads; ++h) {
      const HeadSelection& hs = out[size_t(l) * t.D.kv_heads + h];
      ASSERT_EQ(hs.extra_bias.size(), m);
      EXPECT_TRUE(hs.extra_tokens.empty());
      for (size_t i = 0; i < m; ++i) {
        const auto sp = sel.spans()[i];
        EXPECT_FLOAT_EQ(hs.extra_bias[i], std::log(float(sp.len())));
        double wsum = 0;
        for (int32_t x = sp.begin; x < sp.end; ++x) wsum += H[size_t(x)];
        for (int c = 0; c < d; c += 7) {
          double kb = 0, vb = 0;
          for (int32_t x = sp.begin; x < sp.end; ++x) {
            kb += H[size_t(x)] / wsum * t.D.k(l, h)[int64_t(x) * d + c];
            vb += H[size_t(x)] / wsum * t.D.v(l, h)[int64_t(x) * d + c];
          }
          EXPECT_NEAR(hs.extra_k[i * d + c], kb, 1e-4);
          EXPECT_NEAR(hs.extra_v[i * d + c], vb, 1e-4);
        }
      }
      // full-resolution tokens: prompt anchors/short spans/window, then every generated token to p
      std::vector<int32_t> want = sel.full_tokens();
      for (int64_t x = t.D.P; x <= p; ++x) want.push_back(int32_t(x));
      EXPECT_EQ(hs.tokens, want);
    }
  const auto st = sel.statistics();
  EXPECT_EQ(st.at("zoom_rate").value, 0.0);
  EXPECT_NEAR(st.at("mean_span_tokens").value,
              [&] {
                double s2 = 0;
                for (const auto& sp : sel.spans()) s2 += sp.len();
                return s2 / double(m);
              }(),
              1e-9);
  EXPECT_GT(st.at("anchor_ratio").value, 0.0);
  EXPECT_LT(st.at("anchor_ratio").value, 1.0);
}

TEST(SelectorsBSekv, ZoomEverySpanAtFullRankIsFullAttention) {
  const Tiny& t = tiny();
  policies::sekv::SekvSelector sel(params("sekv", {{"local_window", 64}, {"max_rank", 64}, {"budget_ratio", 1}}),
                           policies::sekv::SekvOptions{1.0, 0.05, 1e9});
  sel.prefill(t.D);
  const int d = t.D.d;
  std::vector<float> o1(static_cast<size_t>(d)), o2(static_cast<size_t>(d));
  for (int64_t s = t.first_decode(); s < t.D.S; s += 97) {
    const int64_t p = t.D.position(s);
    auto out = run_select(sel, t.D, s);
    for (int l = 0; l < t.D.layers; ++l)
      for (int h = 0; h < t.D.kv_heads; ++h) {
        const HeadSelection& hs = out[size_t(l) * t.D.kv_heads + h];
        EXPECT_EQ(sel.last_zoomed(l, h).size(), sel.spans().size());
        for (float b : hs.extra_bias) EXPECT_EQ(b, 0.f);
        // every token 0..p exactly once
        std::vector<int32_t> all(hs.tokens);
        all.insert(all.end(), hs.extra_tokens.begin(), hs.extra_tokens.end());
        std::sort(all.begin(), all.end());
        ASSERT_EQ(int64_t(all.size()), p + 1);
        for (int64_t x = 0; x <= p; ++x) ASSERT_EQ(all[size_t(x)], x);
        for (int qh : t.D.group_of[size_t(h)]) {
          const float lse1 = selection_attention(t.D, l, h, qh, s, hs, o1.data());
          const float lse2 =
              ref::decode_attention(t.D.q(l, qh, s), t.D.k(l, h), t.D.v(l, h), p + 1, d, 1.f / std::sqrt(float(d)), o2.data());
          EXPECT_NEAR(lse1, lse2, 1e-3);
          for (int c = 0; c < d; ++c) EXPECT_NEAR(o1[size_t(c)], o2[size_t(c)], 2e-4) << l << h << qh << c;
        }
      }
  }
  EXPECT_NEAR(sel.statistics().at("zoom_rate").value, 1.0, 1e-12);
}

TEST(SelectorsBSekv, BudgetCapsZoomInScoreOrder) {
  const Tiny& t = tiny();
  const ParamValues pv = params("sekv", {{"local_window", 64}, {"budget_ratio", 0.6}, {"min_span", 8}});
  policies::sekv::SekvSelector sel(pv);
  sel.prefill(t.D);
  const double m = double(sel.spans().size());
  const double want = 0.6 * double(t.D.P) - double(sel.full_tokens().size()) - m - m * 2 * 32 / (2.0 * t.D.d);
  EXPECT_NEAR(sel.zoom_budget(), std::max(0.0, want), 1e-9);
  ASSERT_GT(sel.zoom_budget(), 0);
  for (int64_t s = t.first_decode(); s < t.D.S; s += 50) {
    auto out = run_select(sel, t.D, s);
    for (int l = 0; l < t.D.layers; ++l)
      for (int h = 0; h < t.D.kv_heads; ++h) {
        const HeadSelection& hs = out[size_t(l) * t.D.kv_heads + h];
        const auto& z = sel.last_zoomed(l, h);
        int64_t used = 0;
        for (int32_t i : z) used += sel.spans()[size_t(i)].len();
        EXPECT_LE(double(used), sel.zoom_budget());
        EXPECT_EQ(int64_t(hs.extra_tokens.size()), used);
        EXPECT_EQ(hs.extra_bias.size(), size_t(used) + sel.spans().size() - z.size());
        // entries: one per attended element, K/V rows match
        EXPECT_EQ(hs.extra_k.size(), hs.extra_bias.size() * size_t(t.D.d));
        EXPECT_TRUE(std::is_sorted(hs.tokens.begin(), hs.tokens.end()));
      }
  }
  const auto st = policies::sekv::make_selector(pv);
  ASSERT_TRUE(st);
}

TEST(SelectorsBSekv, DefaultsRunThroughTheFactory) {
  const Tiny& t = tiny();
  auto sel = policies::sekv::make_selector(find_policy("sekv")->defaults());
  sel->prefill(t.D);
  for (int64_t s = t.first_decode(); s < t.D.S; s += 64) run_select(*sel, t.D, s);
  const auto st = sel->statistics();
  for (const char* k : {"zoom_rate", "effective_rank", "rank_ratio", "mean_span_tokens", "anchor_ratio"})
    EXPECT_TRUE(st.count(k)) << k;
  for (const auto& [k, v] : st) std::printf("sekv tiny defaults: %s = %g (%lld)\n", k.c_str(), v.value, (long long)v.samples);
}

// Each KV head routes on its own group's queries (eq. 4-5: a span's score is the max over the group), so
// what one (layer, KV head) selects is the same in the whole trace and in a trace that stores only that
// layer and head: no head's routing may read another head's queries. `tiny` and its layer 1, KV head 1,
// with its groups of two query heads and with one (MHA, where a query left out changes every score).
TEST(SelectorsBSekv, EachKvHeadRoutesOnItsOwnGroupsQueries) {
  for (const char* heads : {"4", "2"}) {
    SCOPED_TRACE(testing::Message() << heads << " query heads on 2 KV heads");
    using Options = std::vector<std::pair<std::string, std::string>>;
    const Tiny all(Options{{"heads", heads}});
    const Tiny one(Options{{"heads", heads}, {"store_layers", "[1]"}, {"store_kv_heads", "[1]"}});
    ASSERT_EQ(one.D.layers, 1);
    ASSERT_EQ(one.D.kv_heads, 1);
    ASSERT_EQ(all.D.layers, 2);
    ASSERT_EQ(all.D.kv_heads, 2);
    const int64_t T = all.D.T, d = all.D.d;
    ASSERT_TRUE(std::equal(one.D.k(0, 0), one.D.k(0, 0) + T * d, all.D.k(1, 1)));  // the same stored keys
    const ParamValues v = params("sekv", {{"local_window", 64}, {"budget_ratio", 0.6}, {"min_span", 8}});
    policies::sekv::SekvSelector a(v), b(v);
    a.prefill(all.D), b.prefill(one.D);
    int zoomed = 0;
    for (int64_t s = all.first_decode(); s < all.D.S; s += 16) {
      const auto sa = run_select(a, all.D, s), sb = run_select(b, one.D, s);
      const HeadSelection &x = sa[size_t(1) * all.D.kv_heads + 1], &y = sb[0];
      EXPECT_EQ(a.last_zoomed(1, 1), b.last_zoomed(0, 0)) << "row " << s;
      EXPECT_EQ(x.tokens, y.tokens) << "row " << s;
      EXPECT_EQ(x.extra_tokens, y.extra_tokens) << "row " << s;
      zoomed += !x.extra_tokens.empty();
    }
    EXPECT_GT(zoomed, 0);  // the routing chose something to compare
  }
}

// The routing reads the query: a span's score is the query's similarity to the span's summary (eq. 4-5),
// so which spans are zoomed changes from one decode row to another. With MHA (one query per KV head) a
// routing that missed the query would zoom the same spans on every row.
TEST(SelectorsBSekv, TheZoomFollowsTheQuery) {
  const Tiny t(std::vector<std::pair<std::string, std::string>>{{"heads", "2"}});
  policies::sekv::SekvSelector sel(params("sekv", {{"local_window", 64}, {"budget_ratio", 0.6}, {"min_span", 8}}));
  sel.prefill(t.D);
  std::vector<std::set<std::vector<int32_t>>> seen(size_t(t.D.layers) * t.D.kv_heads);
  for (int64_t s = t.first_decode(); s < t.D.S; s += 16) {
    run_select(sel, t.D, s);
    for (int l = 0; l < t.D.layers; ++l)
      for (int h = 0; h < t.D.kv_heads; ++h) seen[size_t(l) * t.D.kv_heads + h].insert(sel.last_zoomed(l, h));
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_GT(seen[i].size(), 1u) << "slot " << i << " zooms the same spans on every row";
}

// ---------------------------------------------------------------- ctkvr

ParamValues ctkvr_small(std::vector<std::pair<std::string, double>> extra = {}) {
  std::vector<std::pair<std::string, double>> set = {{"centroids", 32}, {"probes", 4},     {"per_centroid", 320},
                                                     {"budget_tokens", 128}, {"init_tokens", 4}, {"local_tokens", 64}};
  set.insert(set.end(), extra.begin(), extra.end());
  return params("ctkvr", set);
}

TEST(SelectorsBCtkvr, RecallIsDeduplicatedAndAlphaIsUniqueOverRhoCPrime) {
  const Tiny& t = tiny();
  policies::ctkvr::CtkvrSelector sel(ctkvr_small());
  sel.prefill(t.D);
  EXPECT_EQ(sel.centroids(), 32);  // capped by the 32 prompt query rows of tiny
  double sum = 0;
  int n = 0;
  const int64_t s0 = t.first_decode();
  for (int64_t s = s0; s < s0 + 10; ++s) {
    run_select(sel, t.D, s);
    for (int l = 0; l < t.D.layers; ++l)
      for (int h = 0; h < t.D.kv_heads; ++h) {
        const auto& r = sel.last_recall(l, h);
        EXPECT_TRUE(std::adjacent_find(r.begin(), r.end(), std::greater_equal<int32_t>()) == r.end())
            << "not strictly increasing";
        EXPECT_EQ(std::set<int32_t>(r.begin(), r.end()).size(), r.size());
        const double a = double(r.size()) / (320.0 * 4);
        EXPECT_LE(a, 1.0);
        EXPECT_GT(a, 0.0);
        sum += a;
        ++n;
        const auto& c = sel.last_chosen(l, h);
        EXPECT_LE(c.size(), 128u);
        EXPECT_EQ(std::set<int32_t>(c.begin(), c.end()).size(), c.size());
      }
  }
  const auto st = sel.statistics();
  EXPECT_NEAR(st.at("dedup").value, sum / n, 1e-12);
  EXPECT_EQ(st.at("dedup").samples, n);
  EXPECT_LE(st.at("dedup").value, 1.0);
  // dedup kernel on a list with repeats
  const std::vector<int32_t> ids = {5, 3, 5, 9, 3, 3, 0};
  EXPECT_EQ(ref::dedup(ids), (std::vector<int32_t>{0, 3, 5, 9}));
}

// C' = 1 (probes, the knob's smallest value): each step recalls the keys of one centroid, at most rho of them.
TEST(SelectorsBCtkvr, OneProbeRecallsOneCentroidsKeys) {
  const Tiny& t = tiny();
  policies::ctkvr::CtkvrSelector sel(ctkvr_small({{"probes", 1}}));
  sel.prefill(t.D);
  size_t most = 0;
  const int64_t s0 = t.first_decode();
  for (int64_t s = s0; s < s0 + 10; ++s) {
    run_select(sel, t.D, s);
    for (int l = 0; l < t.D.layers; ++l)
      for (int h = 0; h < t.D.kv_heads; ++h) {
        EXPECT_LE(sel.last_recall(l, h).size(), 320u);  // rho of ctkvr_small
        most = std::max(most, sel.last_recall(l, h).size());
      }
  }
  EXPECT_GT(most, 0u);
  EXPECT_LE(sel.statistics().at("dedup").value, 1.0);
}

TEST(SelectorsBCtkvr, EveryCentroidEveryKeySelectsEveryToken) {
  const Tiny& t = tiny();
  const double P = double(t.D.P);
  policies::ctkvr::CtkvrSelector sel(ctkvr_small({{"probes", 32}, {"per_centroid", P}, {"budget_tokens", P}, {"local_tokens", 300}}),
                            policies::ctkvr::CtkvrOptions{0, true});
  sel.prefill(t.D);
  const int64_t s0 = t.first_decode();
  for (int64_t s = s0; s < t.D.S; s += 31) {
    const int64_t p = t.D.position(s);
    auto out = run_select(sel, t.D, s);
    for (const HeadSelection& hs : out) {
      ASSERT_EQ(int64_t(hs.tokens.size()), p + 1);
      for (int64_t x = 0; x <= p; ++x) ASSERT_EQ(hs.tokens[size_t(x)], x);
      EXPECT_TRUE(hs.extra_bias.empty());
    }
  }
}

TEST(SelectorsBCtkvr, FifoUpdateKeepsCCentroidsAndReplacesTheOldest) {
  const Tiny& t = tiny();
  policies::ctkvr::CtkvrSelector sel(ctkvr_small({{"centroids", 8}}));
  sel.prefill(t.D);
  const int C = sel.centroids(), d = t.D.d, rho = sel.rho();
  ASSERT_EQ(C, 8);
  // prefill: the last 8 prompt query rows, oldest in slot 0
  const auto& h00 = sel.head(0, 0);
  EXPECT_EQ(h00.age[0], t.D.P - 8);
  EXPECT_EQ(h00.age[7], t.D.P - 1);
  const int64_t s0 = t.first_decode();
  for (int k = 0; k < 11; ++k) {
    const int64_t s = s0 + k;
    run_select(sel, t.D, s);
    for (int l = 0; l < t.D.layers; ++l)
      for (int h = 0; h < t.D.kv_heads; ++h) {
        const auto& hs = sel.head(l, h);
        const int G = int(t.D.group_of[size_t(h)].size());
        EXPECT_EQ(hs.centroids.size(), size_t(G) * C * d);
        EXPECT_EQ(hs.ivf.size(), size_t(C) * rho);
        EXPECT_EQ(hs.oldest, (k + 1) % C);
        const int slot = k % C;
        EXPECT_EQ(hs.age[size_t(slot)], t.D.position(s));
        for (int g = 0; g < G; ++g) {
          const float* q = t.D.q(l, t.D.group_of[size_t(h)][size_t(g)], s);
          for (int c = 0; c < d; ++c) ASSERT_EQ(hs.centroids[(size_t(g) * C + slot) * d + c], q[c]);
        }
        // the new list is the rerank's top rho over the recalled offloaded keys, best first
        const auto& rr = sel.last_reranked(l, h);
        const int32_t* row = hs.ivf.data() + int64_t(slot) * rho;
        for (int j = 0; j < rho; ++j) EXPECT_TRUE(std::binary_search(rr.begin(), rr.end(), row[j]));
        const auto& ch = sel.last_chosen(l, h);
        for (size_t j = 0; j < ch.size() && j < size_t(rho); ++j) EXPECT_EQ(row[j], ch[j]);
      }
  }
  // without the update the index never changes
  policies::ctkvr::CtkvrSelector fixed(ctkvr_small({{"centroids", 8}}), policies::ctkvr::CtkvrOptions{0, false});
  fixed.prefill(t.D);
  const auto before = fixed.head(1, 1).ivf;
  for (int k = 0; k < 5; ++k) run_select(fixed, t.D, s0 + k);
  EXPECT_EQ(fixed.head(1, 1).ivf, before);
}

TEST(SelectorsBCtkvr, InitAndLocalTokensAreAlwaysAttended) {
  const Tiny& t = tiny();
  policies::ctkvr::CtkvrSelector sel(ctkvr_small({{"init_tokens", 16}, {"local_tokens", 100}}));
  sel.prefill(t.D);
  for (int64_t s = t.first_decode(); s < t.D.S; s += 3) {
    const int64_t p = t.D.position(s);
    auto out = run_select(sel, t.D, s);
    for (const HeadSelection& hs : out) {
      EXPECT_TRUE(std::is_sorted(hs.tokens.begin(), hs.tokens.end()));
      EXPECT_EQ(std::adjacent_find(hs.tokens.begin(), hs.tokens.end()), hs.tokens.end());
      EXPECT_LE(hs.tokens.back(), p);
      for (int64_t x = 0; x < 16; ++x) EXPECT_TRUE(std::binary_search(hs.tokens.begin(), hs.tokens.end(), int32_t(x)));
      for (int64_t x = p - 99; x <= p; ++x)
        EXPECT_TRUE(std::binary_search(hs.tokens.begin(), hs.tokens.end(), int32_t(x))) << x;
      EXPECT_LE(int64_t(hs.tokens.size()), 16 + 100 + 128);
    }
  }
  const auto st = sel.statistics();
  EXPECT_NEAR(st.at("gpu_tokens").value, 116, 1e-9);
  EXPECT_TRUE(st.count("centroid_recall"));
  EXPECT_GT(st.at("offloaded_generated_tokens").value, 0);  // tiny generates 256 > 100 local tokens
}

// Observation 2 is a statistic: sampling it (observe_every) leaves every selection unchanged, and the
// sampled rows' statistic is measured on exactly those rows (a quarter of the samples).
TEST(SelectorsBCtkvr, SampledObservationChangesNoSelection) {
  const Tiny& t = tiny();
  policies::ctkvr::CtkvrSelector every(ctkvr_small(), policies::ctkvr::CtkvrOptions{1, true});
  policies::ctkvr::CtkvrSelector sampled(ctkvr_small(), policies::ctkvr::CtkvrOptions{4, true});
  every.prefill(t.D);
  sampled.prefill(t.D);
  int64_t rows = 0, observed = 0;
  for (int64_t s = t.first_decode(); s < t.D.S; ++s) {
    const auto a = run_select(every, t.D, s), b = run_select(sampled, t.D, s);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].tokens, b[i].tokens) << "row " << s << " pair " << i;
    ++rows;
    observed += s % 4 == 0;
  }
  const auto sa = every.statistics(), sb = sampled.statistics();
  ASSERT_TRUE(sa.count("centroid_recall") && sb.count("centroid_recall"));
  // The description says which rows were observed.
  EXPECT_NE(sa.at("centroid_recall").doc.find("(every row)"), std::string::npos) << sa.at("centroid_recall").doc;
  EXPECT_NE(sb.at("topk_recall").doc.find("(rows s % 4 == 0)"), std::string::npos) << sb.at("topk_recall").doc;
  const int64_t pairs = int64_t(t.D.layers) * t.D.kv_heads;
  EXPECT_EQ(sa.at("centroid_recall").samples, rows * pairs);
  EXPECT_EQ(sb.at("centroid_recall").samples, observed * pairs);
  EXPECT_NEAR(sb.at("centroid_recall").value, sa.at("centroid_recall").value, 0.1);
}

TEST(SelectorsBCtkvr, KeepsTheNeedleForRetrievalHeads) {
  const Tiny& t = tiny();
  const auto& needles = t.tr.needle_spans();
  ASSERT_EQ(needles.size(), 1u);
  const auto [nb, ne] = needles[0];
  policies::ctkvr::CtkvrSelector sel(ctkvr_small());
  sel.prefill(t.D);
  double kept = 0;
  int obs = 0;
  for (int64_t s = t.first_decode(); s < t.D.S; ++s) {
    auto out = run_select(sel, t.D, s);
    for (int l = 0; l < t.D.layers; ++l)
      for (int h = 0; h < t.D.kv_heads; ++h) {
        if (!t.tr.is_retrieval_head(t.tr.meta().layers[size_t(l)], t.tr.meta().kv_heads[size_t(h)])) continue;
        const auto& tok = out[size_t(l) * t.D.kv_heads + h].tokens;
        int in = 0;
        for (int64_t x = nb; x < ne; ++x) in += std::binary_search(tok.begin(), tok.end(), int32_t(x));
        kept += double(in) / double(ne - nb);
        ++obs;
      }
  }
  ASSERT_GT(obs, 0);
  EXPECT_GE(kept / obs, 0.8) << "mean fraction of needle tokens kept by retrieval heads";
  const auto st = sel.statistics();
  for (const auto& [k, v] : st) std::printf("ctkvr tiny: %s = %g (%lld)\n", k.c_str(), v.value, (long long)v.samples);
  EXPECT_GT(st.at("topk_recall").value, 0.3);
  EXPECT_GT(st.at("adjacent_query_cosine").value, 0.5);
}

}  // namespace
}  // namespace kvsim

namespace kvsim {
namespace {

double mean_rel_error(replay::TraceSelector& sel, const TraceData& D, int64_t s0, int64_t stride) {
  const int d = D.d;
  std::vector<float> o1(static_cast<size_t>(d)), o2(static_cast<size_t>(d));
  double err = 0;
  int n = 0;
  for (int64_t s = s0; s < D.S; s += stride) {
    const int64_t p = D.position(s);
    auto out = run_select(sel, D, s);
    for (int l = 0; l < D.layers; ++l)
      for (int h = 0; h < D.kv_heads; ++h)
        for (int qh : D.group_of[size_t(h)]) {
          selection_attention(D, l, h, qh, s, out[size_t(l) * D.kv_heads + h], o1.data());
          ref::decode_attention(D.q(l, qh, s), D.k(l, h), D.v(l, h), p + 1, d, 1.f / std::sqrt(float(d)), o2.data());
          double a = 0, b = 0;
          for (int c = 0; c < d; ++c) {
            a += (o1[size_t(c)] - o2[size_t(c)]) * (o1[size_t(c)] - o2[size_t(c)]);
            b += o2[size_t(c)] * o2[size_t(c)];
          }
          err += std::sqrt(a / b);
          ++n;
        }
  }
  return err / n;
}

TEST(SelectorsBSekv, ZoomingReducesTheOutputError) {
  const Tiny& t = tiny();
  const int64_t s0 = t.first_decode();
  policies::sekv::SekvSelector coarse(params("sekv", {{"local_window", 64}, {"budget_ratio", 0.01}, {"min_span", 8}}));
  coarse.prefill(t.D);
  policies::sekv::SekvSelector zoom(params("sekv", {{"local_window", 64}, {"budget_ratio", 0.6}, {"min_span", 8}}));
  zoom.prefill(t.D);
  const double e0 = mean_rel_error(coarse, t.D, s0, 16), e1 = mean_rel_error(zoom, t.D, s0, 16);
  std::printf("sekv tiny: output error coarse only %.4f, with zoom %.4f (zoom_rate %.3f)\n", e0, e1,
              zoom.statistics().at("zoom_rate").value);
  EXPECT_LT(e1, e0);
}

}  // namespace
}  // namespace kvsim
