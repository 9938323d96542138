// CUDA device intrinsics under the emulator. The standard float functions (expf, logf, fmaxf, sqrtf,
// fabs, ...) come from <cmath> in the global namespace, as on the device. The fast-math ones (__expf,
// __logf, __fdividef, rsqrtf) are computed exactly here: a GPU's results differ in the last bits, so
// tests compare with a tolerance. Anything not defined here or in <cmath> is a compile error.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <source_location>

#include "kernels/emu/checker.hpp"

inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }  // NaN -> 0, as CUDA

inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(unsigned(x)); }
inline int __clzll(long long x) { return std::countl_zero((unsigned long long)(x)); }
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(unsigned(x)) + 1; }  // 1-based; 0 when none
inline int __ffsll(long long x) { return x == 0 ? 0 : std::countr_zero((unsigned long long)(x)) + 1; }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }

// A read through the read-only data cache: an ordinary load here, reported to the access checker with
// its call site (the load itself is in this header, whose lines the checker does not judge).
template <class T>
inline T __ldg(const T* p, std::source_location site = std::source_location::current()) {
  KVSIM_EMU_CHECK_ACCESS(p, sizeof(T), load, site);
  return *p;
}
