// Google Benchmarks of every host reference kernel as `kvsim validate` runs it
// (`kvsim bench --benchmark_filter=HostKernel`): one instance per CPU thread at once, inputs cycled so
// they come from DRAM, at the largest size of each kernel's validation grid. Counters: the achieved
// DRAM bandwidth and fp32 FLOP/s, and each as a fraction of the host profile's ceiling measured in
// the same process (STREAM triad and Eigen SGEMM over all threads: `kvsim host probe`, run once on
// first use) — `dram_of_ceiling` and `fp32_of_ceiling`; the one the model says binds is the one to read.
#include <benchmark/benchmark.h>

#include <thread>

#include "kernels/validate/validate.hpp"
#include "tools/kvsim/host_probe.hpp"

namespace {
using namespace kvsim;

const HostMeasurement& host_profile() {
  static const HostMeasurement h = measure_host(1.0, size_t(256) << 20);
  return h;
}

void run_case(benchmark::State& state, const validate::Case& c) {
  const HostMeasurement& h = host_profile();
  const validate::Instance in = c.make(c.grid.back(), state.thread_index(), validate::Options{}.cold_bytes);
  for (auto _ : state) {
    in.run();
    benchmark::ClobberMemory();
  }
  const double it = double(state.iterations());
  state.SetBytesProcessed(int64_t(in.work.dram_bytes * it));
  using C = benchmark::Counter;
  // Rates summed over the threads (each runs its own instance), as the ceilings are.
  state.counters["FLOPs"] = C(in.work.flops * it, C::kIsRate);
  state.counters["dram_of_ceiling"] = C(in.work.dram_bytes * it / h.dram_bandwidth, C::kIsRate);
  state.counters["fp32_of_ceiling"] = C(in.work.flops * it / h.fp32, C::kIsRate);
}

// Registered at start-up, one per validation case.
const bool registered = [] {
  for (const validate::Case& c : validate::host_cases())
    benchmark::RegisterBenchmark(("BM_HostKernel/" + c.phase).c_str(), [c](benchmark::State& s) { run_case(s, c); })
        ->Threads(int(std::max(1u, std::thread::hardware_concurrency())))
        ->UseRealTime()
        ->MinTime(0.2);
  return true;
}();

}  // namespace
