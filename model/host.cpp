#include "model/host.hpp"

#include "core/units.hpp"

namespace kvsim {

HostSpec load_host(YamlMap m) {
  HostSpec h;
  h.name = m.string("name");
  h.description = m.string("description", "");
  h.sockets = static_cast<int>(m.integer("sockets", Range::between(1, 16)));
  h.cores = static_cast<int>(m.integer("cores", Range::between(1, 4096)));
  h.clock_hz = m.number("clock_ghz", Range::positive(10), 0.0) * 1e9;
  h.all_core_clock_hz = m.number("all_core_clock_ghz", Range::positive(10), 0.0) * 1e9;
  if (h.all_core_clock_hz > 0 && h.clock_hz > 0 && h.all_core_clock_hz > h.clock_hz)
    m.fail("all_core_clock_ghz", "is " + std::to_string(h.all_core_clock_hz / 1e9) +
                                     " GHz, above clock_ghz (the single-core maximum); allowed: at most clock_ghz");
  {
    auto d = m.map("dram");
    h.dram_capacity_bytes = d.number("capacity_gib", Range::positive(1 << 20)) * kGiB;
    h.dram_bandwidth = d.number("bandwidth_gbs", Range::positive(1e5)) * kGB;
    d.finish();
  }
  {
    auto c = m.map("compute");
    h.fp32 = c.number("fp32_gflops", Range::positive(1e8)) * kGFLOP;
    h.bf16 = c.number("bf16_gflops", Range::positive(1e9), 0.0) * kGFLOP;
    c.finish();
  }
  if (m.has("pcie")) {  // optional: a host measured without a GPU has no PCIe figures
    auto p = m.map("pcie");
    h.pcie_generation = static_cast<int>(p.integer("generation", Range::between(1, 7)));
    h.pcie_lanes = static_cast<int>(p.integer("lanes", Range::between(1, 1024)));
    p.finish();
  } else {
    m.node("pcie");
  }
  m.finish();
  return h;
}

}  // namespace kvsim
