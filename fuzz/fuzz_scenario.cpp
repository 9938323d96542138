// A scenario YAML (model/scenario.cpp): workload, policies and their parameters, and inline hardware,
// host, model and calibration mappings. Library names resolve against the repository's scenarios/
// (KVSIM_DATA_DIR), as they would for a user.
#include "fuzz/fuzz_input.hpp"
#include "model/scenario.hpp"
#include "core/yaml_reader.hpp"
#include "policies/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  fuzz::expect_input_error_only([&] {
    const YAML::Node doc = load_yaml_string(fuzz::as_string(data, size), "fuzz.yaml");
    (void)load_scenario(doc, "fuzz.yaml", policy_catalog());
  });
  return 0;
}
