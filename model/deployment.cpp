#include "model/deployment.hpp"

#include <algorithm>

namespace kvsim {

double Deployment::kv_bytes_per_token() const { return 2.0 * model->layers * hkv_cached * model->head_dim * bkv; }

double Deployment::decode_cache_bytes(double tokens, bool append) const {
  const double row = 2.0 * hkv_cached * model->head_dim * bkv;  // one token's K and V in one layer
  const double group = hq / hkv_cached;
  double passes = 1;
  if (attention_repeat_kv && group > 1) passes = 1 + 2 * group;  // read, write expanded, read expanded
  return passes * tokens * row + append_copy_bytes(tokens, append);
}

double Deployment::append_copy_bytes(double tokens, bool append) const {
  const double row = 2.0 * hkv_cached * model->head_dim * bkv;
  return append && kv_append_concat ? 2 * tokens * row : 0.0;  // torch.cat: read old, write new
}

double Deployment::prefill_chunk(double prompt) const {
  return prefill_chunk_tokens > 0 ? std::min(prompt, double(prefill_chunk_tokens)) : prompt;
}

double Deployment::weight_bytes() const {
  // From the per-GPU shapes: q and o split by query heads, k and v by KV heads (replicated, one per
  // GPU, when there are fewer KV heads than GPUs), the MLP by FFN width, embedding and LM head by
  // vocabulary; norm weights replicated.
  const ModelConfig& m = *model;
  const double h = m.hidden, d = m.head_dim;
  const double attn = h * hq * d + 2 * h * hkv * d + hq * d * h + (m.qkv_bias ? (hq + 2 * hkv) * d : 0.0);
  const double mlp = 3 * h * ffn;
  const double vocab_tables = (m.tied_embeddings ? 1.0 : 2.0) * vocab * h;
  const double norms = 2.0 * h * m.layers + h;
  return (m.layers * (attn + mlp) + vocab_tables + norms) * bw;
}

Deployment make_deployment(const ModelConfig& m, const GpuSpec& g, const HostSpec& h, const Calibration& cal,
                           const DeploymentOptions& o) {
  const int tp = o.tensor_parallel;
  const DType weight_dtype = o.weight_dtype, kv_dtype = o.kv_dtype;
  const bool cuda_graphs = o.cuda_graphs;
  Deployment d;
  d.model = &m;
  d.gpu = &g;
  d.host = &h;
  d.tp = tp;
  d.weight_dtype = weight_dtype;
  d.kv_dtype = kv_dtype;
  // Activations stay in 16-bit even with fp8 weights (as fp8 serving stacks do), fp32 if the model is.
  d.act_dtype = m.dtype == DType::fp32 ? DType::fp32 : (m.dtype == DType::fp8 ? DType::bf16 : m.dtype);
  d.hbm_utilization = o.hbm_utilization;
  d.prefill_chunk_tokens = o.prefill_chunk_tokens;
  d.cuda_graphs = cuda_graphs;
  d.hq = double(m.query_heads) / tp;
  d.hkv = std::max(1.0, double(m.kv_heads) / tp);
  d.hkv_cached = d.hkv;
  d.ffn = double(m.ffn_hidden) / tp;
  d.vocab = double(m.vocab) / tp;
  d.bw = bytes_of(weight_dtype);
  d.bkv = bytes_of(kv_dtype);
  d.ba = bytes_of(d.act_dtype);
  d.machine = make_machine(g, h, weight_dtype, d.act_dtype, cuda_graphs, cal, tp);
  return d;
}

}  // namespace kvsim
