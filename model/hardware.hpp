// A GPU as data: what the roofline and the memory model need. Loaded from scenarios/hardware/*.yaml,
// where every number carries its source. Units: bytes, bytes/s, FLOP/s, seconds (SI in memory).
#pragma once
#include <optional>
#include <string>

#include "core/dtype.hpp"
#include "core/yaml_reader.hpp"

namespace kvsim {

struct GpuSpec {
  std::string name, description, architecture;
  std::string default_host;  // "" = none; then a scenario must name its host
  double hbm_capacity_bytes = 0;
  double hbm_bandwidth = 0;          // bytes/s
  double tensor_fp16 = 0, tensor_bf16 = 0, tensor_fp8 = 0;  // FLOP/s, dense; 0 = not supported
  double fp32 = 0;                   // FLOP/s, CUDA cores
  int sm_count = 0;
  double l2_bytes = 0;
  int pcie_generation = 0, pcie_lanes = 0;
  double h2d_pinned = 0, d2h_pinned = 0;      // bytes/s, measured or estimated
  // Each direction's bandwidth while the other direction is also busy (PCIe is full duplex, but
  // DMA engines and the root complex do not sustain both at full rate). Default: unidirectional.
  double h2d_under_d2h = 0, d2h_under_h2d = 0;
  double nvlink_bandwidth = 0;                // bytes/s per direction; 0 = no NVLink
  double kernel_latency = 0;                  // s per kernel inside a CUDA graph
  double host_launch_latency = 0;             // s per kernel launched from the host without graphs

  // Peak tensor-core FLOP/s for GEMMs in `t` (fp32 falls back to CUDA cores). 0 if unsupported.
  double tensor_peak(DType t) const;
};

GpuSpec load_gpu(YamlMap m);

}  // namespace kvsim
