#include "validate/host_threads.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/parallel.hpp"
#include "validate/parallel_time.hpp"
#include "kernels/backend/backend.hpp"

namespace kvsim::validate {

namespace {
using Clock = std::chrono::steady_clock;

// Median seconds per call of `fn` over `samples` samples of `inner` back-to-back calls (wall clock: a
// region's cost is its threads' start and join, which no thread's CPU clock sees whole).
template <typename Fn>
double median_per_call(Fn&& fn, int inner, int samples) {
  std::vector<double> s;
  for (int k = 0; k < samples; ++k) {
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) fn();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / inner);
  }
  std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
  return s[s.size() / 2];
}
}  // namespace

HostThreads measure_host_threads(const Timer& timer, const Options& o) {
  HostThreads h;
  const int samples = std::max(9, o.min_repeats);
  // One call over one token: a KV head's group (4 query rows) of d = 128 against one resident key.
  const int rows = 4, d = 128;
  std::vector<float> q(size_t(rows) * d, 0.5f), k(size_t(d), 0.25f), v(size_t(d), 1.0f), out(size_t(rows) * d), lse(rows);
  const int32_t idx = 0;
  const kernels::Backend& host = kernels::host_optimized_backend();
  const kernels::GatherAttentionParams call{.queries = q.data(), .rows = rows, .keys = k.data(), .values = v.data(),
                                            .resident_rows = 1, .d = d, .idx = &idx, .m = 1, .scale = 0.088f,
                                            .out = out.data(), .lse = lse.data()};
  h.call_s = median_per_call([&] { host.gather_attention(call); }, o.quick ? 200 : 2000, samples);
  // A parallel region over every core, empty body.
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  h.region_s = median_per_call([&] { parallel_for(cores, [](int, int) {}, cores); }, o.quick ? 20 : 200, samples);
  h.core_dram = measure_host_ceilings(1, timer, o).dram_bandwidth;
  h.clock_hz = core_clock_hz(o.quick ? 0.2 : 2.0);
  return h;
}

std::string host_threads_yaml(const HostThreads& h) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "host_threads:   # measured (validate/host_threads.hpp): what host phases that declare calls and pieces pay\n"
                "  call_us: %.3g         # measured: one optimized host attention call over one token (4 rows, d 128), median\n"
                "  region_us: %.3g       # measured: one parallel_for region over every core, empty body, median\n"
                "  core_dram_gbs: %.3g   # measured: STREAM triad on one thread, the other cores idle\n"
                "  clock_ghz: %.3g       # measured: one thread's chain of dependent adds (one per cycle), best of repeats;\n"
                "                        # a host that borrows call_us and region_us scales them by this over its clock_ghz\n",
                h.call_s * 1e6, h.region_s * 1e6, h.core_dram / 1e9, h.clock_hz / 1e9);
  return buf;
}

}  // namespace kvsim::validate
