// Google Benchmarks of every host reference kernel as `kvsim validate` runs it
// (`kvsim bench --benchmark_filter=HostKernel`): one instance per CPU thread at once, inputs cycled so
// they come from DRAM, at the largest size of each kernel's validation grid. Counters, all from each
// thread's CPU clock (as `kvsim validate` times; summed over the threads):
//   dram_GBps, fp32_GFLOPs     achieved DRAM bandwidth and fp32 rate (the bytes and FLOPs the model counts)
//   dram_of_ceiling, fp32_of_ceiling   the same as fractions of the host ceilings measured in this
//                              process on first use, timed the same way (STREAM triad, Eigen SGEMM:
//                              validate::measure_host_ceilings). Read the one the model says binds.
//   gather_of_ceiling          (cpu_attention, cpu_rerank) the fraction of the scattered-row read ceiling:
//                              the best rate of BM_HostKernelGather/<phase>/pf<N>, which reads the same
//                              rows in the same order and does nothing else (validate::gather_read_cases),
//                              measured earlier in this process. The DRAM ceiling is a stream; these
//                              kernels read 512-byte rows at random addresses, and this says how close
//                              they come to the best a gather does on this machine.
//   warm_of_ceiling            (the same two, optimized) the fraction of BM_HostKernelWarm/<phase>: the kernel
//                              on one cache-resident copy of 2048 rows, i.e. its rate without DRAM.
//                              min(gather, warm) bounds a kernel that overlaps its reads with its compute
//                              perfectly; 1 / (1/gather + 1/warm) is the rate of one that does not.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>
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

// The rates of the bound benchmarks' last run (the one Google Benchmark reports), by what they bound
// ("gather" or "warm"), kernel phase and variant, per thread; a phase's bound is its best variant's
// sum over the threads.
std::mutex g_bound_mu;
std::map<std::string, std::map<std::string, std::map<std::string, std::vector<double>>>> g_bound;

void record_bound(const std::string& kind, const std::string& phase, const std::string& variant, int thread,
                  double rate) {
  std::lock_guard<std::mutex> lock(g_bound_mu);
  auto& v = g_bound[kind][phase][variant];
  v.resize(size_t(threads()), 0.0);
  v[size_t(thread)] = rate;
}

double bound(const std::string& kind, const std::string& phase) {
  std::lock_guard<std::mutex> lock(g_bound_mu);
  double best = 0;
  if (auto it = g_bound[kind].find(phase); it != g_bound[kind].end())
    for (const auto& [variant, rates] : it->second) {
      double sum = 0;
      for (double r : rates) sum += r;
      best = std::max(best, sum);
    }
  return best;
}

// The gathered kernels, whose rows also get a gather ceiling and a cache-resident run.
bool gathered(const std::string& phase) { return phase == "cpu_attention" || phase == "cpu_rerank"; }
constexpr double kWarmSize = 2048;  // rows of the cache-resident run: 2 or 4 MiB of rows per thread

// One case at size `size` (0: the largest of its grid) with `cold` bytes of inputs cycled per thread.
void run_case(benchmark::State& state, const validate::Case& c, double size = 0,
              double cold = validate::Options{}.cold_bytes) {
  const validate::HostCeilingsMeasured& h = host_ceilings();
  const validate::Instance in = c.make(size > 0 ? size : c.grid.back(), state.thread_index(), cold);
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
  // A bound run records this thread's rate; a kernel measured against bounds reports its fractions.
  if (c.phase.rfind("gather_read/", 0) == 0) {
    const size_t slash = c.phase.rfind('/');
    const std::string variant = c.phase.substr(slash + 1);
    // A variant with arithmetic in between (+fma4) shows the overlap, it is not part of the ceiling.
    if (variant.find("+fma") == std::string::npos)
      record_bound("gather", c.phase.substr(12, slash - 12), variant, state.thread_index(), bw);
  } else if (cold == 0) {
    record_bound("warm", c.phase, "", state.thread_index(), bw);
  } else {
    if (const double g = bound("gather", c.phase); g > 0) state.counters["gather_of_ceiling"] = bw / g;
    // The warm run is the optimized kernel's: a reference kernel is not measured against it.
    const bool optimized = c.kernels.rfind("kvsim::host", 0) == 0;
    if (const double w = bound("warm", c.phase); w > 0 && optimized) state.counters["warm_of_ceiling"] = bw / w;
  }
}

// Registered at start-up, one per validation case.
const bool registered = [] {
  // BM_HostKernel/<phase>: the optimized host kernels (kernels/host/) where they exist;
  // BM_HostKernelRef/<phase>: the reference kernels (kvsim::ref), for the comparison.
  // First BM_HostKernelGather/<phase>/pf<N> (the rows alone) and BM_HostKernelWarm/<phase> (the optimized
  // kernel on one cache-resident copy of kWarmSize rows: its compute without DRAM), so that the kernels
  // after them can report against them.
  for (const validate::Case& c : validate::gather_read_cases())
    benchmark::RegisterBenchmark(("BM_HostKernelGather/" + c.phase.substr(12)).c_str(),
                                 [c](benchmark::State& s) { run_case(s, c); })
        ->Threads(threads())
        ->MinTime(0.2);
  for (const validate::Case& c : validate::host_cases(true))
    if (gathered(c.phase))
      benchmark::RegisterBenchmark(("BM_HostKernelWarm/" + c.phase).c_str(),
                                   [c](benchmark::State& s) { run_case(s, c, kWarmSize, 0); })
          ->Threads(threads())
          ->MinTime(0.2);
  for (const bool optimized : {true, false})
    for (const validate::Case& c : validate::host_cases(optimized))
      benchmark::RegisterBenchmark(((optimized ? "BM_HostKernel/" : "BM_HostKernelRef/") + c.phase).c_str(),
                                   [c](benchmark::State& s) { run_case(s, c); })
          ->Threads(threads())
          ->MinTime(0.2);
  return true;
}();

}  // namespace
