#include "validate/kernel_time_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.hpp"
#include "core/yaml_reader.hpp"
#include "model/kernel_model.hpp"

namespace kvsim::validate {

TimeModelGpu load_time_model_gpu(const GpuSpec& gpu, const std::string& path) {
  YamlMap top(load_yaml_file(path), path, "");
  if (top.string("schema") != "kvsim.gpu_microarchitecture/1")
    top.fail("schema", "expected kvsim.gpu_microarchitecture/1");
  (void)top.string("description", "");
  YamlMap gpus = top.map("gpus");
  if (!gpus.has(gpu.name))
    gpus.fail(gpu.name, "no entry for GPU '" + gpu.name + "': add its compute capability (NVIDIA's CUDA GPUs list)");
  YamlMap e = gpus.map(gpu.name);
  const std::string cc = e.string("compute_capability");
  YamlMap archs = top.map("architectures");
  if (!archs.has(cc))
    e.fail("compute_capability", "'" + cc + "' has no entry under architectures: add its per-SM limits and latencies with their sources");
  YamlMap a = archs.map(cc);
  TimeModelGpu g;
  g.spec = gpu;
  g.t_call = kernel_constants::kCopyCallS;
  Microarchitecture& m = g.arch;
  m.compute_capability = cc;
  m.threads_per_sm = a.number("threads_per_sm", Range::at_least(32, 4096));
  m.blocks_per_sm = a.number("blocks_per_sm", Range::at_least(1, 64));
  m.shared_per_sm = a.number("shared_kib_per_sm", Range::at_least(16, 1024)) * 1024;
  m.fp32_lanes_per_sm = a.number("fp32_lanes_per_sm", Range::at_least(1, 1024));
  m.l2_cycles = a.number("l2_cycles", Range::at_least(1, 10000));
  m.dram_cycles = a.number("dram_cycles", Range::at_least(1, 10000));
  m.shared_cycles = a.number("shared_cycles", Range::at_least(1, 1000));
  m.barrier_cycles = a.number("barrier_cycles", Range::at_least(0, 1000));
  m.source = a.string("source");
  if (gpu.hbm_bandwidth <= 0 || gpu.sm_count <= 0 || gpu.fp32 <= 0)
    throw_input_error(gpu.name, 0, "hbm / sm_count / fp32_tflops",
                      "the time model needs the GPU's HBM bandwidth, SM count and FP32 rate (its hardware file)");
  // The datasheet FP32 rate is SMs x lanes x 2 (an FMA) x the boost clock: the clock, from it.
  g.clock_hz = gpu.fp32 / (gpu.sm_count * m.fp32_lanes_per_sm * 2);
  char b[160];
  std::snprintf(b, sizeof b, "derived: fp32 %.1f TFLOP/s / (%d SMs x %g lanes x 2) = %.0f MHz", gpu.fp32 / 1e12,
                gpu.sm_count, m.fp32_lanes_per_sm, g.clock_hz / 1e6);
  g.clock_source = b;
  e.finish();
  a.finish();
  return g;
}

LaunchTime predict_launch(const emu::LaunchCounts& c, const TimeModelGpu& g) {
  LaunchTime t;
  t.kernel = c.kernel;
  t.blocks = double(c.grid.x) * c.grid.y * c.grid.z;
  t.threads = double(c.block.x) * c.block.y * c.block.z;
  t.shared_bytes = double(c.dynamic_shared_bytes + c.static_shared_bytes);
  const Microarchitecture& a = g.arch;
  const double warps = std::ceil(t.threads / 32);
  double r = std::min(std::floor(a.threads_per_sm / (32 * warps)), a.blocks_per_sm);
  if (t.shared_bytes > 0) r = std::min(r, std::floor(a.shared_per_sm / t.shared_bytes));
  t.blocks_per_sm = std::max(1.0, r);
  t.waves = std::ceil(t.blocks / (g.spec.sm_count * t.blocks_per_sm));
  t.t_launch = g.spec.kernel_latency;
  t.t_memory = double(c.unique_bytes()) / g.spec.hbm_bandwidth;
  // Mapped pinned host memory (a zero-copy gather) crosses the host link at its measured rate.
  t.t_link = g.spec.h2d_pinned > 0 ? 32.0 * double(c.host_sectors) / g.spec.h2d_pinned : 0;
  // The share of the device loads' sectors that come from DRAM: each distinct sector once, the repeats
  // from L2. A host load waits at least a DRAM round trip (the link's own latency is not in the library).
  const double requested = double(c.load_sectors + c.atomic_sectors);
  const double host = std::min(double(c.host_load_sectors), requested);
  const double device = requested - host;
  const double f = device > 0 ? std::clamp(double(c.unique_read_sectors) / device, 0.0, 1.0) : 1.0;
  const double h = requested > 0 ? host / requested : 0;
  const double l_mem = h * a.dram_cycles + (1 - h) * (f * a.dram_cycles + (1 - f) * a.l2_cycles);
  t.t_chain = t.waves *
              (double(c.chain_global) * l_mem + double(c.chain_shared) * a.shared_cycles +
               double(c.barriers) * a.barrier_cycles) /
              g.clock_hz;
  const double body = std::max({t.t_memory, t.t_link, t.t_chain});
  t.seconds = t.t_launch + body;
  t.bound = t.t_launch >= body ? "launch" : body == t.t_chain ? "chain" : body == t.t_link ? "link" : "memory";
  return t;
}

CallTime predict_call(const emu::Counts& c, const TimeModelGpu& g) {
  CallTime r;
  double launch = 0, memory = 0, chain = 0, link = 0;
  for (const emu::LaunchCounts& l : c.launches) {
    r.launches.push_back(predict_launch(l, g));
    const LaunchTime& t = r.launches.back();
    r.device += t.seconds;
    launch += t.t_launch;
    const double body = std::max({t.t_memory, t.t_link, t.t_chain});
    (body == t.t_chain ? chain : body == t.t_link ? link : memory) += body;
  }
  const double memsets = double(c.memsets) * g.spec.kernel_latency;
  const double copy = g.spec.h2d_pinned > 0 ? double(c.copy_bytes) / g.spec.h2d_pinned : 0;
  r.device += memsets + copy;
  launch += memsets;
  r.host = double(c.launches.size() + c.memsets) * g.spec.host_launch_latency + double(c.copies) * g.t_call;
  r.synchronizes = c.host_syncs > 0;
  r.seconds = r.synchronizes ? r.device + r.host : std::max(r.device, r.host);
  const double host_share = r.synchronizes ? r.host : (r.host > r.device ? r.host : 0);
  const std::pair<double, const char*> terms[] = {
      {launch, "launch"}, {memory, "memory"}, {chain, "chain"}, {link, "link"}, {copy, "copy"}, {host_share, "host"}};
  r.bound = std::max_element(std::begin(terms), std::end(terms), [](auto& x, auto& y) { return x.first < y.first; })->second;
  return r;
}

}  // namespace kvsim::validate
