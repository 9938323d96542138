#include "model/library_json.hpp"

#include "core/error.hpp"
#include "core/units.hpp"

namespace kvsim {

nlohmann::json gpu_json(const GpuSpec& g) {
  return {{"name", g.name},
          {"description", g.description},
          {"architecture", g.architecture},
          {"default_host", g.default_host},
          {"hbm_capacity_bytes", g.hbm_capacity_bytes},
          {"hbm_bandwidth_bytes_s", g.hbm_bandwidth},
          {"tensor_fp16_flops", g.tensor_fp16},
          {"tensor_bf16_flops", g.tensor_bf16},
          {"tensor_fp8_flops", g.tensor_fp8},
          {"fp32_flops", g.fp32},
          {"sm_count", g.sm_count},
          {"l2_bytes", g.l2_bytes},
          {"pcie_generation", g.pcie_generation},
          {"pcie_lanes", g.pcie_lanes},
          {"h2d_pinned_bytes_s", g.h2d_pinned},
          {"d2h_pinned_bytes_s", g.d2h_pinned},
          {"nvlink_bytes_s", g.nvlink_bandwidth},
          {"kernel_latency_s", g.kernel_latency},
          {"host_launch_latency_s", g.host_launch_latency},
          {"ridge_bf16_flop_per_byte", g.tensor_bf16 > 0 ? g.tensor_bf16 / g.hbm_bandwidth : g.tensor_fp16 / g.hbm_bandwidth}};
}

nlohmann::json host_json(const HostSpec& h) {
  return {{"name", h.name},           {"description", h.description},   {"sockets", h.sockets},
          {"cores", h.cores},         {"dram_capacity_bytes", h.dram_capacity_bytes},
          {"dram_bandwidth_bytes_s", h.dram_bandwidth}, {"fp32_flops", h.fp32}, {"bf16_flops", h.bf16},
          {"pcie_generation", h.pcie_generation}, {"pcie_lanes", h.pcie_lanes}};
}

nlohmann::json model_json(const ModelConfig& m) {
  return {{"name", m.name},
          {"description", m.description},
          {"family", m.family},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"query_heads", m.query_heads},
          {"kv_heads", m.kv_heads},
          {"head_dim", m.head_dim},
          {"ffn_hidden", m.ffn_hidden},
          {"vocab", m.vocab},
          {"tied_embeddings", m.tied_embeddings},
          {"qkv_bias", m.qkv_bias},
          {"rope_theta", m.rope_theta},
          {"max_context", m.max_context},
          {"dtype", std::string(to_string(m.dtype))},
          {"params", m.total_params()},
          {"kv_bytes_per_token", m.kv_bytes_per_token(bytes_of(m.dtype))}};
}

nlohmann::json policy_json(const Policy& p) {
  nlohmann::json j = {{"name", std::string(p.name())}, {"summary", std::string(p.summary())}};
  nlohmann::json params = nlohmann::json::array();
  for (const auto& s : p.params())
    params.push_back({{"name", s.name},
                      {"default", s.choices.empty() ? nlohmann::json(s.default_value)
                                                    : nlohmann::json(param_text(s, s.default_value))},
                      {"range", s.choices.empty() ? s.range.describe() : "one of " + join(s.choices)},
                      {"integer", s.integer}, {"doc", s.doc}});
  j["params"] = params;
  return j;
}

}  // namespace kvsim
