// A whole trace file as `kvsim replay` and `trace info` open it (traces/format/trace_file.cpp): the container,
// the kvsim_trace metadata, every tensor's dtype and shape against it, the token arrays; then every
// row of every layer is read (which runs the NaN/Inf check) and the whole file scanned.
#include <algorithm>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "traces/format/trace_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  const std::string path = fuzz::write_temp_file(data, size, ".safetensors");
  fuzz::expect_input_error_only([&] {
    const auto t = TraceFile::open(path);
    const int64_t d = t->head_dim(), rows = t->tokens_count(), steps = t->steps_count();
    const TraceMeta& m = t->meta();
    std::vector<float> row(size_t(std::max<int64_t>(d, 1)));
    // Every row through the readers' own entry points (the NaN/Inf check runs on the first read of a
    // layer). A header that validates describes no more rows than the file holds, so this stays
    // bounded by the input size.
    for (int l = 0; l < int(m.layers.size()); ++l) {
      for (int h = 0; h < int(m.kv_heads.size()); ++h)
        for (int64_t tok = 0; tok < rows; ++tok) {
          t->keys(l, h, tok, tok + 1, row.data());
          if (t->has_values()) t->values(l, h, tok, tok + 1, row.data());
        }
      for (int q = 0; q < int(m.query_heads.size()); ++q)
        for (int64_t s = 0; s < steps; ++s) t->queries(l, q, s, s + 1, row.data());
    }
    t->check_finite_all();
  });
  return 0;
}
