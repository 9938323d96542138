#include "model/hardware.hpp"

#include "core/units.hpp"

namespace kvsim {

double GpuSpec::tensor_peak(DType t) const {
  switch (t) {
    case DType::fp16: return tensor_fp16;
    case DType::bf16: return tensor_bf16;
    case DType::fp8: return tensor_fp8;
    case DType::fp32: return fp32;
  }
  return 0;
}

GpuSpec load_gpu(YamlMap m) {
  GpuSpec g;
  g.name = m.string("name");
  g.description = m.string("description", "");
  g.architecture = m.choice("architecture", {"volta", "turing", "ampere", "ada", "hopper", "blackwell"});
  g.default_host = m.string("default_host", "");  // optional: a scenario may name the host itself
  {
    auto mem = m.map("memory");
    g.hbm_capacity_bytes = mem.number("capacity_gib", Range::positive(4096)) * kGiB;
    g.hbm_bandwidth = mem.number("bandwidth_gbs", Range::positive(1e5)) * kGB;
    mem.finish();
  }
  {
    auto c = m.map("compute");
    g.tensor_fp16 = c.number("tensor_fp16_tflops", Range::positive(1e5)) * kTFLOP;
    g.tensor_bf16 = c.number("tensor_bf16_tflops", Range::positive(1e5), 0.0) * kTFLOP;
    g.tensor_fp8 = c.number("tensor_fp8_tflops", Range::positive(1e5), 0.0) * kTFLOP;
    g.fp32 = c.number("fp32_tflops", Range::positive(1e5)) * kTFLOP;
    c.finish();
  }
  g.sm_count = static_cast<int>(m.integer("sm_count", Range::between(1, 10000)));
  g.l2_bytes = m.number("l2_mib", Range::positive(1e5)) * 1024 * 1024;
  {
    auto p = m.map("pcie");
    g.pcie_generation = static_cast<int>(p.integer("generation", Range::between(1, 7)));
    g.pcie_lanes = static_cast<int>(p.integer("lanes", Range::between(1, 32)));
    g.h2d_pinned = p.number("h2d_pinned_gbs", Range::positive(1e4)) * kGB;
    g.d2h_pinned = p.number("d2h_pinned_gbs", Range::positive(1e4)) * kGB;
    g.h2d_under_d2h = p.number("h2d_under_d2h_gbs", Range{0, g.h2d_pinned / kGB, true}, g.h2d_pinned / kGB) * kGB;
    g.d2h_under_h2d = p.number("d2h_under_h2d_gbs", Range{0, g.d2h_pinned / kGB, true}, g.d2h_pinned / kGB) * kGB;
    p.finish();
  }
  if (m.has("nvlink")) {
    auto n = m.map("nvlink");
    g.nvlink_bandwidth = n.number("bandwidth_gbs", Range::positive(1e5)) * kGB;
    n.finish();
  } else {
    m.node("nvlink");  // known key, absent
  }
  {
    auto l = m.map("launch");
    g.kernel_latency = l.number("kernel_us", Range::at_least(0, 1e4)) * kUs;
    g.host_launch_latency = l.number("host_launch_us", Range::at_least(0, 1e4)) * kUs;
    l.finish();
  }
  m.finish();
  return g;
}

}  // namespace kvsim
