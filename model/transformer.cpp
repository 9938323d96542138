#include "model/transformer.hpp"

#include <cmath>

namespace kvsim {

Phase weight_gemm(std::string_view name, const Deployment& d, double tokens, double k, double n, double count,
                  double launches) {
  Phase p{name, PhaseKind::gemm, Device::gpu, ComputeUnit::tensor, {}};
  p.work.flops = count * 2.0 * tokens * k * n;
  p.work.hbm_bytes = count * (k * n * d.bw + tokens * (k + n) * d.ba);
  p.work.launches = launches;
  p.repeat = count;
  return p;
}

void add_decode_dense_phases(const Deployment& d, double B, PhaseList& out) {
  const ModelConfig& m = *d.model;
  const double L = m.layers, h = m.hidden, hd = m.head_dim;
  const double qkv_out = (d.hq + 2 * d.hkv) * hd;
  out.push_back(weight_gemm("qkv_proj", d, B, h, qkv_out, L, L));
  out.push_back(weight_gemm("o_proj", d, B, d.hq * hd, h, L, L));
  // SwiGLU: gate+up (h -> 2f), SiLU(gate)*up, down (f -> h). The activation kernel reads 2f, writes f.
  Phase mlp = weight_gemm("mlp", d, B, h, 2 * d.ffn, L, 0);
  const Phase down = weight_gemm("mlp", d, B, d.ffn, h, L, 0);
  mlp.work.flops += down.work.flops + L * B * d.ffn * 4;  // SiLU and the product: ~4 FLOPs/element
  mlp.work.hbm_bytes += down.work.hbm_bytes + L * B * 3 * d.ffn * d.ba;
  mlp.work.launches = 3 * L;
  out.push_back(mlp);
  // Two RMSNorms per layer, each fused with its residual add: read x and residual, write both.
  Phase norm{"norm", PhaseKind::elementwise, Device::gpu, ComputeUnit::simt, {}};
  norm.work.flops = L * 2 * B * h * 5;
  norm.work.hbm_bytes = L * 2 * 4 * B * h * d.ba;
  norm.work.launches = 2 * L;
  norm.repeat = L;
  out.push_back(norm);
  // Final norm, LM head over the (per-GPU slice of the) vocabulary, sampling; the embedding gather.
  Phase head = weight_gemm("lm_head", d, B, h, d.vocab, 1, 4);
  head.work.hbm_bytes += B * h * d.bw + B * d.vocab * 4;  // embedding rows; fp32 logits for sampling
  out.push_back(head);
  if (d.tp > 1) {
    // Two all-reduces per layer (after attention and after the MLP) of B x h activations. A ring
    // all-reduce sends 2 (tp-1)/tp of the buffer from each GPU.
    Phase ar{"allreduce", PhaseKind::allreduce, Device::gpu, ComputeUnit::simt, {}};
    const double buf = B * h * d.ba;
    ar.work.link_bytes = L * 2 * buf * 2.0 * (d.tp - 1) / d.tp;
    ar.work.flops = L * 2 * B * h * (d.tp - 1) / d.tp;  // the reduce-scatter half adds; the gather copies
    ar.work.hbm_bytes = L * 2 * buf * 3;
    ar.work.launches = 2 * L;
    ar.repeat = L;
    out.push_back(ar);
  }
}

void add_dense_attention(const Deployment& d, double B, double n, PhaseList& out) {
  const ModelConfig& m = *d.model;
  const double L = m.layers, hd = m.head_dim;
  Phase a{"attention", PhaseKind::attention, Device::gpu, ComputeUnit::tensor_act, {}};
  // q.k and p.v for every query head over n tokens: 4 n d FLOPs per head, plus softmax (~5 per score).
  a.work.flops = L * B * d.hq * n * (4 * hd + 5);
  // Each KV head's n keys and values are read once per sequence (GQA: shared by its query group);
  // the new token's K, V are written; q in, o out.
  a.work.hbm_bytes = L * B * (d.decode_cache_bytes(n, true) + d.hkv_cached * 2 * hd * d.bkv + 2 * d.hq * hd * d.ba);
  a.work.launches = 2 * L;  // RoPE + KV append, attention
  if (a.work.hbm_bytes > 0) a.lead_fraction = L * B * d.append_copy_bytes(n, true) / a.work.hbm_bytes;
  a.repeat = L;
  out.push_back(a);
}

void add_prefill_phases(const Deployment& d, double n, PhaseList& out) {
  const ModelConfig& m = *d.model;
  const double L = m.layers, h = m.hidden, hd = m.head_dim;
  const double c = d.prefill_chunk(n);
  const double chunks = std::ceil(n / c);
  // Weight GEMMs: every chunk reads the weights once; compute is 2 x tokens x params.
  const double per_layer_weights = h * (d.hq + 2 * d.hkv) * hd + d.hq * hd * h + 3 * h * d.ffn;
  Phase g{"prefill_gemm", PhaseKind::gemm, Device::gpu, ComputeUnit::tensor, {}};
  g.work.flops = L * (2 * n * per_layer_weights + 4 * n * d.ffn);  // GEMMs + SiLU(gate)*up, as in decode
  g.work.hbm_bytes = L * (chunks * per_layer_weights * d.bw +
                          n * (2 * h + (d.hq + 2 * d.hkv) * hd + d.hq * hd + 5 * d.ffn) * d.ba);
  g.work.launches = chunks * L * 5;
  // One instance is one of a layer's four weight GEMMs (qkv, o, gate+up, down) on one chunk, as the
  // published GEMM curves measure one matrix product: the x of a `bytes` curve is then one GEMM's
  // bytes (their mean), not the whole prefill's. The prefill is costed by the roofline alone, so the
  // repeat changes nothing else.
  g.repeat = float(L * chunks * kPrefillGemmsPerLayer);
  out.push_back(g);
  // Causal attention: query i attends to i keys, sum = n (n + 1) / 2 scores per head.
  Phase a{"prefill_attention", PhaseKind::prefill_attention, Device::gpu, ComputeUnit::tensor_act, {}};
  const double scores = n * (n + 1) / 2;
  a.work.flops = L * d.hq * scores * (4 * hd + 5);
  // KV written once; chunk j (1-based) rereads the KV of the j chunks up to and including itself.
  const double kv_row = d.hkv_cached * 2 * hd * d.bkv;
  const double kv_reads = std::min(n, c) * chunks * (chunks + 1) / 2;
  a.work.hbm_bytes = L * (n * kv_row + std::min(kv_reads, scores) * kv_row + 2 * n * d.hq * hd * d.ba);
  a.work.launches = chunks * L * 2;
  out.push_back(a);
  Phase norm{"prefill_norm", PhaseKind::elementwise, Device::gpu, ComputeUnit::simt, {}};
  norm.work.flops = L * 2 * n * h * 5;
  norm.work.hbm_bytes = L * 2 * 4 * n * h * d.ba;
  norm.work.launches = chunks * L * 2;
  // One instance is one norm kernel on one chunk (two per layer), as the published norm curves measure
  // one kernel: the x of a `bytes` curve is then one norm's bytes. The prefill is costed by the roofline
  // alone, so the repeat changes nothing else.
  norm.repeat = float(L * chunks * 2);
  out.push_back(norm);
  // Only the last position's logits are needed for the first output token.
  Phase head = weight_gemm("prefill_lm_head", d, 1, h, d.vocab, 1, 2);
  out.push_back(head);
  if (d.tp > 1) {
    Phase ar{"prefill_allreduce", PhaseKind::allreduce, Device::gpu, ComputeUnit::simt, {}};
    const double buf = n * h * d.ba;
    ar.work.link_bytes = L * 2 * buf * 2.0 * (d.tp - 1) / d.tp;
    ar.work.flops = L * 2 * n * h * (d.tp - 1) / d.tp;
    ar.work.hbm_bytes = L * 2 * buf * 3;
    ar.work.launches = chunks * 2 * L;
    out.push_back(ar);
  }
}

}  // namespace kvsim
