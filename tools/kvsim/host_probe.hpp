// `kvsim host probe`: measures this machine's host ceilings (DRAM bandwidth, fp32 FLOP/s over all
// cores) and prints a host profile in the library's YAML format, every number labelled `measured:`
// with how. The ci-2core profile was made this way.
#pragma once
#include <string>

#include <cstddef>

namespace kvsim {
// The host's ceilings as measured: DRAM bandwidth (STREAM triad, bytes/s) and fp32 FLOP/s (Eigen SGEMM),
// both over `threads` threads at once, best of repeats.
struct HostMeasurement {
  int threads = 1;
  double dram_bandwidth = 0, fp32 = 0;
  double clock_hz = 0;  // one core's clock with one thread busy (0 = not measured on this ISA)
  std::string cpu;
};
// `seconds` bounds each measurement; the triad arrays are `triad_array_bytes` each (far above the LLC).
// The CPU's model name from /proc/cpuinfo.
std::string host_cpu_model();
HostMeasurement measure_host(double seconds, size_t triad_array_bytes = size_t(512) << 20);

// `name` goes into the profile; `seconds` bounds the time spent per measurement.
std::string probe_host_yaml(const std::string& name, double seconds);
}  // namespace kvsim
