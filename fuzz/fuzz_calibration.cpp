// A calibration file (model/calibration.cpp), as written by `kvsim validate` on another machine.
#include "fuzz/fuzz_input.hpp"
#include "model/calibration.hpp"
#include "core/yaml_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  fuzz::expect_input_error_only([&] {
    const YamlMap m(load_yaml_string(fuzz::as_string(data, size), "fuzz.yaml"), "fuzz.yaml", "");
    (void)load_calibration(m);
  });
  return 0;
}
