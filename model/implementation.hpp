// An implementation profile: how the code a paper measured actually runs, where that differs from an
// efficient serving engine. A paper's latency or memory comes from its implementation, not only from
// its algorithm; kvsim models the implementation (chosen in the scenario's `implementation:` block)
// instead of adjusting efficiencies until a number matches. See docs/scenarios.md and
// docs/reproductions.md.
#pragma once
#include <memory>

#include "model/deployment.hpp"
#include "model/host_ops.hpp"
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
  // Operators dispatched one by one from the host (PyTorch eager: Python and ATen dispatch, then
  // cudaLaunchKernel, per operator) instead of launched by an engine or replayed as a CUDA graph. The
  // simulator then runs a host dispatch stream that issues every operator in program order (Machine:
  // dispatch_s); small steps become dispatch-bound, large ones stay HBM-bound. Every number here is a
  // measurement (tools/measure/torch_dispatch.py; docs/scenarios.md, "implementation").
  bool dispatch_eager = false;
  double ops_per_layer = 0;      // operators one decoder layer issues in a decode step
  double kernels_per_layer = 0;  // of those, the ones that launch a GPU kernel (each pays host_launch_us)
  double ops_per_step = 0;       // the forward pass's operators outside the layers (embedding, final norm,
                                 // LM head, sampling); generate()'s own loop is loop_us
  double kernels_per_step = 0;
  double dispatch_us = 0;        // host time per operator (Python and framework dispatch), microseconds
  // The host dispatch_us and loop_us were measured on (`measured_on:`, a host name): they are single-
  // threaded instruction streams, so they scale to the scenario's host by the ratio of one core's
  // clocks (HostSpec::clock_hz, the rule of model/host_ops.hpp). 0 = not given or no clock: not scaled.
  double dispatch_clock_hz = 0;
  // Host time per step of the generation loop around the forward pass (Hugging Face generate():
  // input and cache-position updates, logits processors, stopping criteria), microseconds. It runs
  // on the dispatch stream with the step's once-per-step operators: in the steady state of a loop,
  // host time between two forward passes delays the step wherever in the loop it falls.
  double loop_us = 0;
  // Host-device syncs (measured by tools/measure/torch_dispatch.py, which names the Transformers line
  // of each): an operator that reads a GPU value on the host blocks the dispatch thread until the GPU
  // has run everything issued before it, so the host time after it cannot overlap the GPU time before
  // it. generate() syncs once per step (its stopping check): the simulator times one step from an idle
  // host and GPU, which is what that sync makes of the loop. Of the forward pass's operators outside
  // the layers (ops_per_step), `ops_before_layers` (and `kernels_before_layers` of kernels_per_step)
  // are issued before the first layer, with no GPU work of the step to hide them; the rest come after
  // the last layer (default 0: all of them there), and so does loop_us, although generate() issues
  // part of its loop between its sync and the forward pass (docs/scenarios.md, "Host-device syncs").
  double ops_before_layers = 0, kernels_before_layers = 0;
  // A sync in every decoder layer, at the attention call after the KV cache update (transformers
  // 4.44-4.45 flash_attention_2: a position-id check in _flash_attention_forward). `ops_before_sync`
  // of ops_per_layer (and `kernels_before_sync` of kernels_per_layer) are issued up to it, that one
  // included; the rest after.
  bool sync_per_layer = false;
  double ops_before_sync = 0, kernels_before_sync = 0;
  // How the policy's host phases run (`host_ops:`): `native` (default) as kvsim's own host kernels
  // (kernels/host/, their calls and pieces declared by the cost model), or `framework` as a framework's
  // stock operators, costed by a measured host implementation profile (`host_profile:`, a name in
  // scenarios/host-ops/ or a path; model/host_ops.hpp) for the phases it names.
  std::shared_ptr<const HostOpsProfile> host_ops;
};

// Reads the `implementation:` mapping (all fields optional; unknown fields are errors).
Implementation load_implementation(YamlMap m);

// Applies the profile to a deployment made by make_deployment.
void apply_implementation(Deployment& d, const Implementation& impl);

}  // namespace kvsim
