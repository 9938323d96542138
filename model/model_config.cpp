#include "model/model_config.hpp"

#include "core/error.hpp"

namespace kvsim {

double ModelConfig::attn_params_per_layer() const {
  const double q = double(hidden) * query_heads * head_dim;
  const double kv = 2.0 * hidden * kv_heads * head_dim;
  const double o = double(query_heads) * head_dim * hidden;
  const double bias = qkv_bias ? double(query_heads + 2 * kv_heads) * head_dim : 0.0;
  return q + kv + o + bias;
}

double ModelConfig::mlp_params_per_layer() const { return 3.0 * hidden * ffn_hidden; }

double ModelConfig::embedding_params() const { return double(vocab) * hidden; }

double ModelConfig::lm_head_params() const { return tied_embeddings ? 0.0 : double(vocab) * hidden; }

double ModelConfig::total_params() const {
  const double norms = 2.0 * hidden * layers + hidden;  // two RMSNorms per layer + the final one
  return layers * (attn_params_per_layer() + mlp_params_per_layer()) + norms + embedding_params() +
         lm_head_params();
}

double ModelConfig::kv_bytes_per_token(double b) const { return 2.0 * layers * kv_heads * head_dim * b; }

ModelConfig load_model(YamlMap m) {
  ModelConfig c;
  c.name = m.string("name");
  c.description = m.string("description", "");
  c.family = m.string("family", "llama");
  c.layers = static_cast<int>(m.integer("layers", Range::between(1, 1024)));
  c.hidden = static_cast<int>(m.integer("hidden", Range::between(1, 1 << 20)));
  c.query_heads = static_cast<int>(m.integer("query_heads", Range::between(1, 4096)));
  c.kv_heads = static_cast<int>(m.integer("kv_heads", Range::between(1, 4096)));
  c.head_dim = static_cast<int>(m.integer("head_dim", Range::between(1, 4096)));
  c.ffn_hidden = static_cast<int>(m.integer("ffn_hidden", Range::between(1, 1 << 22)));
  c.vocab = static_cast<int>(m.integer("vocab", Range::between(1, 1 << 24)));
  c.tied_embeddings = m.boolean("tied_embeddings", false);
  c.qkv_bias = m.boolean("qkv_bias", false);
  c.rope_theta = m.number("rope_theta", Range::positive(1e12));
  c.max_context = m.integer("max_context", Range::between(1, 1LL << 32));
  const std::string dt = m.choice("dtype", {"fp32", "fp16", "bf16", "fp8"}, "bf16");
  parse_dtype(dt, c.dtype);
  if (c.query_heads % c.kv_heads != 0) {
    m.fail("kv_heads", "value " + std::to_string(c.kv_heads) + " must divide query_heads (" +
                           std::to_string(c.query_heads) + ") for grouped-query attention");
  }
  m.finish();
  return c;
}

}  // namespace kvsim
