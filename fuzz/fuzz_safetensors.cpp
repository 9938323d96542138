// The safetensors container: the 8-byte length, the JSON header, every tensor entry and its data
// offsets (traces/format/safetensors.cpp). A parsed header is then used the way readers use it: every tensor
// is viewed and its first and last byte touched, so an offset that passed validation but points
// outside the mapping shows up as an AddressSanitizer report.
#include "fuzz/fuzz_input.hpp"
#include "traces/format/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  const std::string path = fuzz::write_temp_file(data, size, ".safetensors");
  fuzz::expect_input_error_only([&] {
    MappedFile file(path);
    const SafetensorsHeader h = parse_safetensors(file, path);
    volatile uint8_t sink = 0;
    for (const SafetensorsEntry& e : h.tensors) {
      const TensorView v = tensor_view(file, h, e);
      if (v.bytes) sink = sink ^ uint8_t(v.data[0]) ^ uint8_t(v.data[v.bytes - 1]);
    }
  });
  return 0;
}
