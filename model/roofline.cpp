#include "model/roofline.hpp"

namespace kvsim {

Machine make_machine(const GpuSpec& gpu, const HostSpec& host, DType gemm_dtype, DType act_dtype, bool cuda_graphs,
                     const Calibration& cal, int gpus_per_host) {
  Machine m;
  m.tensor = gpu.tensor_peak(gemm_dtype);
  // A 16-bit activation dtype the GPU lacks (bf16 on Volta) runs as fp16.
  m.tensor_act = gpu.tensor_peak(act_dtype) > 0 ? gpu.tensor_peak(act_dtype) : gpu.tensor_fp16;
  m.simt = gpu.fp32;
  m.host_compute = host.fp32 / gpus_per_host;
  m.hbm = gpu.hbm_bandwidth;
  m.dram = host.dram_bandwidth / gpus_per_host;
  m.h2d = gpu.h2d_pinned;
  m.d2h = gpu.d2h_pinned;
  m.h2d_duplex = gpu.h2d_under_d2h > 0 ? gpu.h2d_under_d2h : gpu.h2d_pinned;
  m.d2h_duplex = gpu.d2h_under_h2d > 0 ? gpu.d2h_under_h2d : gpu.d2h_pinned;
  // Collectives go over NVLink when the GPU has it, otherwise through PCIe peer-to-peer.
  m.link = gpu.nvlink_bandwidth > 0 ? gpu.nvlink_bandwidth : std::min(gpu.h2d_pinned, gpu.d2h_pinned);
  m.kernel_latency = cuda_graphs ? gpu.kernel_latency : gpu.host_launch_latency;
  m.calibration = &cal;
  return m;
}

PhaseTime roofline(const Phase& p, const Machine& m) {
  auto eff = [&](Ceiling c) { return m.calibration->efficiency(p, c, phase_bytes_on(p, c)); };
  double peak = 0;
  switch (p.unit) {
    case ComputeUnit::tensor: peak = m.tensor * eff(Ceiling::tensor); break;
    case ComputeUnit::tensor_act: peak = m.tensor_act * eff(Ceiling::tensor); break;
    case ComputeUnit::simt: peak = m.simt * eff(Ceiling::simt); break;
    case ComputeUnit::host: peak = m.host_compute * eff(Ceiling::host_compute); break;
  }
  const Work& w = p.work;
  PhaseTime t{0, Bound::latency};
  auto consider = [&](double amount, double rate, Bound b) {
    if (amount <= 0) return;
    const double s = amount / rate;
    if (s > t.seconds) t = {s, b};
  };
  consider(w.flops, peak, Bound::compute);
  consider(w.hbm_bytes, m.hbm * eff(Ceiling::hbm), Bound::hbm);
  consider(w.dram_bytes, m.dram * eff(Ceiling::dram), Bound::dram);
  consider(w.h2d_bytes, m.h2d * eff(Ceiling::h2d), Bound::h2d);
  consider(w.d2h_bytes, m.d2h * eff(Ceiling::d2h), Bound::d2h);
  consider(w.link_bytes, m.link * eff(Ceiling::link), Bound::interconnect);
  // Kernel launches cost GPU time; CPU routines and copies have their own call costs (policies add
  // them as launches on those devices with the same per-call latency until calibrated separately).
  const double fixed = w.launches * m.kernel_latency;
  if (fixed > t.seconds) t.bound = Bound::latency;
  t.seconds += fixed;
  return t;
}

}  // namespace kvsim
