// Wall time of work run on several threads at once, the way a host phase runs (one instance per core:
// per KV head, per sequence). Shared by `kvsim host probe` (the ceilings) and `kvsim validate` (the
// kernels), so a kernel is timed exactly as the ceiling it is compared with.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <time.h>

namespace kvsim {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread: excludes the time it waits while the scheduler runs other
// processes, which on a shared machine is most of a long kernel's wall time.
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// One core's clock: a chain of dependent integer adds retires one add per cycle (latency 1 on every
// x86-64 and AArch64 core), so adds per second are cycles per second, at whatever turbo one busy core
// reaches. Eight adds per loop iteration keep the loop's own counter and branch off the chain's
// critical path. Best of repeats (a shared machine only ever slows it down). 0 where not measured.
inline double core_clock_hz(double seconds) {
#if defined(__x86_64__) || defined(__aarch64__)
  const long iterations = 1 << 22;
  double best = 0;
  const double until = now_seconds() + seconds;
  int reps = 0;
  while (reps < 5 || (now_seconds() < until && reps < 200)) {
    unsigned long x = 0;
    const unsigned long one = 1;
    const double t0 = now_seconds();
    for (long i = 0; i < iterations; ++i) {
#if defined(__x86_64__)
#define KVSIM_ADD asm volatile("add %1, %0" : "+r"(x) : "r"(one))
#else
#define KVSIM_ADD asm volatile("add %0, %0, %1" : "+r"(x) : "r"(one))
#endif
      KVSIM_ADD; KVSIM_ADD; KVSIM_ADD; KVSIM_ADD; KVSIM_ADD; KVSIM_ADD; KVSIM_ADD; KVSIM_ADD;
#undef KVSIM_ADD
    }
    const double t = now_seconds() - t0;
    if (x == 8ul * iterations && t > 0) best = std::max(best, 8.0 * iterations / t);
    ++reps;
  }
  return best;
#else
  (void)seconds;
  return 0;
#endif
}

enum class Clock { wall, thread_cpu };

// Runs f(thread_index) on `threads` threads released together; returns the time of the slowest
// (thread start-up is outside the timed interval), by the wall clock or each thread's CPU clock.
template <class F>
double parallel_time(int threads, F f, Clock clock = Clock::wall) {
  auto now = clock == Clock::wall ? now_seconds : thread_cpu_seconds;
  std::vector<std::thread> ts;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> t(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([&, i] {
      ++ready;
      while (!go) std::this_thread::yield();
      const double s = now();
      f(i);
      t[size_t(i)] = now() - s;
    });
  while (ready < threads) std::this_thread::yield();
  go = true;
  for (auto& th : ts) th.join();
  return *std::max_element(t.begin(), t.end());
}

}  // namespace kvsim
