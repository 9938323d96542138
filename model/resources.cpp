#include "model/resources.hpp"

namespace kvsim::sim {

std::vector<double> capacities(const Machine& m) {
  return {m.tensor, m.simt, m.host_compute, m.hbm, m.dram, m.h2d, m.d2h, m.link, 1.0 /* host dispatch: seconds per second */};
}

std::vector<Coupling> couplings(const Machine& m) {
  if (m.h2d_duplex >= m.h2d && m.d2h_duplex >= m.d2h) return {};
  return {{size_t(Resource::h2d), size_t(Resource::d2h), m.h2d_duplex, m.d2h_duplex}};
}

const std::vector<std::string>& resource_names() {
  static const std::vector<std::string> names = {"gpu tensor cores", "gpu cuda cores", "host cpu", "hbm",
                                                 "host dram", "pcie h2d", "pcie d2h", "gpu link",
                                                 "host dispatch"};
  return names;
}

SimPhase to_sim_phase(const Phase& p, const Machine& m) {
  SimPhase s;
  to_sim_phase(p, m, s);
  return s;
}

void to_sim_phase(const Phase& p, const Machine& m, SimPhase& s) {
  s.name.assign(p.name);
  s.min_seconds = 0;
  const bool on_host = p.unit == ComputeUnit::host;
  const HostLimits host = on_host ? host_limits(p, m) : HostLimits{};
  s.latency = on_host && host.own_fixed(p) ? host.fixed_s : gpu_fixed_seconds(p, m);
  s.amount.assign(size_t(Resource::count), 0.0);
  auto eff = [&](Ceiling c) { return limited_efficiency(p, c, m, host); };
  auto put = [&](Resource r, double amount, Ceiling c) {
    if (amount > 0) s.amount[size_t(r)] += amount / eff(c);
  };
  switch (p.unit) {
    case ComputeUnit::tensor: put(Resource::tensor, p.work.flops, Ceiling::tensor); break;
    // Same tensor cores at another rate: count the FLOPs in time-equivalent units of the GEMM rate.
    case ComputeUnit::tensor_act: put(Resource::tensor, p.work.flops * (m.tensor / m.tensor_act), Ceiling::tensor); break;
    case ComputeUnit::simt: put(Resource::simt, p.work.flops, Ceiling::simt); break;
    case ComputeUnit::host:
      if (!host.framework) put(Resource::host_compute, p.work.flops, Ceiling::host_compute);
      break;
  }
  put(Resource::hbm, p.work.hbm_bytes, Ceiling::hbm);
  put(Resource::dram, p.work.dram_bytes, Ceiling::dram);
  put(Resource::h2d, p.work.h2d_bytes, Ceiling::h2d);
  put(Resource::d2h, p.work.d2h_bytes, Ceiling::d2h);
  put(Resource::link, p.work.link_bytes, Ceiling::link);
  // A host phase on fewer threads than cores, or at a framework's measured rate: its own rate limit
  // (the roofline's terms, host_limits).
  if (on_host && host.own_fixed(p)) {
    auto limit = [&](double amount, double rate, Ceiling c) {
      if (amount > 0) s.min_seconds = std::max(s.min_seconds, amount / (rate * eff(c)));
    };
    if (!host.framework) limit(p.work.flops, host.compute, Ceiling::host_compute);
    limit(p.work.dram_bytes, host.dram, Ceiling::dram);
  }
}

}  // namespace kvsim::sim
