// Unit constants. Bandwidths in the YAML library are decimal (GB/s = 1e9 B/s, as vendors quote them);
// capacities are binary (GiB), as memory is addressed.
#pragma once

namespace kvsim {
inline constexpr double kGB = 1e9;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kTFLOP = 1e12;
inline constexpr double kGFLOP = 1e9;
inline constexpr double kUs = 1e-6;
}  // namespace kvsim
