// Building blocks the policies compose their phases from: decode attention over a token set, a
// scoring GEMV against summaries, a top-k/threshold selection, a gather, a host<->device copy, a CPU
// routine. Each returns a per-layer phase (repeat = L) whose work is the total over the L layers and
// the batch, per GPU (tensor parallelism already folded into the Deployment's per-GPU head counts).
// Formulas are documented with each policy in docs/cost-model.md.
#pragma once
#include <algorithm>
#include <cmath>
#include <string_view>

#include "model/deployment.hpp"
#include "model/phase.hpp"
#include "model/policy.hpp"

namespace kvsim::blocks {

// Per-GPU shapes of one layer.
struct Shape {
  double L, hd, hq, hkv, group;  // layers, head dim, query heads, KV heads, query heads per KV head
  double bkv, ba;                // bytes per KV element and per activation element
  double key_row;                // one token's key (or value) in one KV head: hd * bkv bytes
  double kv_row;                 // one token's K and V in one layer, all KV heads: 2 * hkv * hd * bkv
};

inline Shape shape(const Deployment& d) {
  Shape s;
  s.L = d.model->layers;
  s.hd = d.model->head_dim;
  s.hq = d.hq;
  s.hkv = d.hkv_cached;  // the heads the cache stores (all query heads when GQA is expanded)
  s.group = d.hq / d.hkv_cached;
  s.bkv = d.bkv;
  s.ba = d.ba;
  s.key_row = s.hd * s.bkv;
  s.kv_row = 2 * s.hkv * s.hd * s.bkv;
  return s;
}

inline Phase layer_phase(std::string_view name, PhaseKind kind, Device dev, ComputeUnit unit, Stream stream,
                         double L) {
  Phase p{name, kind, dev, unit, {}};
  p.stream = stream;
  p.repeat = L;
  return p;
}

// GPU decode attention of B sequences over `tokens` cached entries per KV head: q.k and p.v for every
// query head (4 d FLOPs per head per token, ~5 for the softmax), each KV head's entries read once for
// its query group (GQA), q in and o out. `append` adds RoPE and writing the new token's K, V.
inline Phase attention(const Deployment& d, std::string_view name, double B, double tokens, double run_bytes,
                       bool append) {
  const Shape s = shape(d);
  Phase a = layer_phase(name, PhaseKind::attention, Device::gpu, ComputeUnit::tensor_act, Stream::gpu, s.L);
  tokens = std::max(0.0, tokens);
  a.work.flops = s.L * B * s.hq * tokens * (4 * s.hd + 5);
  a.work.hbm_bytes = s.L * B * (d.decode_cache_bytes(tokens, append) + 2 * s.hq * s.hd * s.ba + (append ? s.kv_row : 0));
  a.work.launches = s.L * (append ? 2 : 1);
  if (a.work.hbm_bytes > 0) a.lead_fraction = s.L * B * d.append_copy_bytes(tokens, append) / a.work.hbm_bytes;
  a.run_bytes = run_bytes;
  return a;
}

// A scoring GEMV on the GPU: for each of B sequences and each of `heads` heads, a `dim`-vector
// against `vectors` stored vectors of `dim` elements (`elem_bytes` each): 2 dim FLOPs per pair, the
// vectors read once per head (GQA groups share them: pass heads = query heads and
// `reads_per_vector` = KV heads when query heads of a group score against their KV head's vectors).
inline Phase score(const Deployment& d, std::string_view name, double B, double heads, double reads, double vectors,
                   double dim, double elem_bytes, double L) {
  Phase p = layer_phase(name, PhaseKind::score, Device::gpu, ComputeUnit::simt, Stream::gpu, L);
  p.work.flops = L * B * heads * vectors * (2 * dim + 2);
  p.work.hbm_bytes = L * B * (reads * vectors * dim * elem_bytes + heads * vectors * 4 + heads * dim * d.ba);
  p.work.launches = L;
  return p;
}

// A top-k / quantile threshold / mask over `elements` fp32 scores, `groups` times per sequence: the
// scores read once and the chosen indices written. That is what DRAM sees of any radix select on a
// GPU whose L2 holds the row: a row of up to a few thousand scores is selected in shared memory by one
// block, and a longer one's later passes re-read it from L2 (docs/validation/phase-bytes.md, rule 1;
// kvsim validate --device emu holds the kernels to it). It is the algorithm's work (the roofline
// bound); the kernel a deployment runs makes more passes, in rows of its own, with launches of its
// own: the phase declares its rows (B x groups) and their length, and each of its launches is one
// top-k call (model/kernel_model.hpp, torch_topk: its time comes from its own passes).
inline Phase select(std::string_view name, double B, double groups, double elements, double chosen, double L) {
  Phase p = layer_phase(name, PhaseKind::select, Device::gpu, ComputeUnit::simt, Stream::gpu, L);
  p.work.flops = L * B * groups * elements * 4;
  p.work.hbm_bytes = L * B * groups * (elements * 4 + chosen * 4);
  p.work.launches = L;
  p.rows = float(std::max(1.0, B * groups));
  p.row_elements = float(std::max(1.0, elements));
  return p;
}

// A host<->device copy of `bytes_per_seq` per layer per sequence through pinned memory. The DMA reads
// (h2d) or writes (d2h) host DRAM and writes or reads HBM; `run_bytes` is the contiguous run length
// of the gather (0 = one contiguous block).
inline Phase copy(std::string_view name, bool to_device, double B, double bytes_per_seq, double run_bytes,
                  double L) {
  Phase p = layer_phase(name, PhaseKind::copy, Device::pcie, ComputeUnit::simt, to_device ? Stream::h2d : Stream::d2h,
                        L);
  const double bytes = L * B * bytes_per_seq;
  (to_device ? p.work.h2d_bytes : p.work.d2h_bytes) = bytes;
  p.work.dram_bytes = bytes;
  p.work.hbm_bytes = bytes;
  p.work.launches = L;
  p.run_bytes = run_bytes;
  return p;
}

// A CPU routine over B sequences: `flops` and `dram_bytes` per sequence per layer.
inline Phase host(std::string_view name, double B, double flops, double dram_bytes, double run_bytes, double L) {
  Phase p = layer_phase(name, PhaseKind::host_kernel, Device::cpu, ComputeUnit::host, Stream::host, L);
  p.work.flops = L * B * flops;
  p.work.dram_bytes = L * B * dram_bytes;
  p.work.launches = L;
  p.run_bytes = run_bytes;
  return p;
}

// A GPU gather/compaction inside HBM: read and write `bytes` per layer, in runs of `run_bytes`.
inline Phase gather(std::string_view name, double bytes_per_layer, double run_bytes, double L) {
  Phase p = layer_phase(name, PhaseKind::gather, Device::gpu, ComputeUnit::simt, Stream::gpu, L);
  p.work.hbm_bytes = L * 2 * bytes_per_layer;
  p.work.launches = L;
  p.run_bytes = run_bytes;
  return p;
}

// Observation-window scoring at prefill (SnapKV, ChunkKV, SentenceKV): the last `window` queries of
// every query head against all `n` keys, softmax, and the scores summed over the window; on `layers`
// layers. The prefill attention kernel does not expose probabilities, so they are recomputed.
inline Phase window_scores(const Deployment& d, std::string_view name, double n, double window, double layers) {
  const Shape s = shape(d);
  Phase p{name, PhaseKind::score, Device::gpu, ComputeUnit::tensor_act, {}};
  p.work.flops = layers * s.hq * window * n * (2 * s.hd + 5);
  p.work.hbm_bytes = layers * (s.hkv * n * s.key_row + s.hq * window * s.hd * s.ba + s.hq * n * 4 * 2);
  p.work.launches = layers * 2;
  return p;
}

// One layer's K and V of one prompt: the transient HBM a compressing or offloading policy needs while
// it builds its state layer by layer during prefill.
inline double prompt_layer_kv(const Deployment& d, double prompt) { return prompt * shape(d).kv_row; }

// Memory of a policy that evicts at prefill and keeps `kept` prompt tokens (plus the generated ones)
// in HBM: the kept KV per sequence, and one prompt layer transiently while it compresses.
inline MemoryDemand evicted_cache(const Deployment& d, double kept, double output, double prompt) {
  MemoryDemand m;
  m.kv_hbm_per_seq = (kept + output) * d.kv_bytes_per_token();
  m.hbm_per_seq = m.kv_hbm_per_seq;
  m.hbm_fixed = prompt_layer_kv(d, prompt);
  return m;
}

}  // namespace kvsim::blocks
