// The roofline of one phase running alone:
//   time = max(FLOPs / (peak * eff), bytes_tier / (bw_tier * eff) for every tier and link)
//          + launches * per-kernel latency
// and the bound is the term that wins (or "latency" when the fixed cost exceeds it). The discrete-event
// simulator reproduces exactly this time for a phase that runs alone.
#pragma once
#include "model/calibration.hpp"
#include "core/dtype.hpp"
#include "model/hardware.hpp"
#include "model/host.hpp"
#include "model/host_ops.hpp"
#include "model/kernel_model.hpp"
#include "model/phase.hpp"

namespace kvsim {

// The ceilings of one GPU server for one configuration, in bytes/s and FLOP/s, before efficiency.
struct Machine {
  double tensor = 0;        // GPU tensor-core peak for the weight (GEMM) dtype
  double tensor_act = 0;    // GPU tensor-core peak for the activation dtype (attention)
  double simt = 0;          // GPU CUDA-core fp32 peak
  double host_compute = 0;  // CPU fp32 peak, all cores (this GPU's share of the host)
  double host_cores = 1;    // cores of this GPU's share of the host
  HostThreads host_threads; // the host's measured call, region and per-core DRAM costs (calibration)
  double hbm = 0, dram = 0, h2d = 0, d2h = 0;
  double h2d_duplex = 0, d2h_duplex = 0;  // each PCIe direction's bandwidth while the other is busy
  double link = 0;          // per-direction GPU-GPU bandwidth for collectives (NVLink, else PCIe)
  double kernel_latency = 0;  // seconds per GPU kernel (graph or host launch)
  double sms = 0;             // the GPU's streaming multiprocessors (kernel models: how many rows run at once)
  // Host dispatch stream (an eager implementation, model/implementation.hpp): one host thread issues
  // every operator in program order, and a kernel cannot start before its operator is issued. Host
  // seconds to issue one decoder layer's operators and the operators outside the layers; the
  // simulator shares them out over the phases by their launches. 0 = no dispatch stream (an engine
  // with CUDA graphs or a C++ loop).
  double dispatch_layer_s = 0, dispatch_step_s = 0;
  // Host-device syncs in the dispatch stream (a value read on the host: Tensor.item(), bool(tensor)):
  // there the host waits until the GPU has run every kernel issued before, so host and GPU time add
  // up instead of overlapping. `sync_per_layer`: once per decoder layer, at its attention call (after
  // the KV cache update, before the attention kernel); `dispatch_layer_pre_sync_s` of the layer's
  // dispatch_layer_s is issued before that sync, the rest after. `dispatch_step_pre_s` of
  // dispatch_step_s is issued after the step's first sync and before the first layer, where no GPU
  // work of the step can hide it; the rest after the last layer (0: all of it there).
  bool sync_per_layer = false;
  double dispatch_layer_pre_sync_s = 0, dispatch_step_pre_s = 0;
  bool has_dispatch() const { return dispatch_layer_s > 0 || dispatch_step_s > 0; }
  // Host phases run as framework operators (model/host_ops.hpp): the measured profile scaled to this
  // host. Null = every host phase runs as native kernels.
  std::shared_ptr<const HostOpsOnTarget> host_ops;
  const Calibration* calibration = nullptr;
};

// `gemm_dtype` selects the weight-GEMM tensor peak (fp8 needs hardware fp8 support, checked by the
// caller), `act_dtype` the attention one. `cuda_graphs` chooses the per-kernel latency.
// `gpus_per_host` GPUs share one host (the tensor-parallel group): phases are per GPU, so each GPU
// gets that share of the host's DRAM bandwidth and CPU FLOP/s (its PCIe link is its own).
Machine make_machine(const GpuSpec& gpu, const HostSpec& host, DType gemm_dtype, DType act_dtype, bool cuda_graphs,
                     const Calibration& cal, int gpus_per_host = 1);

// What running on the host's cores costs a host phase that declares its pieces (Phase::lanes; its
// launches are then host calls); the roofline and the simulator both read it, so a phase alone takes
// the same time in both:
//   threads   = min(lanes, host cores), or every core when the phase declares no lanes
//   compute   = host fp32 peak x threads / cores
//   dram      = min(host DRAM bandwidth, threads x one core's DRAM bandwidth), or the host's when the
//               phase declares no lanes or one core's bandwidth was not measured
//   fixed_s   = launches x call cost / threads + one parallel region per instance (repeat) when
//               threads > 1
// A phase that declares no pieces is costed as before: every core, the whole DRAM bandwidth, and its
// launches at the GPU's kernel latency.
// A phase the machine's framework profile names (Machine::host_ops) is costed by it instead
// (`framework`): every core, fixed_s = repeat x the profile's scaled fixed time per layer, and `dram` the
// profile's scaled data rate for the bytes of one instance, reached at efficiency 1 (the rate is
// measured: no calibration efficiency applies on top) with no separate compute term (the measured time
// includes the operators' arithmetic).
struct HostLimits {
  double threads = 1, compute = 0, dram = 0, fixed_s = 0;
  bool framework = false;
  bool outside = false;  // framework: the profile's rate read outside its measured bytes
  // Whether the phase pays these fixed costs instead of GPU kernel latencies for its launches.
  bool own_fixed(const Phase& p) const { return framework || p.lanes > 0; }
};
HostLimits host_limits(const Phase& p, const Machine& m);

// The efficiency of ceiling c for phase p on machine m: what the roofline and the simulator divide
// the phase's work by. A phase of kind gemm is in one regime, by the rule `kvsim calibrate published`
// files a GEMM measurement by (validate/published.hpp): below the GPU's ridge (FLOPs per HBM byte under
// tensor peak / HBM bandwidth) its time is the HBM ceiling's, and it reads the hbm curve; at or above
// the ridge, the tensor curve. Its other ceiling takes the calibration's constant for the kind: that
// curve was fitted to GEMMs of the other regime (a square prefill GEMM, or a decode GEMM streaming its
// weights), so its value at this phase's bytes says nothing about the phase, and reading it outside
// its range would flag an extrapolation the phase's time does not rest on. Every other phase: the
// curve for its name and kind (Calibration::efficiency). *outside as there.
double phase_efficiency(const Phase& p, Ceiling c, const Machine& m, bool* outside = nullptr, bool* curve = nullptr);
// phase_efficiency for a phase whose host limits are `h` (host_limits; HostLimits{} off the host): a
// framework host phase's rate is measured whole, so its host ceilings run at efficiency 1, a
// measurement (*curve true). The roofline and the simulator both divide by this.
double limited_efficiency(const Phase& p, Ceiling c, const Machine& m, const HostLimits& h, bool* outside = nullptr,
                          bool* curve = nullptr);

struct PhaseTime {
  double seconds = 0;
  Bound bound = Bound::latency;
  bool extrapolated = false;  // an efficiency curve was read outside its measured range
  // The ceiling of the largest work term (the binding one, even when the fixed latency wins);
  // Ceiling::count when the phase has no work on any ceiling. `curve`: its efficiency came from a
  // curve, not the constant (Calibration::efficiency).
  Ceiling ceiling = Ceiling::count;
  bool curve = false;
  // The kernel model that priced the binding ceiling (model/kernel_model.hpp; none: a curve, a
  // measured constant, a host phase or the bare roofline did), and whether its class curve was measured.
  KernelModelId kernel = KernelModelId::none;
  bool kernel_class_curve = false;
};

// A GPU phase's fixed time: its launches at the kernel latency plus what its kernel model adds
// (model/kernel_model.hpp). The roofline and the simulator both use it.
double gpu_fixed_seconds(const Phase& p, const Machine& m);

PhaseTime roofline(const Phase& p, const Machine& m);

}  // namespace kvsim
