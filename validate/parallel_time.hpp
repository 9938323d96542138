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
