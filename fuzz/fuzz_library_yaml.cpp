// The library loaders: hardware (model/hardware.cpp), host (model/host.cpp) and model shape
// (model/model_config.cpp). One target for the three: the first byte picks the loader and the rest is
// the YAML, so the fuzzer learns each loader's keys from a corpus that mixes all three.
#include "fuzz/fuzz_input.hpp"
#include "model/hardware.hpp"
#include "model/host.hpp"
#include "model/model_config.hpp"
#include "core/yaml_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  if (size < 1) return 0;
  const char which = char(data[0] % 3);
  fuzz::expect_input_error_only([&] {
    const YamlMap m(load_yaml_string(fuzz::as_string(data + 1, size - 1), "fuzz.yaml"), "fuzz.yaml", "");
    if (which == 0) (void)load_gpu(m);
    else if (which == 1) (void)load_host(m);
    else (void)load_model(m);
  });
  return 0;
}
