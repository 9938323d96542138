// An implementation profile: how the code a paper measured actually runs, where that differs from an
// efficient serving engine. A paper's latency or memory comes from its implementation, not only from
// its algorithm; kvsim models the implementation (chosen in the scenario's `implementation:` block)
// instead of adjusting efficiencies until a number matches. See docs/scenarios.md and
// docs/reproductions.md.
#pragma once
#include "model/deployment.hpp"
#include "core/yaml_reader.hpp"

namespace kvsim {

struct Implementation {
  // The KV cache holds (or the paper counts) one K and V per *query* head: GQA expanded by
  // repeat_kv before caching, as in implementations that compress the expanded tensors, or in a
  // paper's memory formula that uses the number of attention heads.
  bool kv_expand_gqa = false;
  // The whole prompt goes through one forward pass (Hugging Face `generate`): prefill activations
  // scale with the prompt instead of a serving engine's fixed chunk.
  bool prefill_whole_prompt = false;
  // Appending a decode token concatenates (Hugging Face DynamicCache.update: torch.cat of the old
  // cache and the new K, V), so every step reads and writes the whole cache once more.
  bool kv_append_concat = false;
  // Attention runs on K, V expanded to every query head (Hugging Face `sdpa` and `eager` attention
  // call repeat_kv for GQA models; `flash_attention_2` does not).
  bool attention_repeat_kv = false;
};

// Reads the `implementation:` mapping (all fields optional; unknown fields are errors).
Implementation load_implementation(YamlMap m);

// Applies the profile to a deployment made by make_deployment.
void apply_implementation(Deployment& d, const Implementation& impl);

}  // namespace kvsim
