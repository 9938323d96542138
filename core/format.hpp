// Number formatting shared by every text report: one printf conversion of one double, so tables and
// notes format numbers the same way everywhere ("%.3f", "%+.1f%%", ...). `f` must hold exactly one
// floating-point conversion; the result is cut at 63 characters.
#pragma once
#include <cstdio>
#include <string>

namespace kvsim {

inline std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace kvsim
