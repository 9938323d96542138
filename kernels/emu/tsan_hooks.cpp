// The functions g++ -fsanitize=thread calls from the instrumented translation units (the .cu sources
// compiled through the emulator; CMakeLists.txt), defined here instead of by libtsan, which is never
// linked: each load and store goes to the access checker (kernels/emu/checker.hpp) with its
// instruction's address, and each atomic is performed (sequentially consistent, whatever order was
// asked for: stronger is always correct). This file itself is not instrumented.
//
// The names and signatures are ThreadSanitizer's compiler interface (compiler-rt's tsan_interface.h
// and tsan_interface_atomic.h), which g++ and clang share.
#include <cstddef>
#include <cstdint>

#include "kernels/emu/checker.hpp"

#if KVSIM_EMU_CHECKER

namespace {
using kvsim::emu::checker::Access;
inline uintptr_t caller(void* ra) { return reinterpret_cast<uintptr_t>(ra); }
}  // namespace

#define KVSIM_PC caller(__builtin_return_address(0))
#define KVSIM_TSAN_RW(n)                                                                                        \
  void __tsan_read##n(void* p) { kvsim::emu::checker::access(p, n, Access::load, KVSIM_PC); }                   \
  void __tsan_write##n(void* p) { kvsim::emu::checker::access(p, n, Access::store, KVSIM_PC); }                 \
  void __tsan_unaligned_read##n(void* p) { kvsim::emu::checker::access(p, n, Access::load, KVSIM_PC); }         \
  void __tsan_unaligned_write##n(void* p) { kvsim::emu::checker::access(p, n, Access::store, KVSIM_PC); }       \
  void __tsan_volatile_read##n(void* p) { kvsim::emu::checker::access(p, n, Access::load, KVSIM_PC); }          \
  void __tsan_volatile_write##n(void* p) { kvsim::emu::checker::access(p, n, Access::store, KVSIM_PC); }        \
  void __tsan_unaligned_volatile_read##n(void* p) { kvsim::emu::checker::access(p, n, Access::load, KVSIM_PC); } \
  void __tsan_unaligned_volatile_write##n(void* p) { kvsim::emu::checker::access(p, n, Access::store, KVSIM_PC); }

// The atomics, for one operand type. The access itself is reported by the emulator's atomic functions
// (kernels/emu/atomics.hpp, with the kernel's call site); here they only happen.
#define KVSIM_TSAN_ATOMIC(bits, T)                                                                             \
  T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }       \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }       \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                                \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                            \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                      \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }                                                                                                            \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                        \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }                                                                                                            \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                            \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                          \
    return c;                                                                                                  \
  }

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
KVSIM_TSAN_RW(1)
KVSIM_TSAN_RW(2)
KVSIM_TSAN_RW(4)
KVSIM_TSAN_RW(8)
KVSIM_TSAN_RW(16)
void __tsan_read_range(void* p, unsigned long n) { kvsim::emu::checker::access(p, n, Access::load, KVSIM_PC); }
void __tsan_write_range(void* p, unsigned long n) { kvsim::emu::checker::access(p, n, Access::store, KVSIM_PC); }
KVSIM_TSAN_ATOMIC(8, char)
KVSIM_TSAN_ATOMIC(16, short)
KVSIM_TSAN_ATOMIC(32, int)
KVSIM_TSAN_ATOMIC(64, long)
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}

#endif  // KVSIM_EMU_CHECKER
