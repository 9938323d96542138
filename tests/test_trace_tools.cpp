// The trace interface's own pieces: metadata validation, the structural profile on traces whose
// answer is known by construction, and slicing.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "traces/format/memory_trace.hpp"
#include "traces/format/profile.hpp"
#include "traces/format/slice.hpp"

namespace kvsim {
namespace {

// 2 layers, 4 query heads over 2 KV heads, d = 4, T = 64 tokens (P = 48), queries at the last 4
// prompt positions and every decode step.
std::pair<TraceMeta, TraceTokens> small_shape() {
  TraceMeta m;
  m.model = {"test", 2, 4, 2, 4, 10000.0, "fp32"};
  m.layers = {0, 1};
  m.kv_heads = {0, 1};
  m.query_heads = {0, 1, 2, 3};
  m.prompt_tokens = 48;
  m.sentence_starts = {0, 10, 30};
  TraceTokens t;
  t.token_ids.assign(64, 7);
  for (int64_t p = 44; p < 64; ++p) t.query_positions.push_back(p);
  t.entropy.assign(16, 1.0f);
  t.varentropy.assign(16, 0.5f);
  return {m, t};
}

std::string error_of(TraceMeta m, TraceTokens t) {
  try {
    validate_trace(m, t, "x.safetensors");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TraceMetaValidation, AcceptsAConsistentTraceAndNamesEachInconsistency) {
  auto [m, t] = small_shape();
  EXPECT_EQ(error_of(m, t), "");
  auto bad = m;
  bad.model.kv_heads = 3;
  EXPECT_NE(error_of(bad, t).find("does not divide heads"), std::string::npos);
  bad = m;
  bad.layers = {1, 0};
  EXPECT_NE(error_of(bad, t).find("kvsim_trace.layers[1]"), std::string::npos);
  bad = m;
  bad.kv_heads = {0};  // query heads 2, 3 read KV head 1
  EXPECT_NE(error_of(bad, t).find("which kv_heads does not store"), std::string::npos);
  bad = m;
  bad.sentence_starts = {5, 10};
  EXPECT_NE(error_of(bad, t).find("must be 0"), std::string::npos);
  bad = m;
  bad.prompt_tokens = 65;
  EXPECT_NE(error_of(bad, t).find("prompt_tokens"), std::string::npos);
  auto tt = t;
  tt.query_positions.push_back(64);
  EXPECT_NE(error_of(m, tt).find("query_positions[20]"), std::string::npos);
  tt = t;
  tt.entropy.pop_back();
  EXPECT_NE(error_of(m, tt).find("one per generated token"), std::string::npos);
  tt = t;
  tt.surprisal.assign(64, 0.0f);
  tt.surprisal[3] = std::nanf("");
  EXPECT_NE(error_of(m, tt).find("surprisal[3]"), std::string::npos);
}

TEST(TraceProfile, ZeroQueriesGiveUniformAttention) {
  auto [m, t] = small_shape();
  MemoryTrace tr(m, t, false);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h)
      for (int64_t x = 0; x < 64; ++x) tr.key_row(l, h, x)[0] = float(x % 5);
  const TraceProfile p = profile_trace(tr);  // queries are zero: every score is 0
  EXPECT_NEAR(p.entropy_ratio, 1.0, 1e-6);
  EXPECT_NEAR(p.sink_share, p.sink_share_uniform, 1e-9);
  EXPECT_TRUE(p.decode_queries);
  EXPECT_EQ(p.queries_sampled, 16);
  EXPECT_NEAR(p.mass90_fraction, 0.9, 0.03);
}

TEST(TraceProfile, AQueryAlignedWithTheFirstTokensFindsASinkAndLowEntropy) {
  auto [m, t] = small_shape();
  MemoryTrace tr(m, t, false);
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h)
      for (int64_t x = 0; x < 4; ++x) tr.key_row(l, h, x)[1] = 10.0f;  // sink tokens
    for (int q = 0; q < 4; ++q)
      for (int64_t s = 0; s < 20; ++s) {
        tr.query_row(l, q, s)[1] = 10.0f;  // scores 100 / sqrt(4) = 50 on sinks, 0 elsewhere
        tr.query_row(l, q, s)[2] = 0.01f * float(s);  // small drift: cosine below 1, falling with distance
      }
  }
  const TraceProfile p = profile_trace(tr);
  EXPECT_GT(p.sink_share, 0.999);
  EXPECT_LT(p.entropy_ratio, 0.45);  // mass spread over 4 of ~50..64 tokens: log 4 / log n
  ASSERT_GE(p.cosine.size(), 3u);
  EXPECT_EQ(p.cosine[0].distance, 1);
  EXPECT_EQ(p.cosine[0].pairs, 2 * 4 * 15);  // 2 layers x 4 heads x 15 decode pairs at distance 1
  EXPECT_GT(p.cosine[0].cosine, p.cosine[2].cosine);
  EXPECT_LE(p.cosine[0].cosine, 1.0 + 1e-6);
  EXPECT_EQ(p.cosine.back().pairs, 0);  // distance 256 > 16 decode steps
}

TEST(TraceSlice, KeepsTheChosenLayersHeadsAndStepsAndDropsUnattendedTokens) {
  auto [m, t] = small_shape();
  MemoryTrace tr(m, t, true);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h)
      for (int64_t x = 0; x < 64; ++x) tr.key_row(l, h, x)[0] = float(100 * l + 10 * h) + float(x) / 100;
  for (int l = 0; l < 2; ++l)
    for (int q = 0; q < 4; ++q)
      for (int64_t s = 0; s < 20; ++s) tr.query_row(l, q, s)[3] = float(1000 * l + 100 * q + s);
  SliceSpec spec;
  spec.layers = {1};
  spec.kv_heads = {1};
  parse_step_range("2:8", spec, "steps");
  SlicedTrace sl(tr, spec, "x");
  EXPECT_EQ(sl.meta().layers, std::vector<int>{1});
  EXPECT_EQ(sl.meta().query_heads, (std::vector<int>{2, 3}));
  EXPECT_EQ(sl.tokens().steps(), 6);
  EXPECT_EQ(sl.tokens().tokens(), 52);  // the last kept query is row 7, at position 44 + 7 = 51
  EXPECT_EQ(sl.meta().prompt_tokens, 48);
  EXPECT_EQ(sl.tokens().entropy.size(), 4u);
  float row[4];
  sl.keys(0, 0, 51, 52, row);
  EXPECT_FLOAT_EQ(row[0], 110.51f);
  sl.queries(0, 1, 0, 1, row);
  EXPECT_FLOAT_EQ(row[3], 1000 + 300 + 2);

  SliceSpec missing;
  missing.layers = {5};
  try {
    SlicedTrace bad(tr, missing, "x.safetensors");
    FAIL() << "slice of an unstored layer";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not stored in this trace; stored: 0, 1"), std::string::npos);
  }
  SliceSpec empty;
  parse_step_range("30:40", empty, "steps");
  EXPECT_THROW(SlicedTrace(tr, empty, "x"), InputError);
  EXPECT_EQ(parse_index_list("3,0-2,3", "layers"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_THROW(parse_index_list("1,x", "layers"), InputError);
  EXPECT_THROW(parse_index_list("5-2", "layers"), InputError);
}

}  // namespace
}  // namespace kvsim
