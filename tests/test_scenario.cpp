// Scenario files: the documented example runs, and every class of bad input gets an error naming the
// file, line, field, value and what is allowed.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "model/scenario.hpp"
#include "test_util.hpp"
#include "policies/registry.hpp"

using namespace kvsim;

namespace {
// Loads a scenario from text; returns the error message, or "" when it loaded.
std::string error_of(const std::string& yaml, const Overrides& o = {}) {
  try {
    load_scenario(load_yaml_string(yaml, "s.yaml"), "s.yaml", policy_catalog(), o);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}
const char* kGood = R"(hardware: h100-sxm
host: xeon-w9-3495x
model: llama-3.1-8b
workload:
  context_tokens: [16384, 131072]
  output_tokens: 1024
  batch: max
policies:
  - full
)";
std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)
}  // namespace

TEST(Scenario, TheDocumentedExampleLoads) {
  const Scenario s = load_scenario(load_yaml_string(kGood, "s.yaml"), "s.yaml", policy_catalog());
  EXPECT_EQ(s.gpu.name, "h100-sxm");
  EXPECT_EQ(s.host.name, "xeon-w9-3495x");
  EXPECT_EQ(s.workload.context_tokens, (std::vector<int64_t>{16384, 131072}));
  EXPECT_EQ(s.workload.batch, 0);
  ASSERT_EQ(s.policies.size(), 1u);
  EXPECT_EQ(s.policies[0].policy->name(), "full");
  EXPECT_NO_THROW(load_scenario_file(library_dir() + "/example.yaml", policy_catalog()));
  EXPECT_NO_THROW(load_scenario_file(library_dir() + "/default.yaml", policy_catalog()));
}

TEST(Scenario, OmittedHostMeansTheHardwareDefault) {
  const Scenario s = load_scenario(load_yaml_string(replace(kGood, "host: xeon-w9-3495x\n", ""), "s.yaml"), "s.yaml", policy_catalog());
  EXPECT_EQ(s.host.name, test::gpu("h100-sxm").default_host);
}

TEST(Scenario, InlineHardwareAndModel) {
  const std::string inline_model = R"(model:
  name: tiny
  layers: 2
  hidden: 64
  query_heads: 4
  kv_heads: 2
  head_dim: 16
  ffn_hidden: 128
  vocab: 1000
  rope_theta: 10000
  max_context: 4096
workload:
  context_tokens: 1024)";
  const std::string y = "hardware: h100-sxm\n" + inline_model + "\n";
  EXPECT_EQ(error_of(y), "");
}

TEST(Scenario, UnknownKeyGetsLineAndSuggestion) {
  const std::string m = error_of(replace(kGood, "output_tokens", "outptu_tokens"));
  EXPECT_HAS(m, "s.yaml:6: workload.outptu_tokens: unknown key");
  EXPECT_HAS(m, "did you mean 'output_tokens'");
}

TEST(Scenario, MisspelledNamesGetSuggestions) {
  EXPECT_HAS(error_of(replace(kGood, "h100-sxm", "h100-smx")), "s.yaml:1: hardware: unknown hardware 'h100-smx' (did you mean 'h100-sxm'?)");
  EXPECT_HAS(error_of(replace(kGood, "llama-3.1-8b", "lama-3.1-8b")), "did you mean 'llama-3.1-8b'");
  EXPECT_HAS(error_of(replace(kGood, "  - full", "  - fulll")), "s.yaml:9: policies[0]: unknown policy 'fulll' (did you mean 'full'?)");
}

TEST(Scenario, WrongTypesAndRanges) {
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: 0")), "s.yaml:7: workload.batch: value 0 is out of range; allowed: an integer 1 .. 1000000000, or max");
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: lots")), "workload.batch: value 'lots' is not a number");
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: 2.5")), "is not an integer");
  EXPECT_HAS(error_of(replace(kGood, "output_tokens: 1024", "output_tokens: -3")), "workload.output_tokens: value -3 is out of range");
  EXPECT_HAS(error_of(replace(kGood, "[16384, 131072]", "[16384, big]")), "s.yaml:5: workload.context_tokens: value 'big' is not a number");
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: max\n  hbm_utilization: 1.5")), "workload.hbm_utilization: value 1.5 is out of range; allowed: > 0 and <= 1");
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: max\n  cuda_graphs: maybe")), "allowed: true, false");
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: max\n  kv_dtype: fp4")), "workload.kv_dtype: value 'fp4' is not allowed; allowed: fp32, fp16, bf16, fp8");
}

TEST(Scenario, NegativeBandwidthInInlineHardware) {
  const std::string gpu_yaml = test::read_text(library_dir() + "/hardware/h100-sxm.yaml");
  const std::string bad = replace(gpu_yaml, "bandwidth_gbs: 3350", "bandwidth_gbs: -3350");
  try {
    load_gpu(YamlMap(load_yaml_string(bad, "gpu.yaml"), "gpu.yaml", ""));
    FAIL() << "negative bandwidth accepted";
  } catch (const InputError& e) {
    EXPECT_HAS(std::string(e.what()), "gpu.yaml:11: memory.bandwidth_gbs: value -3350 is out of range; allowed: > 0");
  }
}

TEST(Scenario, ContextBeyondTheModelLimit) {
  const std::string y = replace(kGood, "llama-3.1-8b", "llama-3-8b");  // max_context 8192
  const std::string m = error_of(y);
  EXPECT_HAS(m, "workload.context_tokens: value 16384 exceeds the max_context of model llama-3-8b (8192)");
  EXPECT_HAS(m, "allow_long_context");
  EXPECT_EQ(error_of(replace(y, "batch: max", "batch: max\n  allow_long_context: true")), "");
}

TEST(Scenario, TensorParallelMustDivideTheHeads) {
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: max\n  tensor_parallel: 3")), "workload.tensor_parallel: value 3 must divide query_heads (32)");
  // The range itself, 1 .. 64, in the message of a value outside it.
  EXPECT_HAS(error_of(replace(kGood, "batch: max", "batch: max\n  tensor_parallel: 128")),
             "workload.tensor_parallel: value 128 is out of range; allowed: 1 .. 64");
}

TEST(Scenario, Fp8NeedsHardwareSupport) {
  std::string y = replace(kGood, "h100-sxm", "a100-80g");
  EXPECT_HAS(error_of(replace(y, "batch: max", "batch: max\n  weight_dtype: fp8")), "workload.weight_dtype: value fp8 has no tensor-core peak on a100-80g");
  EXPECT_EQ(error_of(replace(kGood, "batch: max", "batch: max\n  weight_dtype: fp8")), "");
}

TEST(Scenario, Bf16ModelsDefaultToFp16WithoutBf16TensorCores) {
  const std::string y = replace(kGood, "h100-sxm", "v100-32g");
  const Scenario s = load_scenario(load_yaml_string(y, "s.yaml"), "s.yaml", policy_catalog());
  EXPECT_EQ(s.workload.weight_dtype, DType::fp16);
  EXPECT_EQ(s.workload.kv_dtype, DType::fp16);
  EXPECT_HAS(error_of(replace(y, "batch: max", "batch: max\n  weight_dtype: bf16")),
             "workload.weight_dtype: value bf16 has no tensor-core peak on v100-32g");
}

TEST(Scenario, InlineHardwareWithoutDefaultHostNeedsAHost) {
  const std::string gpu_yaml = test::read_text(library_dir() + "/hardware/a40.yaml");
  std::string inline_gpu;  // the file indented under `hardware:`, without its default_host
  std::istringstream lines(gpu_yaml);
  for (std::string l; std::getline(lines, l);)
    if (l.rfind("default_host", 0) != 0) inline_gpu += "  " + l + "\n";
  const std::string y = "hardware:\n" + inline_gpu + "model: llama-3.1-8b\nworkload: {context_tokens: 4096}\n";
  EXPECT_HAS(error_of(y), "host: missing host, and hardware a40 names no default_host");
  EXPECT_EQ(error_of(y + "host: ci-2core\n"), "");
}

TEST(Scenario, MissingAndDuplicateKeys) {
  EXPECT_HAS(error_of("model: llama-3.1-8b\nworkload: {context_tokens: 10}\n"), "hardware: missing required hardware");
  EXPECT_HAS(error_of(replace(kGood, "output_tokens: 1024", "output_tokens: 1024\n  output_tokens: 5")), "duplicate key");
  EXPECT_HAS(error_of("hardware: [1, 2\n"), "s.yaml:");
  EXPECT_HAS(error_of("- a\n- b\n"), "expected a mapping");
  EXPECT_HAS(error_of(std::string(kGood) + "[x, y]: 1\n"), "s.yaml:10: (document): a key must be plain text");
}

TEST(Scenario, CommandLineOverridesAreCheckedTheSameWay) {
  Overrides o;
  o.batch = "0";
  EXPECT_HAS(error_of(kGood, o), "command line: workload.batch: value 0 is out of range");
  o = {};
  o.hardware = "h2000";
  EXPECT_HAS(error_of(kGood, o), "command line: hardware: unknown hardware 'h2000' (did you mean 'h200'?)");
  o = {};
  o.context = "[4096, 8192]";
  o.batch = "3";
  o.policies = {"full"};
  const Scenario s = load_scenario(load_yaml_string(kGood, "s.yaml"), "s.yaml", policy_catalog(), o);
  EXPECT_EQ(s.workload.context_tokens, (std::vector<int64_t>{4096, 8192}));
  EXPECT_EQ(s.workload.batch, 3);
  o = {};
  o.sets = {"full.rho=3"};
  EXPECT_HAS(error_of(kGood, o), "policy 'full' has no parameter 'rho'");
  o.sets = {"chess.rho_page=0.1"};
  EXPECT_HAS(error_of(kGood, o), "policy 'chess' is not among this run's policies");
  o.sets = {"garbage"};
  EXPECT_HAS(error_of(kGood, o), "is not of the form POLICY.PARAM=VALUE");
}
