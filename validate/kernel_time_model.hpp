// The kernel time model: what an emulated launch would take on a library GPU, from what the CUDA
// emulator counted while it ran (kernels/emu/counters.hpp), the GPU's datasheet and a few latencies
// measured by public microbenchmarks. No constant is fitted to any kernel (issue 42 item 3).
//
// One launch of B blocks of T threads (W = ceil(T / 32) warps) using S bytes of shared memory per block:
//
//   r        = min(threads_per_SM / 32W, blocks_per_SM, shared_per_SM / S)   blocks an SM holds at once
//   waves    = ceil(B / (SMs x r))
//   t_memory = distinct sectors x 32 B / HBM bandwidth (datasheet)          the launch's DRAM traffic
//   t_chain  = waves x (chain_global x l_mem + chain_shared x l_shared + barriers x l_barrier) / clock
//   l_mem    = f x l_dram + (1 - f) x l_L2,  f = distinct sectors read / sectors its loads requested
//   t_link   = distinct sectors of mapped pinned host memory x 32 B / pinned host-to-device rate
//   t_launch = kernel_us (the hardware file: the GPU's own cost per kernel)
//   t        = t_launch + max(t_memory, t_link, t_chain)
// (t_link and the host loads' latency were added after the first comparison: docs/validation/
// kernel-time-model.md, "Second rule".) A load from host memory is charged a DRAM round trip in the
// chain: the link's own latency is not in the library.
//
// t_memory is the bound when many warps keep loads in flight; t_chain when few do. chain_global is the
// longest chain of loads and atomics one thread of one block issues, joined at barriers (each barrier
// interval adds the most any thread issued in it), so it counts one load in flight per thread: the
// Little's-law floor of a block that walks its data alone — a radix select over a million scores in one
// block pays 8 passes x 4096 loads per thread, each at the L2's latency once the first pass brought
// the row in. Blocks in the same wave run side by side; waves run one after another.
//
// A call (one kvsim kernel entry point: its launches, memsets, copies and host synchronizations) as a
// stream of calls timed back to back with CUDA events, the way the GPU kit times it:
//
//   device = sum of launch times + memsets x kernel_us + copy_bytes / pinned link rate
//   host   = (launches + memsets) x host_launch_us + copies x t_call
//   t_call = max(device, host), or device + host when the call synchronizes with the host (a host
//            sync lets neither side run ahead of the other)
//
// What it leaves out, on purpose: arithmetic (no kernel here is compute-bound: the emulator counts no
// instructions but memory ones), registers as an occupancy limit (the emulator cannot see them),
// bank conflicts and atomic contention, ILP within a thread (a chain counts every load as waiting on
// the one before: an upper bound for unrolled loops), and L2 residency across calls (each call is cold).
// docs/validation/kernel-time-model.md has the constants with their sources and the check against every
// kernel timing measured on an H200.
#pragma once
#include <string>
#include <vector>

#include "kernels/emu/counters.hpp"
#include "model/hardware.hpp"

namespace kvsim::validate {

// What the model needs of a GPU beyond its hardware file: its compute capability's per-SM limits (CUDA
// C++ Programming Guide) and its architecture's latencies in cycles (pointer-chase microbenchmarks),
// each with its source: scenarios/measurements/gpu-microarchitecture.yaml.
struct Microarchitecture {
  std::string compute_capability;  // "9.0", "8.0", ...: the file's key for the GPU
  double threads_per_sm = 0, blocks_per_sm = 0, shared_per_sm = 0;
  double fp32_lanes_per_sm = 0;  // fp32 FMAs per clock per SM: converts the datasheet FP32 rate to a clock
  double l2_cycles = 0, dram_cycles = 0, shared_cycles = 0, barrier_cycles = 0;
  std::string source;
};

struct TimeModelGpu {
  GpuSpec spec;
  Microarchitecture arch;
  double clock_hz = 0;        // the SM's boost clock, from the datasheet FP32 rate (see the file's header)
  std::string clock_source;
  double t_call = 0;          // host cost of one cudaMemcpyAsync (model/kernel_model.hpp, kernel_constants)
};

// The GPU's entry in the microarchitecture file; an error names the file and the missing GPU or field.
TimeModelGpu load_time_model_gpu(const GpuSpec& gpu, const std::string& path);

struct LaunchTime {
  std::string kernel;
  double blocks = 0, threads = 0, shared_bytes = 0;
  double blocks_per_sm = 0, waves = 0;
  double t_launch = 0, t_memory = 0, t_link = 0, t_chain = 0;
  double seconds = 0;
  const char* bound = "";  // "memory", "link", "chain" or "launch"
};

struct CallTime {
  std::vector<LaunchTime> launches;
  double device = 0, host = 0;
  bool synchronizes = false;
  double seconds = 0;
  // The largest term of the whole call: "launch", "memory", "chain", "copy" or "host".
  std::string bound;
};

LaunchTime predict_launch(const emu::LaunchCounts& c, const TimeModelGpu& g);
CallTime predict_call(const emu::Counts& c, const TimeModelGpu& g);

}  // namespace kvsim::validate
