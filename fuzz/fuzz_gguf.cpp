// The GGUF reader (traces/llm/gguf.cpp): header, metadata key/values (nested arrays included), tensor
// infos and the aligned data section; then every tensor it can convert is dequantized, which reads
// each tensor's bytes end to end.
#include "fuzz/fuzz_input.hpp"
#include "traces/llm/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  fuzz::expect_input_error_only([&] {
    llm::GgufFile f("fuzz.gguf", data, size);
    for (const llm::GgufTensor& t : f.tensors())
      if (llm::ggml_type_dequantizable(t.type) && t.bytes <= (uint64_t(1) << 24)) (void)f.dequantize(t);
  });
  return 0;
}
