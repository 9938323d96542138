#include "model/roofline.hpp"

#include <algorithm>

namespace kvsim {

Machine make_machine(const GpuSpec& gpu, const HostSpec& host, DType gemm_dtype, DType act_dtype, bool cuda_graphs,
                     const Calibration& cal, int gpus_per_host) {
  Machine m;
  m.tensor = gpu.tensor_peak(gemm_dtype);
  // A 16-bit activation dtype the GPU lacks (bf16 on Volta) runs as fp16.
  m.tensor_act = gpu.tensor_peak(act_dtype) > 0 ? gpu.tensor_peak(act_dtype) : gpu.tensor_fp16;
  m.simt = gpu.fp32;
  m.host_compute = host.fp32 / gpus_per_host;
  m.host_cores = std::max(1.0, double(host.cores) / gpus_per_host);
  m.host_threads = cal.host_threads;
  // Measured on another host: the per-call costs scale by one core's clock.
  const double slow = clock_time_scale(cal.host_threads.clock_hz, host.clock_hz);
  m.host_threads.call_s *= slow;
  m.host_threads.region_s *= slow;
  m.hbm = gpu.hbm_bandwidth;
  m.dram = host.dram_bandwidth / gpus_per_host;
  m.h2d = gpu.h2d_pinned;
  m.d2h = gpu.d2h_pinned;
  m.h2d_duplex = gpu.h2d_under_d2h > 0 ? gpu.h2d_under_d2h : gpu.h2d_pinned;
  m.d2h_duplex = gpu.d2h_under_h2d > 0 ? gpu.d2h_under_h2d : gpu.d2h_pinned;
  // Collectives go over NVLink when the GPU has it, otherwise through PCIe peer-to-peer.
  m.link = gpu.nvlink_bandwidth > 0 ? gpu.nvlink_bandwidth : std::min(gpu.h2d_pinned, gpu.d2h_pinned);
  m.kernel_latency = cuda_graphs ? gpu.kernel_latency : gpu.host_launch_latency;
  m.sms = gpu.sm_count;
  m.calibration = &cal;
  return m;
}

HostLimits host_limits(const Phase& p, const Machine& m) {
  HostLimits h;
  if (m.host_ops) {
    if (const HostOpsPhase* f = m.host_ops->profile->find(p.name)) {
      const double instances = std::max(1.0, double(p.repeat));
      h.framework = true;
      h.threads = m.host_cores, h.compute = m.host_compute;
      h.dram = m.host_ops->rate(*f, p.work.dram_bytes / instances, m.host_cores, m.dram, &h.outside);
      h.fixed_s = instances * m.host_ops->fixed_s(*f);
      return h;
    }
  }
  if (p.lanes <= 0) {
    h.threads = m.host_cores, h.compute = m.host_compute, h.dram = m.dram;
  } else {
    h.threads = std::min(m.host_cores, std::max(1.0, double(p.lanes)));
    h.compute = m.host_compute * h.threads / m.host_cores;
    // Unmeasured, one core's bandwidth sets no limit of its own: the roofline stays a bound.
    h.dram = m.host_threads.core_dram > 0 ? std::min(m.dram, h.threads * m.host_threads.core_dram) : m.dram;
    if (h.threads > 1) h.fixed_s += std::max(1.0, double(p.repeat)) * m.host_threads.region_s;
  }
  if (p.lanes > 0) h.fixed_s += p.work.launches * m.host_threads.call_s / h.threads;  // its host calls
  return h;
}

double phase_efficiency(const Phase& p, Ceiling c, const Machine& m, bool* outside, bool* curve) {
  const Calibration& cal = *m.calibration;
  // A phase with no curve of its own and no measured constant on c is priced by its kernel model
  // (model/kernel_model.hpp), never by the fallback constant; the bare roofline (uncalibrated) stays 1.
  if (kernel_model_applies(p, c, m)) {
    if (curve) *curve = false;
    return kernel_model_efficiency(p, c, m, outside, nullptr);
  }
  if (cal.curves.empty()) {  // constants only (the roofline): what every branch below comes to
    if (curve) *curve = false;
    return cal.efficiency(p.kind, c, p.run_bytes);
  }
  const Work& w = p.work;
  if (p.kind == PhaseKind::gemm && (c == Ceiling::tensor || c == Ceiling::hbm) && w.flops > 0 && w.hbm_bytes > 0) {
    const double peak = p.unit == ComputeUnit::tensor_act ? m.tensor_act : m.tensor;
    const bool bandwidth_bound = m.hbm > 0 && w.flops / w.hbm_bytes < peak / m.hbm;
    if ((c == Ceiling::tensor) == bandwidth_bound) return cal.efficiency(p.kind, c, p.run_bytes);
  }
  return cal.efficiency(p, c, phase_bytes_on(p, c), outside, curve);
}

double gpu_fixed_seconds(const Phase& p, const Machine& m) {
  return p.work.launches * m.kernel_latency + kernel_model_extra_s(p, m);
}

double limited_efficiency(const Phase& p, Ceiling c, const Machine& m, const HostLimits& h, bool* outside,
                          bool* curve) {
  if (h.framework && is_host_ceiling(c)) {
    if (curve) *curve = true;
    return 1.0;
  }
  return phase_efficiency(p, c, m, outside, curve);
}

PhaseTime roofline(const Phase& p, const Machine& m) {
  const bool on_host = p.unit == ComputeUnit::host;
  const HostLimits h = on_host ? host_limits(p, m) : HostLimits{};
  bool outside = h.outside;
  auto eff = [&](Ceiling c, bool* curve) { return limited_efficiency(p, c, m, h, &outside, curve); };
  const Work& w = p.work;
  PhaseTime t;
  // Only the ceilings the phase uses are looked up: a curve is never read (or flagged as
  // extrapolated) for a tier the phase does not touch.
  auto consider = [&](double amount, double ceiling_rate, Ceiling c, Bound b) {
    if (amount <= 0) return;
    bool curve = false;
    const double s = amount / (ceiling_rate * eff(c, &curve));
    if (s > t.seconds) t.seconds = s, t.bound = b, t.ceiling = c, t.curve = curve;
  };
  switch (p.unit) {
    case ComputeUnit::tensor: consider(w.flops, m.tensor, Ceiling::tensor, Bound::compute); break;
    case ComputeUnit::tensor_act: consider(w.flops, m.tensor_act, Ceiling::tensor, Bound::compute); break;
    case ComputeUnit::simt: consider(w.flops, m.simt, Ceiling::simt, Bound::compute); break;
    case ComputeUnit::host:
      if (!h.framework) consider(w.flops, h.compute, Ceiling::host_compute, Bound::compute);
      break;
  }
  consider(w.hbm_bytes, m.hbm, Ceiling::hbm, Bound::hbm);
  consider(w.dram_bytes, on_host ? h.dram : m.dram, Ceiling::dram, Bound::dram);
  consider(w.h2d_bytes, m.h2d, Ceiling::h2d, Bound::h2d);
  consider(w.d2h_bytes, m.d2h, Ceiling::d2h, Bound::d2h);
  consider(w.link_bytes, m.link, Ceiling::link, Bound::interconnect);
  // Kernel launches cost GPU time; a host phase that declares its pieces pays the host's measured call
  // and parallel-region costs for its launches instead, and a framework host phase its measured fixed
  // time per layer (host_limits). Other host and copy phases pay the GPU's per-kernel latency for
  // theirs, as they always did.
  const double fixed = on_host && h.own_fixed(p) ? h.fixed_s : gpu_fixed_seconds(p, m);
  if (fixed > t.seconds) t.bound = Bound::latency;
  t.seconds += fixed;
  t.extrapolated = outside;
  if (t.ceiling != Ceiling::count && !t.curve && kernel_model_applies(p, t.ceiling, m)) {
    t.kernel = kernel_model_for(p);
    bool o = false;
    (void)kernel_model_efficiency(p, t.ceiling, m, &o, &t.kernel_class_curve);
  }
  return t;
}

}  // namespace kvsim
