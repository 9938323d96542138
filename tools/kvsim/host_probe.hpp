// `kvsim host probe`: measures this machine's host ceilings (DRAM bandwidth, fp32 FLOP/s over all
// cores) and prints a host profile in the library's YAML format, every number labelled `measured:`
// with how. The ci-2core profile was made this way.
#pragma once
#include <string>

namespace kvsim {
// `name` goes into the profile; `seconds` bounds the time spent per measurement.
std::string probe_host_yaml(const std::string& name, double seconds);
}  // namespace kvsim
