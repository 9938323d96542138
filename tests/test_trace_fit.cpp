// `kvsim trace fit` and what it needs from the generator: per-layer-group knobs (layer_groups) that
// leave configs without them byte-identical, their validation, the scaling rules, and the fit itself
// (round trip on a synthetic trace with known knobs, bad input, determinism).
#include <gtest/gtest.h>

#include <cstdint>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "test_util.hpp"
#include "traces/synthetic/synthetic.hpp"

using namespace kvsim;

namespace {

// FNV-1a over bytes: a fingerprint of generated floats.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
};

// Keys and values of the first 2048 and last 64 tokens, the first 256 and last 64 query rows, of every
// stored head, and the token ids: what a change to the generator could move.
uint64_t fingerprint(const SyntheticTrace& tr) {
  Fnv f;
  const int d = tr.head_dim();
  const int64_t T = tr.tokens_count(), S = tr.steps_count();
  const std::pair<int64_t, int64_t> ranges[] = {{0, std::min<int64_t>(T, 2048)}, {std::max<int64_t>(0, T - 64), T}};
  std::vector<float> buf;
  for (int ls = 0; ls < int(tr.meta().layers.size()); ++ls) {
    for (int hs = 0; hs < int(tr.meta().kv_heads.size()); ++hs)
      for (const auto& [a, b] : ranges) {
        buf.resize(size_t(b - a) * d);
        tr.keys(ls, hs, a, b, buf.data());
        f.add(buf.data(), buf.size() * sizeof(float));
        tr.values(ls, hs, a, b, buf.data());
        f.add(buf.data(), buf.size() * sizeof(float));
      }
    for (int qs = 0; qs < int(tr.meta().query_heads.size()); ++qs)
      for (const auto& [a, b] : {std::pair<int64_t, int64_t>{0, std::min<int64_t>(S, 256)}, {std::max<int64_t>(0, S - 64), S}}) {
        buf.resize(size_t(b - a) * d);
        tr.queries(ls, qs, a, b, buf.data());
        f.add(buf.data(), buf.size() * sizeof(float));
      }
  }
  const auto& ids = tr.tokens().token_ids;
  f.add(ids.data(), ids.size() * sizeof(ids[0]));
  return f.h;
}

}  // namespace

// The fingerprints were taken from the generator before layer_groups existed (commit ff27e29): a
// config without layer_groups must generate exactly the same floats.
TEST(SyntheticLayerGroups, PresetsWithoutGroupsAreByteIdentical) {
  const std::pair<const char*, uint64_t> expected[] = {
      {"tiny", 0xc46b3a0f2e8b46faull}, {"needle", 0x6e668cb63f927022ull},
      {"multidoc-qa", 0xef95108654b72324ull}, {"long-generation", 0x73a887319aae4295ull}};
  for (const auto& [name, want] : expected) {
    const SyntheticTrace tr(load_synthetic_config(name));
    const uint64_t got = fingerprint(tr);
    EXPECT_EQ(got, want) << name << ": 0x" << std::hex << got;
  }
}

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> keys_of(const SyntheticTrace& tr, int ls, int hs) {
  std::vector<float> k(size_t(tr.tokens_count()) * tr.head_dim());
  tr.keys(ls, hs, 0, tr.tokens_count(), k.data());
  return k;
}

}  // namespace

// A group's knobs reach its layers and only them; a group's retrieval fraction counts its own heads.
TEST(SyntheticLayerGroups, GroupKnobsApplyToTheirLayersOnly) {
  const SyntheticTrace base(load_synthetic_config("tiny"));
  const SyntheticTrace grouped(load_synthetic_config(
      "tiny", {{"layer_groups", "[{layers: [1, 1], key_noise: 3, query_noise: 2, retrieval_heads: 1}]"}}));
  EXPECT_EQ(keys_of(base, 0, 0), keys_of(grouped, 0, 0));  // layer 0: top-level knobs, same floats
  EXPECT_NE(keys_of(base, 1, 0), keys_of(grouped, 1, 0));
  EXPECT_TRUE(grouped.is_retrieval_head(1, 0));
  EXPECT_TRUE(grouped.is_retrieval_head(1, 1));
  // Layer 0 is the uncovered rest: round(0.5 x 2 heads) = 1 retrieval head.
  EXPECT_EQ(int(grouped.is_retrieval_head(0, 0)) + int(grouped.is_retrieval_head(0, 1)), 1);
  // Key noise 3 against 0.5: layer 1's keys spread much wider than the base's.
  auto rms = [](const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s / double(v.size()));
  };
  EXPECT_GT(rms(keys_of(grouped, 1, 0)), 2.0 * rms(keys_of(base, 1, 0)));
  // Determinism holds with groups.
  const SyntheticTrace again(grouped.config());
  EXPECT_EQ(keys_of(grouped, 1, 1), keys_of(again, 1, 1));
}

TEST(SyntheticLayerGroups, BadGroupsAreInputErrors) {
  auto err = [](const std::string& groups) {
    return error_of([&] { load_synthetic_config("tiny", {{"layer_groups", groups}}); });
  };
  EXPECT_NE(err("[{layers: [0, 2]}]").find("reaches past the model's last layer 1"), std::string::npos)
      << err("[{layers: [0, 2]}]");
  EXPECT_NE(err("[{layers: [0, 1]}, {layers: [1, 1]}]").find("layer 1 is already in layer_groups[0]"), std::string::npos);
  EXPECT_NE(err("[{layers: [1, 0]}]").find("is before first layer"), std::string::npos);
  const std::string typo = err("[{layers: [0, 1], sink_strenght: 3}]");
  EXPECT_NE(typo.find("sink_strenght"), std::string::npos) << typo;
  EXPECT_NE(typo.find("sink_strength"), std::string::npos) << typo;  // did you mean
  const std::string range = err("[{layers: [0, 1], weak_factor: 2}]");
  EXPECT_NE(range.find("layer_groups[0].weak_factor"), std::string::npos) << range;
  EXPECT_NE(range.find("0 .. 1"), std::string::npos) << range;
}

// A scaling rule moves its group's knob by slope x ln(T / reference) at the length asked for.
TEST(SyntheticLayerGroups, ScalingRulesFollowTheLength) {
  const std::string path = test::write_temp("scaled.yaml", R"(layers: 2
heads: 4
kv_heads: 2
prompt_tokens: 992
generated_tokens: 32
layer_groups:
  - {layers: [0, 1], sink_strength: 10, query_ar: 0.9}
scaling:
  reference_tokens: 1024
  rules:
    - {group: 0, knob: sink_strength, slope: 2, tokens: [512, 1024], values: [8.6, 10]}
    - {group: 0, knob: query_ar, slope: 0}
)");
  const SyntheticConfig at_ref = load_synthetic_config(path);
  EXPECT_DOUBLE_EQ(config_for_layer(at_ref, 0).sink_strength, 10.0);
  const SyntheticConfig at_4k = load_synthetic_config(path, {}, 4096);
  EXPECT_EQ(at_4k.prompt_tokens, 4096 - 32);
  EXPECT_NEAR(config_for_layer(at_4k, 1).sink_strength, 10.0 + 2.0 * std::log(4.0), 1e-12);
  EXPECT_DOUBLE_EQ(config_for_layer(at_4k, 1).query_ar, 0.9);
  EXPECT_NE(error_of([&] { load_synthetic_config(path, {}, 32); }).find("--tokens"), std::string::npos);
}
