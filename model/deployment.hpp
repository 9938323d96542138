// How a model is deployed on one GPU server, with the per-GPU shapes that follow from tensor
// parallelism: query heads, FFN width and vocabulary split over `tp` GPUs; KV heads split too, or
// replicated when there are fewer KV heads than GPUs (as vLLM does).
#pragma once
#include <cstdint>

#include "model/calibration.hpp"
#include "model/dtype.hpp"
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
  int64_t prefill_chunk_tokens = 8192;
  bool cuda_graphs = true;
  Machine machine;

  // Per-GPU shapes.
  double hq = 0, hkv = 0, ffn = 0, vocab = 0;
  // Bytes per element.
  double bw = 2, bkv = 2, ba = 2;

  double kv_bytes_per_token() const;  // per GPU: 2 * L * hkv * d * bkv
  double weight_bytes() const;        // per GPU
};

// Fills the derived fields; the caller has validated tp against the model (see scenario.cpp).
Deployment make_deployment(const ModelConfig& m, const GpuSpec& g, const HostSpec& h, int tp,
                           DType weight_dtype, DType kv_dtype, double hbm_utilization,
                           int64_t prefill_chunk_tokens, bool cuda_graphs, const Calibration& cal);

}  // namespace kvsim
