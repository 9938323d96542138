// CUDA's atomic functions under the emulator, one overload per type CUDA provides (any other type is a
// compile error, as under nvcc). Threads of a launch run one at a time, but std::atomic_ref keeps them
// atomic even if two host threads run launches over the same memory. Each returns the old value.
// Each also reports itself to the access checker with its call site (kernels/emu/checker.hpp: an atomic
// may meet a plain access of another thread, and counts as an atomic in the traffic).
#pragma once
#include <atomic>
#include <source_location>

#include "kernels/emu/checker.hpp"

#define KVSIM_EMU_SITE std::source_location site = std::source_location::current()
#define KVSIM_EMU_ATOMIC_SEEN(p) KVSIM_EMU_CHECK_ACCESS(p, sizeof(*(p)), atomic, site)

namespace kvsim::emu::detail {
template <class T, class F>
T atomic_update(T* p, F f) {  // *p = f(*p), atomically; returns the old value
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (!a.compare_exchange_weak(old, f(old))) {
  }
  return old;
}
}  // namespace kvsim::emu::detail

#define KVSIM_EMU_ATOMIC_ADD_SUB_EXCH(T)                                              \
  inline T atomicAdd(T* p, T v, KVSIM_EMU_SITE) {                                     \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                          \
    return std::atomic_ref<T>(*p).fetch_add(v);                                        \
  }                                                                                    \
  inline T atomicExch(T* p, T v, KVSIM_EMU_SITE) {                                    \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                          \
    return std::atomic_ref<T>(*p).exchange(v);                                         \
  }
#define KVSIM_EMU_ATOMIC_MIN_MAX(T)                                                                          \
  inline T atomicMin(T* p, T v, KVSIM_EMU_SITE) {                                                       \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                                            \
    return kvsim::emu::detail::atomic_update(p, [v](T o) { return v < o ? v : o; });                     \
  }                                                                                                      \
  inline T atomicMax(T* p, T v, KVSIM_EMU_SITE) {                                                       \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                                            \
    return kvsim::emu::detail::atomic_update(p, [v](T o) { return v > o ? v : o; });                     \
  }
#define KVSIM_EMU_ATOMIC_BITS_CAS(T)                                                  \
  inline T atomicAnd(T* p, T v, KVSIM_EMU_SITE) {                                    \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                          \
    return std::atomic_ref<T>(*p).fetch_and(v);                                        \
  }                                                                                    \
  inline T atomicOr(T* p, T v, KVSIM_EMU_SITE) {                                     \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                          \
    return std::atomic_ref<T>(*p).fetch_or(v);                                         \
  }                                                                                    \
  inline T atomicXor(T* p, T v, KVSIM_EMU_SITE) {                                    \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                          \
    return std::atomic_ref<T>(*p).fetch_xor(v);                                        \
  }                                                                                    \
  inline T atomicCAS(T* p, T compare, T v, KVSIM_EMU_SITE) {                          \
    KVSIM_EMU_ATOMIC_SEEN(p);                                                          \
    std::atomic_ref<T>(*p).compare_exchange_strong(compare, v);                       \
    return compare; /* the old value, whether or not it was swapped */                \
  }

KVSIM_EMU_ATOMIC_ADD_SUB_EXCH(int)
KVSIM_EMU_ATOMIC_ADD_SUB_EXCH(unsigned)
KVSIM_EMU_ATOMIC_ADD_SUB_EXCH(unsigned long long)
KVSIM_EMU_ATOMIC_ADD_SUB_EXCH(float)
KVSIM_EMU_ATOMIC_MIN_MAX(int)
KVSIM_EMU_ATOMIC_MIN_MAX(unsigned)
KVSIM_EMU_ATOMIC_MIN_MAX(long long)
KVSIM_EMU_ATOMIC_MIN_MAX(unsigned long long)
KVSIM_EMU_ATOMIC_BITS_CAS(int)
KVSIM_EMU_ATOMIC_BITS_CAS(unsigned)
KVSIM_EMU_ATOMIC_BITS_CAS(unsigned long long)
#undef KVSIM_EMU_ATOMIC_ADD_SUB_EXCH
#undef KVSIM_EMU_ATOMIC_MIN_MAX
#undef KVSIM_EMU_ATOMIC_BITS_CAS

// double has atomicAdd (sm_60+) but no atomicExch in CUDA.
inline double atomicAdd(double* p, double v, KVSIM_EMU_SITE) {
  KVSIM_EMU_ATOMIC_SEEN(p);
  return std::atomic_ref<double>(*p).fetch_add(v);
}
inline int atomicSub(int* p, int v, KVSIM_EMU_SITE) {
  KVSIM_EMU_ATOMIC_SEEN(p);
  return std::atomic_ref<int>(*p).fetch_sub(v);
}
inline unsigned atomicSub(unsigned* p, unsigned v, KVSIM_EMU_SITE) {
  KVSIM_EMU_ATOMIC_SEEN(p);
  return std::atomic_ref<unsigned>(*p).fetch_sub(v);
}
// ((old >= limit) ? 0 : old + 1) and ((old == 0 || old > limit) ? limit : old - 1), as CUDA defines them.
inline unsigned atomicInc(unsigned* p, unsigned limit, KVSIM_EMU_SITE) {
  KVSIM_EMU_ATOMIC_SEEN(p);
  return kvsim::emu::detail::atomic_update(p, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* p, unsigned limit, KVSIM_EMU_SITE) {
  KVSIM_EMU_ATOMIC_SEEN(p);
  return kvsim::emu::detail::atomic_update(p, [limit](unsigned o) { return o == 0 || o > limit ? limit : o - 1; });
}
#undef KVSIM_EMU_SITE
#undef KVSIM_EMU_ATOMIC_SEEN
