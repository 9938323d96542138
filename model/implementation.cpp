#include "model/implementation.hpp"

namespace kvsim {

Implementation load_implementation(YamlMap m) {
  Implementation impl;
  impl.kv_expand_gqa = m.boolean("kv_expand_gqa", false);
  impl.prefill_whole_prompt = m.choice("prefill", {"chunked", "whole"}, "chunked") == "whole";
  impl.kv_append_concat = m.choice("kv_append", {"in_place", "concat"}, "in_place") == "concat";
  impl.attention_repeat_kv = m.choice("attention", {"fused_gqa", "repeat_kv"}, "fused_gqa") == "repeat_kv";
  m.finish();
  return impl;
}

void apply_implementation(Deployment& d, const Implementation& impl) {
  if (impl.kv_expand_gqa) d.hkv_cached = d.hq;
  if (impl.prefill_whole_prompt) d.prefill_chunk_tokens = 0;
  d.kv_append_concat = impl.kv_append_concat;
  d.attention_repeat_kv = impl.attention_repeat_kv;
}

}  // namespace kvsim
