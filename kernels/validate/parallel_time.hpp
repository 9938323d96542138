// Wall time of work run on several threads at once, the way a host phase runs (one instance per core:
// per KV head, per sequence). Shared by `kvsim host probe` (the ceilings) and `kvsim validate` (the
// kernels), so a kernel is timed exactly as the ceiling it is compared with.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace kvsim {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs f(thread_index) on `threads` threads released together; returns the time of the slowest
// (thread start-up is outside the timed interval).
template <class F>
double parallel_time(int threads, F f) {
  std::vector<std::thread> ts;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> t(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([&, i] {
      ++ready;
      while (!go) std::this_thread::yield();
      const double s = now_seconds();
      f(i);
      t[size_t(i)] = now_seconds() - s;
    });
  while (ready < threads) std::this_thread::yield();
  go = true;
  for (auto& th : ts) th.join();
  return *std::max_element(t.begin(), t.end());
}

}  // namespace kvsim
