// The kvsim_trace metadata JSON (traces/format/trace_meta_json.cpp) and the cross-field checks a trace gets
// at open (validate_trace's header half): a hand-written or foreign trace's metadata reaches both.
#include "fuzz/fuzz_input.hpp"
#include "traces/format/trace_meta_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  fuzz::expect_input_error_only([&] {
    const TraceMeta m = parse_trace_meta(fuzz::as_string(data, size), "fuzz.safetensors");
    // Writing it back must work for anything that was accepted (trace rewrite does exactly this).
    (void)trace_meta_to_json(m).dump();
  });
  return 0;
}
