// How a model is deployed on one GPU server, with the per-GPU shapes that follow from tensor
// parallelism: query heads, FFN width and vocabulary split over `tp` GPUs; KV heads split too, or
// replicated when there are fewer KV heads than GPUs (as vLLM does).
#pragma once
#include <cstdint>

#include "model/calibration.hpp"
#include "core/dtype.hpp"
#include "model/hardware.hpp"
#include "model/host.hpp"
#include "model/model_config.hpp"
#include "model/roofline.hpp"

namespace kvsim {

struct Deployment {
  const ModelConfig* model = nullptr;
  const GpuSpec* gpu = nullptr;
  const HostSpec* host = nullptr;
  int tp = 1;
  DType weight_dtype = DType::bf16, kv_dtype = DType::bf16, act_dtype = DType::bf16;
  double hbm_utilization = 0.9;      // fraction of HBM the serving engine may use
  int64_t prefill_chunk_tokens = 8192;  // 0 = the whole prompt in one forward pass
  bool cuda_graphs = true;
  // Implementation profile (model/implementation.hpp): how decode attention touches the cache.
  bool kv_append_concat = false;    // appending a token copies the whole cache (read + write)
  bool attention_repeat_kv = false;  // GQA K, V expanded to every query head before attention
  Machine machine;

  // Per-GPU shapes. `hkv` is the KV heads the K, V projections produce; `hkv_cached` the KV heads
  // whose K, V the cache stores and attention reads: hkv, or hq when the implementation expands GQA
  // (model/implementation.hpp).
  double hq = 0, hkv = 0, hkv_cached = 0, ffn = 0, vocab = 0;
  // Bytes per element.
  double bw = 2, bkv = 2, ba = 2;

  double kv_bytes_per_token() const;  // per GPU: 2 * L * hkv_cached * d * bkv
  // Tokens a prefill processes per forward pass for a prompt of `prompt` tokens.
  double prefill_chunk(double prompt) const;
  double weight_bytes() const;        // per GPU
  // HBM bytes one decode attention moves per layer and sequence for the `tokens` cached tokens it
  // attends to: the cache read once by a fused GQA kernel; with repeat_kv also read, expanded to
  // every query head and read again; with a concatenating append also copied whole. The new token's
  // own K, V write is not included.
  double decode_cache_bytes(double tokens, bool append) const;
  // Of those, the concatenating append's copy (read the old cache, write the new one): 0 without
  // kv_append_concat or without an append. A kernel of its own, before the attention kernel.
  double append_copy_bytes(double tokens, bool append) const;
};

// How a model is deployed on a GPU, beyond which model, GPU and host: the settings a scenario's
// `workload:` block gives (docs/scenarios.md). Written with designated initializers at call sites,
// e.g. {.tensor_parallel = 2, .kv_dtype = DType::fp8}; the defaults are the workload's defaults.
struct DeploymentOptions {
  int tensor_parallel = 1;
  DType weight_dtype = DType::bf16, kv_dtype = DType::bf16;
  double hbm_utilization = 0.9;         // share of HBM the serving engine may use
  int64_t prefill_chunk_tokens = 8192;  // chunked prefill: tokens per chunk
  bool cuda_graphs = true;              // decode launched as one CUDA graph
};

// Fills the derived fields; the caller has validated tensor_parallel against the model (see scenario.cpp).
Deployment make_deployment(const ModelConfig& m, const GpuSpec& g, const HostSpec& h, const Calibration& cal,
                           const DeploymentOptions& o = {});

}  // namespace kvsim
