// parallel_for: runs fn(i, worker) for i in [0, n) on up to `threads` std::threads (0 = one per core),
// each taking the next index from a shared counter; `worker` in [0, threads) names the thread, for
// per-thread scratch. Used for everything per (layer, KV head): the replay's ground truth and metrics,
// a selector's prefill (CTKVR's qcIVF). The first exception thrown stops the rest and is rethrown.
#pragma once
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kvsim {

template <typename Fn>
void parallel_for(int n, Fn&& fn, int threads = 0) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min(threads, n));
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex m;
  auto work = [&](int worker) {
    for (int i = next++; i < n; i = next++) {
      try {
        fn(i, worker);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k) pool.emplace_back(work, k);
    for (std::thread& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace kvsim
