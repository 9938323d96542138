// Google Benchmarks of every host reference kernel as `kvsim validate` runs it
// (`kvsim bench --benchmark_filter=HostKernel`): one instance per CPU thread at once, inputs cycled so
// they come from DRAM, at the largest size of each kernel's validation grid. Counters, all from each
// thread's CPU clock (as `kvsim validate` times; summed over the threads):
//   dram_GBps, fp32_GFLOPs     achieved DRAM bandwidth and fp32 rate (the bytes and FLOPs the model counts)
//   dram_of_ceiling, fp32_of_ceiling   the same as fractions of the host ceilings measured in this
//                              process on first use, timed the same way (STREAM triad, Eigen SGEMM:
//                              validate::measure_host_ceilings). Read the one the model says binds.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <thread>

#include "validate/parallel_time.hpp"
#include "validate/validate.hpp"

namespace {
using namespace kvsim;

int threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

const validate::HostCeilingsMeasured& host_ceilings() {
  static const validate::HostCeilingsMeasured h = [] {
    const auto c = validate::measure_host_ceilings(threads(), validate::cpu_timer(), validate::Options{});
    std::fprintf(stderr, "host ceilings (thread CPU clock, median, %d threads): DRAM %.1f GB/s, fp32 %.1f GFLOP/s\n",
                 threads(), c.dram_bandwidth / 1e9, c.fp32 / 1e9);
    return c;
  }();
  return h;
}

void run_case(benchmark::State& state, const validate::Case& c) {
  const validate::HostCeilingsMeasured& h = host_ceilings();
  const validate::Instance in = c.make(c.grid.back(), state.thread_index(), validate::Options{}.cold_bytes);
  double cpu = 0;
  for (auto _ : state) {
    const double t0 = thread_cpu_seconds();
    in.run();
    benchmark::ClobberMemory();
    cpu += thread_cpu_seconds() - t0;
  }
  const double it = double(state.iterations());
  const double bw = in.work.dram_bytes * it / cpu, fl = in.work.flops * it / cpu;  // this thread's rates
  state.counters["dram_GBps"] = bw / 1e9;
  state.counters["fp32_GFLOPs"] = fl / 1e9;
  state.counters["dram_of_ceiling"] = bw / h.dram_bandwidth;
  state.counters["fp32_of_ceiling"] = fl / h.fp32;
}

// Registered at start-up, one per validation case.
const bool registered = [] {
  // BM_HostKernel/<phase>: the optimized host kernels (kernels/host/) where they exist;
  // BM_HostKernelRef/<phase>: the reference kernels (kvsim::ref), for the comparison.
  for (const bool optimized : {true, false})
    for (const validate::Case& c : validate::host_cases(optimized))
      benchmark::RegisterBenchmark(((optimized ? "BM_HostKernel/" : "BM_HostKernelRef/") + c.phase).c_str(),
                                   [c](benchmark::State& s) { run_case(s, c); })
          ->Threads(threads())
          ->MinTime(0.2);
  return true;
}();

}  // namespace
