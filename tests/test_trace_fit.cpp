// `kvsim trace fit` and what it needs from the generator: per-layer-group knobs (layer_groups) that
// leave configs without them byte-identical, their validation, the scaling rules, and the fit itself
// (round trip on a synthetic trace with known knobs, bad input, determinism).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "test_util.hpp"
#include "traces/format/memory_trace.hpp"
#include "traces/synthetic/fit.hpp"
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
  - {layers: [0, 1], sink_strength: 10, query_ar: 0.9, recency_window: 20}
scaling:
  reference_tokens: 1024
  rules:
    - {group: 0, knob: sink_strength, slope: 2, tokens: [512, 1024], values: [8.6, 10]}
    - {group: 0, knob: query_ar, slope: 0}
    - {group: 0, knob: recency_window, slope: 0.5}
    - {group: 0, knob: weak_factor, slope: 1}
)");
  const SyntheticConfig at_ref = load_synthetic_config(path);
  EXPECT_DOUBLE_EQ(config_for_layer(at_ref, 0).sink_strength, 10.0);
  const SyntheticConfig at_4k = load_synthetic_config(path, {}, 4096);
  EXPECT_EQ(at_4k.prompt_tokens, 4096 - 32);
  EXPECT_NEAR(config_for_layer(at_4k, 1).sink_strength, 10.0 + 2.0 * std::log(4.0), 1e-12);
  EXPECT_DOUBLE_EQ(config_for_layer(at_4k, 1).query_ar, 0.9);
  // A window follows a power law: 20 x 4^0.5. A rule for a knob the group does not set scales the
  // top-level value it inherits (0.25 + ln 4 = 1.64), clamped to the knob's range (0 .. 1).
  EXPECT_NEAR(config_for_layer(at_4k, 0).recency_window, 40.0, 1e-9);
  EXPECT_DOUBLE_EQ(config_for_layer(at_4k, 0).weak_factor, 1.0);
  EXPECT_DOUBLE_EQ(config_for_layer(at_ref, 0).weak_factor, 0.25);
  EXPECT_NE(error_of([&] { load_synthetic_config(path, {}, 32); }).find("--tokens"), std::string::npos);
}

// ------------------------------------------------------------------------------------------------
// The fit

namespace {

// A small trace with known per-group knobs: 4 layers, 2 KV heads (4 query heads), d = 64, 1024 tokens.
SyntheticConfig fit_source(int64_t prompt = 960, int64_t generated = 64) {
  SyntheticConfig c = load_synthetic_config(
      "tiny", {{"needles", "[]"}, {"layers", "4"}, {"seed", "11"}, {"topics", "16"}, {"topic_stickiness", "0.3"}});
  c.prompt_tokens = prompt;
  c.generated_tokens = generated;
  c.layer_groups = {
      {0, 1, {{"retrieval_heads", 0.5}, {"sink_strength", 4}, {"recency_strength", 7}, {"query_noise", 0.6},
              {"query_ar", 0.9}, {"key_noise", 0.8}}},
      {2, 3, {{"retrieval_heads", 0.0}, {"sink_strength", 9}, {"recency_strength", 5}, {"query_noise", 0.3},
              {"query_ar", 0.97}, {"key_noise", 0.5}}},
  };
  validate_synthetic_config(c, "test");
  return c;
}

double knob(const SyntheticConfig& c, int group, const std::string& name) {
  for (const auto& [k, v] : c.layer_groups.at(size_t(group)).knobs)
    if (k == name) return v;
  return std::nan("");
}

const FitStat& stat(const TraceFitResult& r, const std::string& name) {
  for (const FitStat& s : r.residuals)
    if (s.name == name) return s;
  throw std::runtime_error("no statistic " + name);
}

// The same data in memory, to corrupt.
std::unique_ptr<MemoryTrace> copy_of(const TraceSource& t) {
  auto m = std::make_unique<MemoryTrace>(t.meta(), t.tokens(), t.has_values());
  const int d = t.head_dim();
  std::vector<float> buf;
  for (int l = 0; l < int(t.meta().layers.size()); ++l) {
    for (int h = 0; h < int(t.meta().kv_heads.size()); ++h) {
      buf.resize(size_t(t.tokens_count()) * d);
      t.keys(l, h, 0, t.tokens_count(), buf.data());
      for (int64_t i = 0; i < t.tokens_count(); ++i) std::copy_n(&buf[size_t(i) * d], d, m->key_row(l, h, i));
      t.values(l, h, 0, t.tokens_count(), buf.data());
      for (int64_t i = 0; i < t.tokens_count(); ++i) std::copy_n(&buf[size_t(i) * d], d, m->value_row(l, h, i));
    }
    for (int q = 0; q < int(t.meta().query_heads.size()); ++q) {
      buf.resize(size_t(t.steps_count()) * d);
      t.queries(l, q, 0, t.steps_count(), buf.data());
      for (int64_t s = 0; s < t.steps_count(); ++s) std::copy_n(&buf[size_t(s) * d], d, m->query_row(l, q, s));
    }
  }
  return m;
}

}  // namespace

// Round trip: a trace generated with known group knobs, fitted with the same groups. The fitted trace's
// statistics come within 15% of the source's (m90: 30%, a few percent of the context), the classified
// retrieval shares are the generated ones, the value knobs come back within 15% and the noisier
// group's query noise comes back larger. Fitting twice gives the same YAML byte for byte.
TEST(TraceFit, RoundTripRecoversStatisticsAndKnobs) {
  const SyntheticTrace src(fit_source());
  FitOptions o;
  o.seed = 5;  // not the source's seed: the fit must not rely on drawing the same noise
  const TraceFitResult r = fit_trace(src, "source", o, {{0, 1}, {2, 3}});
  ASSERT_EQ(r.groups.size(), 2u);
  EXPECT_EQ(r.groups[0].first, 0);
  EXPECT_EQ(r.groups[1].last, 3);
  for (const char* s : {"recent_share", "cos1", "cos8", "cos32", "sink_share"})
    EXPECT_LT(std::abs(stat(r, s).relative_error()), 0.15) << s << ": real " << stat(r, s).real << " fitted " << stat(r, s).fitted;
  EXPECT_LT(std::abs(stat(r, "mass90").relative_error()), 0.30) << stat(r, "mass90").real << " " << stat(r, "mass90").fitted;
  EXPECT_LT(std::abs(stat(r, "value_rms").relative_error()), 0.05);
  // Group 1 has no retrieval heads: the rule finds none. Group 0 has 2 of 4.
  EXPECT_DOUBLE_EQ(knob(r.config, 1, "retrieval_heads"), 0.0);
  EXPECT_DOUBLE_EQ(knob(r.config, 0, "retrieval_heads"), 0.5);
  // Group 0's queries are noisier (query_noise 0.6 against 0.3), and the fit says so. (Strengths are
  // recovered less well: once sinks take 90% of a head's attention, 9 and 14 nats look alike.)
  EXPECT_GT(knob(r.config, 0, "query_noise"), knob(r.config, 1, "query_noise") + 0.15);
  // Values: value_noise 1 and value_topic 1 at top level, recovered in closed form.
  EXPECT_NEAR(knob(r.config, 0, "value_noise"), 1.0, 0.15);
  EXPECT_NEAR(knob(r.config, 0, "value_topic"), 1.0, 0.15);

  // The YAML loads, generates the real trace's shape, and is deterministic.
  const std::string yaml = fit_yaml({r}, o);
  const std::string path = test::write_temp("fitted.yaml", yaml);
  const SyntheticConfig back = load_synthetic_config(path);
  EXPECT_EQ(back.layers, 4);
  EXPECT_EQ(back.prompt_tokens + back.generated_tokens, src.tokens_count());
  EXPECT_EQ(back.layer_groups.size(), 2u);
  EXPECT_EQ(fit_yaml({fit_trace(src, "source", o, {{0, 1}, {2, 3}})}, o), yaml);
}

TEST(TraceFit, BadTracesAreInputErrors) {
  FitOptions o;
  o.max_evaluations = 4;
  const std::string shortt = error_of([&] { fit_trace(SyntheticTrace(fit_source(150, 64)), "short.safetensors", o); });
  EXPECT_NE(shortt.find("short.safetensors"), std::string::npos) << shortt;
  EXPECT_NE(shortt.find("at least 256"), std::string::npos) << shortt;
  const std::string nodecode = error_of([&] { fit_trace(SyntheticTrace(fit_source(1024, 0)), "nodecode", o); });
  EXPECT_NE(nodecode.find("0 decode queries"), std::string::npos) << nodecode;
  const std::string few = error_of([&] { fit_trace(SyntheticTrace(fit_source(1024, 20)), "few", o); });
  EXPECT_NE(few.find("at least 33"), std::string::npos) << few;

  const SyntheticTrace src(fit_source(480, 40));
  auto bad = copy_of(src);
  bad->key_row(2, 1, 100)[3] = std::nanf("");
  const std::string nan = error_of([&] { fit_trace(*bad, "nan.safetensors", o); });
  EXPECT_NE(nan.find("nan.safetensors"), std::string::npos) << nan;
  EXPECT_NE(nan.find("layer 2, KV head 1"), std::string::npos) << nan;
  EXPECT_NE(nan.find("NaN or Inf"), std::string::npos) << nan;

  // Lengths of one fit must share the model shape.
  SyntheticConfig other = fit_source(480, 40);
  other.head_dim = 32;
  const SyntheticTrace wrong(other);
  const std::string shape = error_of([&] { fit_traces({&src, &wrong}, {"a", "b"}, o); });
  EXPECT_NE(shape.find("model shape"), std::string::npos) << shape;
}

// Several lengths: one scaling rule per group knob, with the fitted values as evidence; a rule moves
// the generator's knob with the length asked for.
TEST(TraceFit, SeveralLengthsGiveScalingRules) {
  const SyntheticTrace a(fit_source(448, 64)), b(fit_source(960, 64));
  FitOptions o;
  o.groups = 2;
  o.max_evaluations = 40;
  const std::vector<TraceFitResult> fits = fit_traces({&b, &a}, {"b", "a"}, o);
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].source, "a");  // shortest first
  const SyntheticConfig& c = fits.back().config;
  EXPECT_EQ(c.scaling_reference_tokens, 1024);
  EXPECT_EQ(c.scaling.size(), c.layer_groups[0].knobs.size() + c.layer_groups[1].knobs.size());
  for (const ScalingRule& r : c.scaling) {
    EXPECT_EQ(r.tokens, (std::vector<int64_t>{512, 1024}));
    ASSERT_EQ(r.values.size(), 2u);
    // The rule reproduces the fit at the reference length exactly.
    EXPECT_DOUBLE_EQ(r.values[1], knob(c, r.group, r.knob));
  }
  const std::string path = test::write_temp("scaled-fit.yaml", fit_yaml(fits, o));
  EXPECT_NO_THROW(load_synthetic_config(path, {}, 4096));
}

// Sources at three lengths made by a known rule (every group's sink and recency strengths + 2 nats per
// unit of ln T, or constant): the fit's strength slopes follow the rule's direction, and a rule's shorter
// values are the reference values moved by its slope.
std::vector<TraceFitResult> fit_three_lengths(double rule_slope) {
  std::vector<std::unique_ptr<SyntheticTrace>> sources;
  std::vector<const TraceSource*> ptrs;
  for (int64_t prompt : {384, 640, 960}) {
    SyntheticConfig c = fit_source(prompt, 64);
    for (int g : {0, 1})
      for (const char* k : {"sink_strength", "recency_strength"}) c.scaling.push_back({g, k, rule_slope, {}, {}});
    c.scaling_reference_tokens = 1024;
    apply_scaling(c);
    sources.push_back(std::make_unique<SyntheticTrace>(c));
    ptrs.push_back(sources.back().get());
  }
  FitOptions o;
  o.groups = 2;
  o.max_evaluations = 80;
  return fit_traces(ptrs, {"a", "b", "c"}, o);
}

// The sink and recency strengths' slopes, summed over the groups.
double strength_slopes(const SyntheticConfig& c) {
  double s = 0;
  for (const ScalingRule& r : c.scaling)
    if (r.knob == "sink_strength" || r.knob == "recency_strength") s += r.slope;
  return s;
}

TEST(TraceFit, StrengthSlopesFollowTheLengthRule) {
  const std::vector<TraceFitResult> grown = fit_three_lengths(2), flat = fit_three_lengths(0);
  const SyntheticConfig &g = grown.back().config, &f = flat.back().config;
  const double grown_slope = strength_slopes(g), flat_slope = strength_slopes(f);
  EXPECT_GT(grown_slope, flat_slope + 2) << "grown " << grown_slope << ", flat " << flat_slope;
  // Only the strengths scale; every other knob is one setting at every length.
  for (const ScalingRule& r : g.scaling) {
    if (r.knob != "sink_strength" && r.knob != "recency_strength" && r.knob != "topic_strength") {
      EXPECT_EQ(r.slope, 0) << r.knob;
      continue;
    }
    ASSERT_EQ(r.values.size(), 3u);
    const double x = std::log(double(r.tokens[0]) / double(r.tokens[2]));
    EXPECT_NEAR(r.values[0], std::clamp(r.values[2] + r.slope * x, 0.0, 50.0), 1e-9) << r.knob;
  }
}

// The command: fit a trace file, write the YAML atomically, and `trace gen --config` it at another
// length; bad input exits 2 naming the file.
TEST(TraceFit, CommandLine) {
  const std::string dir = ::testing::TempDir();
  const std::string src = dir + "fit-src.safetensors", yaml = dir + "fit-out.yaml", gen = dir + "fit-gen.safetensors";
  const std::string cfg = test::write_temp("fit-src.yaml", R"(layers: 4
heads: 4
kv_heads: 2
head_dim: 64
dtype: fp32
prompt_tokens: 704
generated_tokens: 64
topics: 16
topic_stickiness: 0.3
layer_groups:
  - {layers: [0, 1], retrieval_heads: 0.5, query_noise: 0.6}
  - {layers: [2, 3], retrieval_heads: 0, sink_strength: 12}
)");
  ASSERT_EQ(test::run_kvsim("trace gen --config " + cfg + " -o " + src).exit_code, 0);
  const auto fit = test::run_kvsim("trace fit " + src + " -o " + yaml + " --groups 2 --seed 3");
  ASSERT_EQ(fit.exit_code, 0) << fit.out;
  EXPECT_NE(fit.out.find("cos32"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("group layers 0-1"), std::string::npos) << fit.out;
  const std::string text = test::read_text(yaml);
  EXPECT_NE(text.find("layer_groups:"), std::string::npos);
  EXPECT_NE(text.find("relative_error"), std::string::npos);
  EXPECT_NE(text.find("file: \"" + src + "\""), std::string::npos) << text;
  const auto g = test::run_kvsim("trace gen --config " + yaml + " --tokens 1000 -o " + gen);
  ASSERT_EQ(g.exit_code, 0) << g.out;
  const auto info = test::run_kvsim("trace info " + gen + " --no-profile");
  EXPECT_NE(info.out.find("tokens:     1000 (prompt 936 + 64 generated)"), std::string::npos) << info.out;

  const auto missing = test::run_kvsim("trace fit " + dir + "no-such.safetensors -o " + yaml);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("no-such.safetensors"), std::string::npos) << missing.out;
  // A file that is not a trace (cut short): an input error naming it, and the old YAML is kept.
  const std::string text_before = test::read_text(yaml);
  const std::string bad = test::write_temp("fit-bad.safetensors", test::read_text(src).substr(0, 200));
  const auto corrupt = test::run_kvsim("trace fit " + bad + " -o " + yaml);
  EXPECT_EQ(corrupt.exit_code, 2) << corrupt.out;
  EXPECT_NE(corrupt.out.find("fit-bad.safetensors"), std::string::npos) << corrupt.out;
  EXPECT_EQ(test::read_text(yaml), text_before);
  const auto json = test::run_kvsim("trace fit " + src + " -o " + yaml + " --groups 1 --format json");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_NE(json.out.find("\"schema\": \"kvsim.trace_fit/1\""), std::string::npos) << json.out;
  // A needle span: bad spans are input errors naming the option and keep the old YAML.
  const std::string before_needle = test::read_text(yaml);
  for (const std::string& bad_span : {std::string("--needle-tokens 10-20"), std::string("--needle-tokens 600:9999"),
                                      std::string("--needle-tokens 300:320 --needle x")}) {
    const auto r = test::run_kvsim("trace fit " + src + " -o " + yaml + " --groups 1 " + bad_span);
    EXPECT_EQ(r.exit_code, 2) << bad_span << "\n" << r.out;
    EXPECT_NE(r.out.find("needle"), std::string::npos) << r.out;
    EXPECT_EQ(test::read_text(yaml), before_needle);
  }
}

// --needle: the needle's strength is fitted to the real needle's attention share. A source generated with
// a known strength (6 nats) and fitted from a config that has no needle (strength 12, the default) gets a
// needle at the same depth and length and the source's strength back; the share matches; the YAML holds
// both; a span outside the prompt is an input error.
TEST(TraceFit, NeedleStrengthFollowsTheNeedlesShare) {
  SyntheticConfig sc = fit_source();
  sc.needles = {NeedleSpec{0.4, 24}};
  sc.needle_query_strength = 6;
  const SyntheticTrace src(sc);
  const auto span = src.needle_spans().at(0);
  TraceFitResult r;
  r.source = "source";
  r.config = fit_source();  // the same knobs without the needle
  ASSERT_TRUE(r.config.needles.empty());
  fit_needle(r, src, "source", span);
  ASSERT_EQ(r.config.needles.size(), 1u);
  EXPECT_EQ(r.config.needles[0].length, 24);
  EXPECT_NEAR(r.config.needles[0].depth * double(sc.prompt_tokens), double(span.first), 1e-3);
  EXPECT_NEAR(r.config.needle_query_strength, 6.0, 0.25);
  const FitStat& s = stat(r, "needle_share");
  EXPECT_GT(s.real, 0.05) << "the source's retrieval heads attend the needle";
  EXPECT_LT(std::abs(s.relative_error()), 0.02) << s.real << " " << s.fitted;
  // A stronger needle takes more attention: the statistic the bisection relies on moves the right way.
  sc.needle_query_strength = 12;
  const SyntheticTrace stronger(sc);
  EXPECT_GT(needle_share(stronger, stronger.needle_spans().at(0)), s.real);

  const std::string yaml = fit_yaml({r}, FitOptions{});
  const SyntheticConfig back = load_synthetic_config(test::write_temp("needle_fit.yaml", yaml));
  ASSERT_EQ(back.needles.size(), 1u);
  EXPECT_EQ(back.needle_query_strength, r.config.needle_query_strength);
  EXPECT_EQ(SyntheticTrace(back).needle_spans().at(0), SyntheticTrace(r.config).needle_spans().at(0));

  const std::string err = error_of([&] { fit_needle(r, src, "source", {span.first, sc.prompt_tokens + 5}); });
  EXPECT_NE(err.find("source"), std::string::npos) << err;
  EXPECT_NE(err.find("needle"), std::string::npos) << err;
}
