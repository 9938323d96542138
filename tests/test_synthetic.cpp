// The synthetic trace generator (traces/synthetic/synthetic.hpp): determinism under any request order, the
// attention structure the seed papers observe (sinks, needles, self-similar decode queries, surprisal
// at sentence starts), exact RoPE, and strict config errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "core/error.hpp"
#include "test_util.hpp"
#include "traces/format/half.hpp"
#include "traces/synthetic/rope.hpp"
#include "traces/synthetic/synthetic.hpp"

using namespace kvsim;

namespace {

SyntheticConfig tiny(const std::vector<std::pair<std::string, std::string>>& overrides = {}) {
  return load_synthetic_config("tiny", overrides);
}

std::vector<float> all_keys(const TraceSource& tr, int ls, int hs) {
  std::vector<float> k(size_t(tr.tokens_count()) * tr.head_dim());
  tr.keys(ls, hs, 0, tr.tokens_count(), k.data());
  return k;
}

std::vector<float> all_queries(const TraceSource& tr, int ls, int qs) {
  std::vector<float> q(size_t(tr.steps_count()) * tr.head_dim());
  tr.queries(ls, qs, 0, tr.steps_count(), q.data());
  return q;
}

// softmax(q . k_t / sqrt(d)) over keys 0..p: the attention of the query at position p.
std::vector<double> attention(const float* q, const std::vector<float>& keys, int d, int64_t p) {
  std::vector<double> a(size_t(p + 1));
  double mx = -1e300;
  for (int64_t t = 0; t <= p; ++t) {
    double s = 0;
    for (int j = 0; j < d; ++j) s += double(q[j]) * keys[size_t(t) * d + j];
    a[size_t(t)] = s / std::sqrt(double(d));
    mx = std::max(mx, a[size_t(t)]);
  }
  double z = 0;
  for (auto& x : a) z += (x = std::exp(x - mx));
  for (auto& x : a) x /= z;
  return a;
}

double cosine(const float* a, const float* b, int d) {
  double ab = 0, aa = 0, bb = 0;
  for (int j = 0; j < d; ++j) ab += double(a[j]) * b[j], aa += double(a[j]) * a[j], bb += double(b[j]) * b[j];
  return ab / std::sqrt(aa * bb);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(SyntheticDeterminism, SameSeedSameBytesInAnyRangeAndOrder) {
  const SyntheticTrace a(tiny()), b(tiny());
  const int d = a.head_dim();
  const int64_t T = a.tokens_count(), S = a.steps_count();
  const std::vector<float> whole = all_keys(a, 1, 1);
  // The same rows, from a second instance, in three pieces asked for back to front.
  std::vector<float> pieces(whole.size());
  const int64_t cuts[] = {0, 37, 1000, T};
  for (int i = 2; i >= 0; --i) b.keys(1, 1, cuts[i], cuts[i + 1], pieces.data() + size_t(cuts[i]) * d);
  EXPECT_EQ(0, std::memcmp(whole.data(), pieces.data(), whole.size() * sizeof(float)));
  // One row in the middle of a RoPE block.
  std::vector<float> row(static_cast<size_t>(d));
  b.keys(1, 1, 1001, 1002, row.data());
  EXPECT_EQ(0, std::memcmp(row.data(), whole.data() + 1001 * d, size_t(d) * sizeof(float)));

  std::vector<float> v1(size_t(T) * d), v2(size_t(T) * d);
  a.values(0, 1, 0, T, v1.data());
  b.values(0, 1, 500, T, v2.data() + 500 * d);
  b.values(0, 1, 0, 500, v2.data());
  EXPECT_EQ(0, std::memcmp(v1.data(), v2.data(), v1.size() * sizeof(float)));

  const std::vector<float> q1 = all_queries(a, 1, 3);
  std::vector<float> q2(q1.size());
  b.queries(1, 3, 100, S, q2.data() + 100 * d);
  b.queries(1, 3, 0, 100, q2.data());
  EXPECT_EQ(0, std::memcmp(q1.data(), q2.data(), q1.size() * sizeof(float)));
  EXPECT_EQ(a.tokens().token_ids, b.tokens().token_ids);
  EXPECT_EQ(a.meta().sentence_starts, b.meta().sentence_starts);

  // Another seed: different numbers and text.
  const SyntheticTrace c(tiny({{"seed", "8"}}));
  EXPECT_NE(0, std::memcmp(whole.data(), all_keys(c, 1, 1).data(), whole.size() * sizeof(float)));
  EXPECT_NE(a.meta().sentence_starts, c.meta().sentence_starts);
}

TEST(SyntheticDeterminism, HalfPrecisionStorageRoundsEveryFloat) {
  const SyntheticTrace tr(tiny({{"dtype", "bf16"}}));
  EXPECT_EQ(tr.storage_dtype(), DType::bf16);
  const std::vector<float> k = all_keys(tr, 0, 0);
  for (float x : k) ASSERT_EQ(std::bit_cast<uint32_t>(x) & 0xffffu, 0u) << "not a bf16 value: " << x;
  const SyntheticTrace h(tiny({{"dtype", "fp16"}}));
  const std::vector<float> q = all_queries(h, 0, 0);
  for (float x : q) ASSERT_EQ(fp16_to_float(float_to_fp16(x)), x);
}

// CTKVR Observation 1: adjacent decode queries are similar, and similarity decays with distance.
TEST(SyntheticQueries, AdjacentQuerySimilarityDecaysWithDistance) {
  const SyntheticTrace tr(tiny({{"needles", "[]"}, {"generated_tokens", "512"}}));
  const int d = tr.head_dim();
  const int64_t first = tr.config().obs_window, S = tr.steps_count();  // decode steps
  double mean[3] = {0, 0, 0};
  const int dist[3] = {1, 8, 64};
  int heads = 0;
  for (int l = 0; l < int(tr.meta().layers.size()); ++l)
    for (int h = 0; h < int(tr.meta().query_heads.size()); ++h, ++heads) {
      const std::vector<float> q = all_queries(tr, l, h);
      for (int k = 0; k < 3; ++k) {
        double sum = 0;
        int n = 0;
        for (int64_t s = first; s + dist[k] < S; ++s, ++n)
          sum += cosine(&q[size_t(s) * d], &q[size_t(s + dist[k]) * d], d);
        mean[k] += sum / n;
      }
    }
  for (double& m : mean) m /= heads;
  RecordProperty("cos_1", std::to_string(mean[0]));
  RecordProperty("cos_8", std::to_string(mean[1]));
  RecordProperty("cos_64", std::to_string(mean[2]));
  EXPECT_GT(mean[0], 0.8) << "adjacent queries should be very similar";
  EXPECT_GT(mean[0], mean[1] + 0.02);
  EXPECT_GT(mean[1], mean[2] + 0.02);
}

TEST(SyntheticAttention, SinkTokensReceiveTheLargestShare) {
  const SyntheticTrace tr(tiny({{"needles", "[]"}}));
  const int d = tr.head_dim(), sinks = tr.config().sink_tokens;
  const int64_t T = tr.tokens_count();
  std::vector<double> share(size_t(T), 0.0);  // attention summed over heads and queries
  int queries = 0;
  for (int l = 0; l < int(tr.meta().layers.size()); ++l)
    for (int h = 0; h < int(tr.meta().query_heads.size()); ++h) {
      const std::vector<float> keys = all_keys(tr, l, tr.kv_slot_of_query(h));
      const std::vector<float> q = all_queries(tr, l, h);
      for (int64_t s = tr.config().obs_window; s < tr.steps_count(); s += 8, ++queries) {
        const int64_t p = tr.tokens().query_positions[size_t(s)];
        const std::vector<double> a = attention(&q[size_t(s) * d], keys, d, p);
        for (int64_t t = 0; t <= p; ++t) share[size_t(t)] += a[size_t(t)];
      }
    }
  for (auto& x : share) x /= queries;
  const double sink_total = std::accumulate(share.begin(), share.begin() + sinks, 0.0);
  const double rest_total = std::accumulate(share.begin() + sinks, share.end(), 0.0);
  const double ratio = (sink_total / sinks) / (rest_total / double(T - sinks));
  RecordProperty("sink_share", std::to_string(sink_total));
  EXPECT_GT(ratio, 100.0) << "a sink token should get far more attention than an average token";
  // No other group of `sinks` tokens — not even the most attended ones — gets as much.
  std::vector<double> others(share.begin() + sinks, share.end());
  std::partial_sort(others.begin(), others.begin() + sinks, others.end(), std::greater<>());
  EXPECT_GT(sink_total, std::accumulate(others.begin(), others.begin() + sinks, 0.0));
}

// Head diversity: local heads (StreamingLLM's pattern) spend their attention on sinks and the recent
// window; retrieval heads on tokens of the topic the query is about.
TEST(SyntheticAttention, LocalHeadsLookNearRetrievalHeadsLookForTheirTopic) {
  const SyntheticTrace tr(tiny({{"needles", "[]"}}));
  const int d = tr.head_dim(), sinks = tr.config().sink_tokens;
  const int64_t window = int64_t(tr.config().recency_window);
  double local_near = 0, local_topic = 0, local_far = 0, retr_near = 0, retr_topic = 0, retr_far = 0;
  int nl = 0, nr = 0;
  for (int l = 0; l < int(tr.meta().layers.size()); ++l)
    for (int h = 0; h < int(tr.meta().query_heads.size()); ++h) {
      const int kv = tr.kv_slot_of_query(h);
      const bool retrieval = tr.is_retrieval_head(tr.meta().layers[size_t(l)], tr.meta().kv_heads[size_t(kv)]);
      const std::vector<float> keys = all_keys(tr, l, kv);
      const std::vector<float> q = all_queries(tr, l, h);
      for (int64_t s = tr.config().obs_window; s < tr.steps_count(); s += 8) {
        const int64_t p = tr.tokens().query_positions[size_t(s)];
        const std::vector<double> a = attention(&q[size_t(s) * d], keys, d, p);
        double near = std::accumulate(a.begin(), a.begin() + sinks, 0.0) +
                      std::accumulate(a.end() - window, a.end(), 0.0);
        double topic = 0, far = 0;  // tokens of the query's topic; those outside the recent window
        for (int64_t t = sinks; t <= p; ++t)
          if (tr.token_topics()[size_t(t)] == tr.token_topics()[size_t(p)]) {
            topic += a[size_t(t)];
            if (t <= p - window) far += a[size_t(t)];
          }
        (retrieval ? retr_near : local_near) += near;
        (retrieval ? retr_topic : local_topic) += topic;
        (retrieval ? retr_far : local_far) += far;
        ++(retrieval ? nr : nl);
      }
    }
  ASSERT_GT(nl, 0);
  ASSERT_GT(nr, 0);
  EXPECT_GT(local_near / nl, 0.7) << "local heads: sinks + last recency_window tokens";
  EXPECT_GT(retr_topic / nr, 0.6) << "retrieval heads: tokens of the query's topic";
  EXPECT_GT(retr_far / nr, 2 * local_far / nl) << "retrieval heads find the topic beyond the window";
  EXPECT_LT(retr_near / nr, local_near / nl);
}

// Needle in a haystack: in retrieval heads, the needle carries most of each decode query's attention.
TEST(SyntheticAttention, NeedleCarriesMostAttentionInRetrievalHeads) {
  for (const auto& [preset, overrides] :
       std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>{
           {"tiny", {}}, {"needle", {{"prompt_tokens", "8192"}, {"generated_tokens", "16"}, {"store_layers", "[15]"}}}}) {
    SCOPED_TRACE(preset);
    const SyntheticTrace tr(load_synthetic_config(preset, overrides));
    const int d = tr.head_dim();
    const auto [n0, n1] = tr.needle_spans().at(0);
    double retrieval_mass = 0, local_mass = 0;
    int retrieval_n = 0, local_n = 0, below_half = 0;
    for (int l = 0; l < int(tr.meta().layers.size()); ++l)
      for (int h = 0; h < int(tr.meta().query_heads.size()); ++h) {
        const int kv = tr.kv_slot_of_query(h);
        const bool retrieval = tr.is_retrieval_head(tr.meta().layers[size_t(l)], tr.meta().kv_heads[size_t(kv)]);
        if (!retrieval && local_n > 64) continue;  // a sample of local heads is enough for the comparison
        const std::vector<float> keys = all_keys(tr, l, kv);
        const std::vector<float> q = all_queries(tr, l, h);
        for (int64_t s = tr.config().obs_window; s < tr.steps_count(); s += 4) {
          const int64_t p = tr.tokens().query_positions[size_t(s)];
          const std::vector<double> a = attention(&q[size_t(s) * d], keys, d, p);
          const double m = std::accumulate(a.begin() + n0, a.begin() + n1, 0.0);
          if (retrieval) {
            retrieval_mass += m, ++retrieval_n, below_half += m < 0.5;
          } else {
            local_mass += m, ++local_n;
          }
        }
      }
    ASSERT_GT(retrieval_n, 0) << "no retrieval head stored";
    retrieval_mass /= retrieval_n;
    RecordProperty(preset + "_needle_mass", std::to_string(retrieval_mass));
    EXPECT_GT(retrieval_mass, 0.5);
    EXPECT_LT(below_half, retrieval_n / 10 + 1) << "most single queries should find the needle too";
    if (local_n > 0) {
      EXPECT_LT(local_mass / local_n, 0.1) << "local heads do not retrieve";
    }
  }
}

TEST(SyntheticText, SentencesTokensAndSurprisal) {
  const SyntheticTrace tr(tiny());
  EXPECT_NO_THROW(validate_trace(tr.meta(), tr.tokens(), "synthetic"));
  const auto& starts = tr.meta().sentence_starts;
  const auto& tk = tr.tokens();
  const int64_t T = tk.tokens();
  ASSERT_GT(starts.size(), 50u);
  std::vector<char> is_start(size_t(T), 0);
  for (int64_t s : starts) is_start[size_t(s)] = 1;
  // Every sentence ends with "." (id 13), and only sentence ends do.
  for (int64_t t = 1; t < T; ++t) EXPECT_EQ(tk.token_ids[size_t(t)] == 13, t + 1 == T || is_start[size_t(t + 1)]) << t;
  // The prompt ends a sentence: generation starts a new one.
  EXPECT_TRUE(is_start[size_t(tr.meta().prompt_tokens)]);
  // Surprisal is high at sentence starts and low inside: SEKV's mu + alpha sigma rule recovers them.
  double mu = 0, var = 0, at_start = 0, inside = 0;
  for (int64_t t = 1; t < T; ++t) mu += tk.surprisal[size_t(t)];
  mu /= double(T - 1);
  for (int64_t t = 1; t < T; ++t) var += std::pow(tk.surprisal[size_t(t)] - mu, 2);
  const double sigma = std::sqrt(var / double(T - 1));
  int flagged = 0, flagged_starts = 0;
  for (int64_t t = 1; t < T; ++t) {
    const bool flag = tk.surprisal[size_t(t)] > mu + 1.5 * sigma;
    flagged += flag;
    flagged_starts += flag && is_start[size_t(t)];
    (is_start[size_t(t)] ? at_start : inside) += tk.surprisal[size_t(t)];
  }
  at_start /= double(starts.size() - 1);
  inside /= double(T - int64_t(starts.size()));
  EXPECT_GT(at_start, 3 * inside);
  EXPECT_GT(double(flagged_starts) / flagged, 0.85) << "precision of the boundary rule";
  EXPECT_GT(double(flagged_starts) / double(starts.size() - 1), 0.8) << "recall of the boundary rule";
  // Entropy spikes where the generated text changes topic (CHESS reselects there).
  const auto& topic = tr.token_topics();
  double spike = 0, calm = 0;
  int ns = 0, nc = 0;
  for (int64_t i = 0; i < int64_t(tk.entropy.size()); ++i) {
    const int64_t t = tr.meta().prompt_tokens + i;
    if (is_start[size_t(t)] && topic[size_t(t)] != topic[size_t(t - 1)]) spike += tk.entropy[size_t(i)], ++ns;
    else if (!is_start[size_t(t)]) calm += tk.entropy[size_t(i)], ++nc;
  }
  ASSERT_GT(ns, 0) << "no topic change in the generation";
  EXPECT_GT(spike / ns, 4 * (calm / nc));
  // Query positions: the question window, then every decode position.
  EXPECT_EQ(tk.query_positions.front(), tr.meta().prompt_tokens - tr.config().obs_window);
  EXPECT_EQ(tk.query_positions.back(), T - 1);
  // The needle is its own topic.
  const auto [n0, n1] = tr.needle_spans().at(0);
  EXPECT_TRUE(is_start[size_t(n0)]);
  for (int64_t t = n0; t < n1; ++t) EXPECT_EQ(topic[size_t(t)], tr.config().topics);
}

TEST(SyntheticRope, DotProductDependsOnlyOnRelativePosition) {
  std::mt19937 g(5);
  std::normal_distribution<float> nd;
  const int d = 128;
  std::vector<float> q(d), k(d);
  for (auto& x : q) x = nd(g);
  for (auto& x : k) x = nd(g);
  auto dot_at = [&](int64_t p, int64_t s) {
    std::vector<float> a = q, b = k;
    rope_rotate(a.data(), d, p, 500000);
    rope_rotate(b.data(), d, s, 500000);
    double r = 0;
    for (int j = 0; j < d; ++j) r += double(a[size_t(j)]) * b[size_t(j)];
    return r;
  };
  for (int64_t shift : {1, 1000, 100000}) EXPECT_NEAR(dot_at(700, 650), dot_at(700 + shift, 650 + shift), 1e-3);
  EXPECT_GT(std::fabs(dot_at(700, 650) - dot_at(700, 600)), 1e-2) << "a different distance gives a different dot";
  // Rotate-half pairs i and i + d/2; pair 0 turns by exactly 1 rad per position.
  std::vector<float> e(d, 0.0f);
  e[0] = 1;
  rope_rotate(e.data(), d, 1, 10000);
  EXPECT_NEAR(e[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(e[size_t(d / 2)], std::sin(1.0), 1e-6);
}

TEST(SyntheticRope, TraceKeysAndQueriesAreExactRotationsOfPreRopeVectors) {
  const SyntheticTrace tr(tiny());
  const int d = tr.head_dim();
  const int64_t t0 = 1900, t1 = 1990;  // across a RoPE table block boundary (1920)
  std::vector<float> pre(size_t(t1 - t0) * d), post(pre.size());
  tr.pre_rope_keys(1, 0, t0, t1, pre.data());
  tr.keys(1, 0, t0, t1, post.data());
  for (int64_t t = t0; t < t1; ++t) {
    float* r = &pre[size_t(t - t0) * d];
    rope_rotate(r, d, t, tr.meta().model.rope_theta);
    for (int j = 0; j < d; ++j) ASSERT_NEAR(r[j], post[size_t(t - t0) * d + j], 1e-4) << t << " " << j;
  }
  const int64_t S = tr.steps_count();
  std::vector<float> qp(size_t(S) * d), qr(size_t(S) * d);
  tr.pre_rope_queries(0, 2, 0, S, qp.data());
  tr.queries(0, 2, 0, S, qr.data());
  for (int64_t s = 0; s < S; s += 17) {
    float* r = &qp[size_t(s) * d];
    rope_rotate(r, d, tr.tokens().query_positions[size_t(s)], tr.meta().model.rope_theta);
    for (int j = 0; j < d; ++j) ASSERT_NEAR(r[j], qr[size_t(s) * d + j], 1e-4);
  }
}

TEST(SyntheticHeads, RetrievalHeadCountAndGqaSimilarity) {
  const SyntheticTrace tr(tiny());
  int retrieval = 0;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) retrieval += tr.is_retrieval_head(l, h);
  EXPECT_EQ(retrieval, 2);  // retrieval_heads: 0.5 of 4 pairs
  // Query heads of one group look for the same things: their decode queries are closer to each other
  // than to the other group's.
  const int d = tr.head_dim();
  const std::vector<float> a = all_queries(tr, 0, 0), b = all_queries(tr, 0, 1), c = all_queries(tr, 0, 2);
  double same = 0, other = 0;
  for (int64_t s = 0; s < tr.steps_count(); ++s) {
    same += cosine(&a[size_t(s) * d], &b[size_t(s) * d], d);
    other += cosine(&a[size_t(s) * d], &c[size_t(s) * d], d);
  }
  EXPECT_GT(same, other);
}

TEST(SyntheticConfig, EveryPresetLoadsAndBuilds) {
  const auto names = library_names(LibraryKind::trace);
  for (const char* n : {"tiny", "needle", "multidoc-qa", "long-generation"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << "missing preset " << n;
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const SyntheticTrace tr(load_synthetic_config(n));
    EXPECT_EQ(tr.tokens_count(), tr.config().prompt_tokens + tr.config().generated_tokens);
  }
  // Each preset has its situation: the needle halfway in; the generation drifting about every
  // drift_steps tokens.
  const SyntheticTrace needle(load_synthetic_config("needle"));
  EXPECT_NEAR(double(needle.needle_spans().at(0).first) / needle.config().prompt_tokens, 0.5, 0.01);
  const SyntheticTrace longgen(load_synthetic_config("long-generation"));
  int changes = 0;
  for (int64_t t = longgen.config().prompt_tokens + 1; t < longgen.tokens_count(); ++t)
    changes += longgen.token_topics()[size_t(t)] != longgen.token_topics()[size_t(t - 1)];
  const double expected = double(longgen.config().generated_tokens) / longgen.config().drift_steps;
  EXPECT_GT(changes, 0.5 * expected);
  EXPECT_LT(changes, 2.0 * expected);
  // `model: NAME` takes the shape from the model library.
  const SyntheticConfig c = load_synthetic_config("needle");
  const ModelConfig m = test::model("llama-3.1-8b");
  EXPECT_EQ(c.heads, m.query_heads);
  EXPECT_EQ(c.kv_heads, m.kv_heads);
  EXPECT_EQ(c.head_dim, m.head_dim);
  EXPECT_EQ(c.rope_theta, m.rope_theta);
  // Overrides: explicit numbers win over the model; a model override replaces the explicit shape.
  EXPECT_EQ(load_synthetic_config("needle", {{"layers", "4"}, {"store_layers", "all"}}).layers, 4);
  EXPECT_EQ(tiny({{"model", "llama-3.1-8b"}}).head_dim, 128);
  const SyntheticConfig n2 = tiny({{"needles", "[{depth: 0.25, length: 16}, {depth: 0.75, length: 8}]"}});
  ASSERT_EQ(n2.needles.size(), 2u);
  EXPECT_EQ(n2.needles[1].length, 8);
}

TEST(SyntheticConfig, ErrorsNameFileLineAndField) {
  const std::string bad_key = test::write_temp("synthetic_bad_key.yaml", "prompt_tokens: 100\ntopic_strenght: 3\n");
  std::string e = error_of([&] { load_synthetic_config(bad_key); });
  EXPECT_NE(e.find(bad_key + ":2: topic_strenght: unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'topic_strength'"), std::string::npos) << e;

  const std::string bad_range = test::write_temp("synthetic_bad_range.yaml", "seed: 1\n\nretrieval_heads: 1.5\n");
  e = error_of([&] { load_synthetic_config(bad_range); });
  EXPECT_NE(e.find(bad_range + ":3: retrieval_heads: value 1.5 is out of range; allowed: 0 .. 1"), std::string::npos) << e;

  const std::string bad_needle = test::write_temp("synthetic_bad_needle.yaml", "needles:\n  - {depth: 0.5, lenght: 3}\n");
  e = error_of([&] { load_synthetic_config(bad_needle); });
  EXPECT_NE(e.find(bad_needle + ":2: needles[0].lenght: unknown key (did you mean 'length'?)"), std::string::npos) << e;

  e = error_of([&] { load_synthetic_config("nedle"); });
  EXPECT_NE(e.find("unknown trace preset 'nedle' (did you mean 'needle'?)"), std::string::npos) << e;
  EXPECT_NE(e.find("multidoc-qa"), std::string::npos) << "lists the known presets: " << e;

  e = error_of([&] { tiny({{"topcis", "3"}}); });
  EXPECT_NE(e.find("command line: topcis: unknown key (did you mean 'topics'?)"), std::string::npos) << e;
  e = error_of([&] { tiny({{"query_ar", "2"}}); });
  EXPECT_NE(e.find("command line: query_ar: value 2 is out of range"), std::string::npos) << e;
  e = error_of([&] { tiny({{"model", "lama-3.1-8b"}}); });
  EXPECT_NE(e.find("command line: model: unknown model 'lama-3.1-8b'"), std::string::npos) << e;
  // Cross-field: the window cannot exceed the prompt.
  e = error_of([&] { tiny({{"obs_window", "5000"}}); });
  EXPECT_NE(e.find("obs_window: value 5000 exceeds prompt_tokens (1792)"), std::string::npos) << e;
  e = error_of([&] { tiny({{"needles", "[{depth: 0.5, length: 1790}]"}}); });
  EXPECT_NE(e.find("needles: total needle length 1790 does not fit"), std::string::npos) << e;
  e = error_of([&] { tiny({{"content_pairs", "31"}}); });
  EXPECT_NE(e.find("content_pairs: content_pairs (31) + recency_pairs (0) + 1 sink pair exceed head_dim / 2 = 32"),
            std::string::npos) << e;
}

// recency_decay: the RoPE-pair recency kernel oscillates instead of fading far away (docs/synthetic-traces.md,
// "recency_decay"), so old tokens and sinks got a length-dependent boost. With the knob, keys more than
// 8 windows before the first query carry no recency at all, keys within 4 windows keep all of it.
TEST(SyntheticRecency, DecayRemovesTheKernelsFarTailOnly) {
  const int64_t q0 = 1792 - 32, full = q0 - 4 * 32, none = q0 - 8 * 32;  // tiny: P, obs_window, window
  const SyntheticTrace zero(tiny({{"recency_strength", "0"}}));
  const int d = zero.head_dim();
  const int64_t T = zero.tokens_count();
  const std::vector<float> k0 = all_keys(zero, 0, 0);
  // The recency logit of the last decode query (position T - 1) for every key: its dot product with the
  // keys' recency component alone, relative to its value at distance 0.
  auto far_tail = [&](bool decay) {
    const SyntheticTrace tr(tiny({{"recency_decay", decay ? "true" : "false"}}));
    const std::vector<float> k = all_keys(tr, 0, 0);
    const std::vector<float> qr = all_queries(tr, 0, 0);
    const float* qp = &qr[size_t(tr.steps_count() - 1) * d];
    auto logit = [&](int64_t t) {
      double s = 0;
      for (int j = 0; j < d; ++j) s += double(qp[j]) * (double(k[size_t(t) * d + j]) - double(k0[size_t(t) * d + j]));
      return s;
    };
    double far = 0;
    for (int64_t t = 0; t <= none; ++t) far = std::max(far, std::abs(logit(t)));
    return far / logit(T - 1);
  };
  const double off = far_tail(false), on = far_tail(true);
  RecordProperty("far_tail_off", std::to_string(off));
  EXPECT_GT(off, 0.1) << "without the knob the kernel's far tail is not small (the reason for the knob)";
  EXPECT_EQ(on, 0.0);
  // Near the queries the keys are exactly those without the knob; far away exactly those without recency.
  const SyntheticTrace on_tr(tiny({{"recency_decay", "true"}})), off_tr(tiny());
  const std::vector<float> kon = all_keys(on_tr, 0, 0), koff = all_keys(off_tr, 0, 0);
  for (int64_t t = full; t < T; ++t)
    ASSERT_EQ(std::memcmp(&kon[size_t(t) * d], &koff[size_t(t) * d], sizeof(float) * d), 0) << t;
  for (int64_t t = 0; t <= none; ++t)
    ASSERT_EQ(std::memcmp(&kon[size_t(t) * d], &k0[size_t(t) * d], sizeof(float) * d), 0) << t;
}

// sink_topic: false: the sink tokens carry no topic component (docs/synthetic-traces.md, "sink_topic"), so a
// query on the first sentence's topic does not boost the sinks too. Their keys are exactly those of a trace
// without topics; every other token's key is exactly the default one.
TEST(SyntheticAttention, SinksWithoutTopicCarryOnlyTheSink) {
  const SyntheticTrace plain(tiny()), no_topic(tiny({{"topic_strength", "0"}})),
      off(tiny({{"sink_topic", "false"}}));
  const int d = plain.head_dim(), sinks = plain.config().sink_tokens;
  ASSERT_GT(sinks, 0);
  for (int hs = 0; hs < 2; ++hs) {
    const std::vector<float> kp = all_keys(plain, 0, hs), kn = all_keys(no_topic, 0, hs), ko = all_keys(off, 0, hs);
    const size_t sink_floats = size_t(sinks) * size_t(d);
    EXPECT_EQ(std::memcmp(ko.data(), kn.data(), sizeof(float) * sink_floats), 0);
    EXPECT_NE(std::memcmp(kp.data(), kn.data(), sizeof(float) * sink_floats), 0) << "the default sinks carry a topic";
    EXPECT_EQ(std::memcmp(ko.data() + sink_floats, kp.data() + sink_floats, sizeof(float) * (kp.size() - sink_floats)), 0);
  }
}
