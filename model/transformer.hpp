// The phases of a dense decoder-only transformer (llama family: RMSNorm, GQA attention, SwiGLU MLP)
// that every policy shares: weight GEMMs, norms, LM head, tensor-parallel all-reduce, and dense
// attention for full KV. A policy replaces only the attention part and adds its own selection,
// transfer and state-building phases.
//
// All quantities are per GPU for one decode step of `batch` sequences (or one prefill of one prompt)
// and totals over the L layers. Formulas are in docs/cost-model.md.
#pragma once
#include <vector>

#include "model/deployment.hpp"
#include "model/phase.hpp"

namespace kvsim {

using PhaseList = std::vector<Phase>;

// A weight GEMM of `tokens` rows through a k x n weight matrix, `count` times (e.g. once per layer):
// 2 tokens k n FLOPs per call; bytes the weights once per call plus the activations in and out.
Phase weight_gemm(std::string_view name, const Deployment& d, double tokens, double k, double n, double count,
                  double launches);

// Everything in a decode step except attention: qkv_proj, o_proj, mlp, norm, lm_head, allreduce.
void add_decode_dense_phases(const Deployment& d, double batch, PhaseList& out);

// Dense decode attention of `batch` sequences over `context` cached tokens each (GQA-aware: each KV
// head is read once for its whole query group), including RoPE and the append of the new K, V.
void add_dense_attention(const Deployment& d, double batch, double context, PhaseList& out);

// Prefill of one prompt of `prompt` tokens, chunked by d.prefill_chunk_tokens (FlashAttention-style
// causal attention; each chunk rereads the KV of the chunks before it). `prefill_gemm` holds every
// layer's weight GEMMs over every chunk; its repeat is layers x chunks x kPrefillGemmsPerLayer, so
// its bytes per instance (the x of a `bytes` efficiency curve) are one GEMM's.
inline constexpr double kPrefillGemmsPerLayer = 4;  // qkv, o, gate+up, down
void add_prefill_phases(const Deployment& d, double prompt, PhaseList& out);

}  // namespace kvsim
