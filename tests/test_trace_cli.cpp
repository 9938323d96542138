// `kvsim trace info | gen | slice` end to end: a generated trace reads back, slices keep what they
// say, and every bad input exits 2 with a message naming the field and writes no file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "traces/synthetic/synthetic.hpp"
#include "traces/format/trace_file.hpp"

using namespace kvsim;

namespace {
std::string tmp(const std::string& name) { return std::string(::testing::TempDir()) + "kvsim_trace_cli_" + name; }
}  // namespace

TEST(TraceCli, GenInfoAndSliceRoundTrip) {
  const std::string gen = tmp("tiny.safetensors"), cut = tmp("cut.safetensors");
  std::filesystem::remove(gen);
  std::filesystem::remove(cut);
  auto r = test::run_kvsim("trace gen --preset tiny --set seed=11 --dtype fp16 -o '" + gen + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The file holds exactly what the generator makes (rounded to fp16), with provenance.
  const auto file = TraceFile::open(gen);
  EXPECT_EQ(file->storage_dtype(), DType::fp16);
  EXPECT_EQ(file->meta().source.kind, "synthetic");
  EXPECT_EQ(file->meta().source.seed, 11);
  EXPECT_NE(file->meta().source.command.find("trace gen --preset tiny"), std::string::npos);
  SyntheticConfig cfg = load_synthetic_config("tiny", {{"seed", "11"}, {"dtype", "fp16"}});
  const SyntheticTrace synth(cfg);
  ASSERT_EQ(file->tokens_count(), synth.tokens_count());
  const int d = synth.head_dim();
  std::vector<float> a(size_t(64 * d)), b(size_t(64 * d));
  file->keys(1, 1, 1000, 1064, a.data());
  synth.keys(1, 1, 1000, 1064, b.data());
  EXPECT_EQ(a, b);

  r = test::run_kvsim("trace info '" + gen + "' --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "kvsim.trace_info/1");
  EXPECT_EQ(j["tokens"], synth.tokens_count());
  EXPECT_EQ(j["stored"]["dtype"], "fp16");
  EXPECT_GT(j["profile"]["sink_share"].get<double>(), 10 * j["profile"]["sink_share_uniform"].get<double>());
  EXPECT_GT(j["profile"]["query_cosine"][0]["cosine"].get<double>(), j["profile"]["query_cosine"][5]["cosine"].get<double>());

  r = test::run_kvsim("trace slice '" + gen + "' --layers 1 --kv-heads 0 --steps 32:40 -o '" + cut + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto sl = TraceFile::open(cut);
  EXPECT_EQ(sl->meta().layers, std::vector<int>{1});
  EXPECT_EQ(sl->meta().kv_heads, std::vector<int>{0});
  EXPECT_EQ(sl->steps_count(), 8);
  const int64_t last = file->tokens().query_positions[39];
  EXPECT_EQ(sl->tokens_count(), last + 1);
  std::vector<float> q1(static_cast<size_t>(d)), q2(static_cast<size_t>(d));
  sl->queries(0, 1, 3, 4, q1.data());
  file->queries(1, 1, 35, 36, q2.data());
  EXPECT_EQ(q1, q2);
  EXPECT_NE(sl->meta().source.command.find(" | "), std::string::npos);  // the slice appends its command
  r = test::run_kvsim("trace info '" + cut + "' --no-profile");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("layers 1 of 2 [1]"), std::string::npos) << r.out;
}

TEST(TraceCli, BadInputExitsTwoNamesTheFieldAndWritesNothing) {
  const std::string out = tmp("never.safetensors");
  const std::string junk = test::write_temp("kvsim_trace_cli_junk.safetensors", "this is not a trace");
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"trace gen --preset no-such-preset -o '" + out + "'", "no-such-preset"},
      {"trace gen --preset tiny --set nonsense=3 -o '" + out + "'", "nonsense"},
      {"trace gen --preset tiny --set seed -o '" + out + "'", "not KEY=VALUE"},
      {"trace gen --preset tiny --dtype fp8 -o '" + out + "'", "fp32, fp16 or bf16"},
      {"trace gen --preset tiny --config x.yaml -o '" + out + "'", "exactly one"},
      {"trace info '" + junk + "'", junk},
      {"trace info /no/such/file.safetensors", "/no/such/file.safetensors"},
      {"trace slice '" + junk + "' -o '" + out + "'", junk},
  };
  for (const auto& c : cases) {
    std::filesystem::remove(out);
    const auto r = test::run_kvsim(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
  // Slice arguments are checked against the trace.
  const std::string gen = tmp("small.safetensors");
  ASSERT_EQ(test::run_kvsim("trace gen --preset tiny -o '" + gen + "'").exit_code, 0);
  for (const auto& c : std::vector<Case>{{"--layers 7", "not stored in this trace"},
                                         {"--layers 1,x", "not a list of non-negative integers"},
                                         {"--steps 5000:6000", "outside the trace's query rows"}}) {
    std::filesystem::remove(out);
    const auto r = test::run_kvsim("trace slice '" + gen + "' " + c.args + " -o '" + out + "'");
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

// Same seed, same bytes: the whole file, header and provenance included (the command line is recorded,
// so both runs write the same path).
TEST(TraceCli, SameSeedWritesTheSameBytes) {
  const std::string path = tmp("det.safetensors");
  const std::string args = "trace gen --preset tiny --set seed=5 -o '" + path + "'";
  ASSERT_EQ(test::run_kvsim(args).exit_code, 0);
  const std::string first = test::read_text(path);
  ASSERT_EQ(test::run_kvsim(args).exit_code, 0);
  EXPECT_GT(first.size(), 1000000u);
  EXPECT_TRUE(first == test::read_text(path));
  ASSERT_EQ(test::run_kvsim("trace gen --preset tiny --set seed=6 -o '" + path + "'").exit_code, 0);
  EXPECT_FALSE(first == test::read_text(path));
}

// A synthetic needle through the CLI: `trace gen` prints its span, `replay --needle-tokens` measures it.
// At 256 tokens, the tiny preset's retrieval heads lead Quest (the highest-scoring pages) to most of the
// needle, while StreamingLLM's sinks and recent window never reach the middle of the prompt.
TEST(TraceCli, SyntheticNeedleSpanDrivesNeedleRecall) {
  const std::string gen = tmp("needle_span.safetensors");
  auto r = test::run_kvsim("trace gen --preset tiny --set 'needles=[{depth: 0.5, length: 24}]' -o '" + gen + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  long long a = -1, b = -1;
  const size_t at = r.out.find("needle 0: tokens ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "needle 0: tokens %lld:%lld", &a, &b), 2);
  EXPECT_EQ(b - a, 24);
  const std::string span = std::to_string(a) + ":" + std::to_string(b);
  r = test::run_kvsim("replay '" + gen + "' --needle-tokens " + span +
                      " --policy quest --policy streaming --set quest.budget_tokens=256 --set streaming.window=252"
                      " --max-steps 4 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["needle"]["tokens"], nlohmann::json({a, b}));
  EXPECT_TRUE(j["needle"]["text"].is_null());
  std::map<std::string, double> needle;
  for (const auto& run : j["policies"]) needle[run["policy"].get<std::string>()] = run["quality"]["needle_recall"]["mean"].get<double>();
  ASSERT_EQ(needle.size(), 2u) << r.out;
  EXPECT_GE(needle["quest"], 0.4);  // its retrieval heads find the needle; local heads need not
  EXPECT_EQ(needle["streaming"], 0.0);
  // A span outside the prompt, a malformed one, and both forms at once: located errors, exit 2.
  for (const std::string& bad : {std::string("--needle-tokens 5:999999"), std::string("--needle-tokens 10-20"),
                                 std::string("--needle-tokens 30:20"), "--needle-tokens " + span + " --needle x"}) {
    r = test::run_kvsim("replay '" + gen + "' --policy quest --max-steps 2 " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("--needle-tokens"), std::string::npos) << r.out;
  }
}

// A real capture through the CLI (skips without the default model: tools/fetch-model.sh).
TEST(TraceCli, CaptureFromTheDefaultModel) {
  const std::string out = tmp("capture.safetensors");
  std::filesystem::remove(out);
  auto r = test::run_kvsim("trace capture --depth 1.5 -o '" + out + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--depth"), std::string::npos) << r.out;
  r = test::run_kvsim("trace capture --model /no/such/model.gguf -o '" + out + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("/no/such/model.gguf"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));

  r = test::run_kvsim("trace capture --max-prompt-tokens 160 --gen 6 --ignore-eos --layers 0,29 --kv-heads 1 "
                      "--needle 'The passphrase is lantern.' --depth 0.5 --threads 1 -o '" + out + "'");
  if (r.exit_code == 2 && r.out.find("tools/fetch-model.sh") != std::string::npos)
    GTEST_SKIP() << "default model not fetched: " << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto t = TraceFile::open(out);
  EXPECT_EQ(t->meta().model.layers, 30);
  EXPECT_EQ(t->meta().layers, (std::vector<int>{0, 29}));
  EXPECT_EQ(t->meta().kv_heads, std::vector<int>{1});
  EXPECT_EQ(t->meta().query_heads, (std::vector<int>{3, 4, 5}));  // SmolLM2: 9 heads over 3 KV heads
  EXPECT_NEAR(double(t->meta().prompt_tokens), 160, 4);  // re-tokenizing at the needle's seams may move a token
  EXPECT_EQ(t->tokens_count(), t->meta().prompt_tokens + 6);
  EXPECT_EQ(t->tokens().entropy.size(), 6u);
  EXPECT_EQ(t->meta().source.kind, "gguf");
  EXPECT_NE(t->meta().source.command.find("'The passphrase is lantern.'"), std::string::npos);
  t->check_finite_all();
}
