// A decoder-only transformer's shape, as data (scenarios/models/*.yaml), and the sizes derived from it.
// Symbols follow the brief: L layers, H query heads, Hkv KV heads, d head dim, h hidden, f FFN width.
#pragma once
#include <string>

#include "core/dtype.hpp"
#include "core/yaml_reader.hpp"

namespace kvsim {

struct ModelConfig {
  std::string name, description, family;
  int layers = 0, hidden = 0, query_heads = 0, kv_heads = 0, head_dim = 0, ffn_hidden = 0, vocab = 0;
  bool tied_embeddings = false, qkv_bias = false;
  double rope_theta = 0;
  int64_t max_context = 0;
  DType dtype = DType::bf16;

  // Parameters of one layer's attention projections: q and o are h x H*d, k and v are h x Hkv*d.
  double attn_params_per_layer() const;
  // SwiGLU MLP: gate and up h x f, down f x h.
  double mlp_params_per_layer() const;
  // Embedding table V x h (and the LM head, counted separately unless tied).
  double embedding_params() const;
  double lm_head_params() const;  // V x h, 0 if tied (the embedding table is reused)
  double total_params() const;
  // KV cache bytes per token over all layers: 2 (K and V) * L * Hkv * d * b.
  double kv_bytes_per_token(double bytes_per_elem) const;
  // Whether `tp` GPUs can split the model: tp divides the query heads and the FFN width, and divides
  // the KV heads or is a multiple of them (fewer KV heads than GPUs are replicated, as vLLM does).
  bool splits_over(int tp) const {
    return tp >= 1 && query_heads % tp == 0 && ffn_hidden % tp == 0 && (kv_heads % tp == 0 || tp % kv_heads == 0);
  }
};

// `file` is for error messages; all fields are checked for consistency (H divisible by Hkv, ...).
ModelConfig load_model(YamlMap m);

}  // namespace kvsim
