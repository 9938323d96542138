#include "tools/kvsim/host_probe.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "validate/parallel_time.hpp"

namespace kvsim {

namespace {
double now() { return now_seconds(); }

// STREAM triad a = b + s*c over arrays far larger than the caches, one slice per thread. Counts the
// three arrays' bytes (STREAM's convention, no write-allocate). Best of repeats.
double triad_bandwidth(int threads, double seconds, size_t array_bytes) {
  const size_t n = array_bytes / sizeof(double);
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  const size_t slice = n / threads;
  double best = 0;
  const double until = now() + seconds;
  int reps = 0;
  while (reps < 3 || (now() < until && reps < 50)) {
    const double t = parallel_time(threads, [&](int i) {
      double* __restrict pa = a.data() + i * slice;
      const double* __restrict pb = b.data() + i * slice;
      const double* __restrict pc = c.data() + i * slice;
      for (size_t k = 0; k < slice; ++k) pa[k] = pb[k] + 3.0 * pc[k];
    });
    best = std::max(best, 3.0 * sizeof(double) * slice * threads / t);
    ++reps;
  }
  return best;
}

// fp32 GEMM (Eigen) on every thread at once, each with its own matrices: the host's practical fp32
// peak with the SIMD this build targets.
double gemm_flops(int threads, double seconds) {
  const int n = 512;
  std::vector<Eigen::MatrixXf> A(threads), B(threads), C(threads);
  for (int i = 0; i < threads; ++i) {
    A[i] = Eigen::MatrixXf::Random(n, n);
    B[i] = Eigen::MatrixXf::Random(n, n);
    C[i] = Eigen::MatrixXf::Zero(n, n);
  }
  Eigen::setNbThreads(1);
  double best = 0;
  const double until = now() + seconds;
  int reps = 0;
  while (reps < 3 || (now() < until && reps < 200)) {
    const double t = parallel_time(threads, [&](int i) { C[i].noalias() = A[i] * B[i]; });
    best = std::max(best, 2.0 * n * n * double(n) * threads / t);
    ++reps;
  }
  return best;
}

double mem_total_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (in >> key) {
    if (key == "MemTotal:") { in >> kb; break; }
    in.ignore(1 << 10, '\n');
  }
  return kb / (1024.0 * 1024.0);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}
}  // namespace

std::string host_cpu_model() { return cpu_model(); }

HostMeasurement measure_host(double seconds, size_t triad_array_bytes) {
  HostMeasurement h;
  h.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::fprintf(stderr, "kvsim host probe: %d threads; measuring DRAM bandwidth...\n", h.threads);
  h.dram_bandwidth = triad_bandwidth(h.threads, seconds, triad_array_bytes);
  std::fprintf(stderr, "kvsim host probe: measuring fp32 GEMM...\n");
  h.fp32 = gemm_flops(h.threads, seconds);
  std::fprintf(stderr, "kvsim host probe: measuring one core's clock...\n");
  h.clock_hz = core_clock_hz(std::min(seconds, 2.0));
  h.cpu = cpu_model();
  return h;
}

std::string probe_host_yaml(const std::string& name, double seconds) {
  const HostMeasurement h = measure_host(seconds);
  const int threads = h.threads;
  const double bw = h.dram_bandwidth, flops = h.fp32;
  char buf[2560];
  std::snprintf(buf, sizeof buf,
                "# Host profile measured by `kvsim host probe` on this machine (%s).\n"
                "name: %s\n"
                "description: %s, %d cores (measured profile)\n"
                "sockets: 1                  # estimate: assumed 1 (kvsim host probe does not detect sockets)\n"
                "cores: %d                   # measured: std::thread::hardware_concurrency()\n"
                "clock_ghz: %.2f            # measured: one thread's chain of dependent adds (one per cycle), best of repeats\n"
                "dram:\n"
                "  capacity_gib: %.1f       # measured: MemTotal in /proc/meminfo\n"
                "  bandwidth_gbs: %.1f      # measured: STREAM triad over 3 x 512 MiB arrays on %d threads, best of repeats\n"
                "compute:\n"
                "  fp32_gflops: %.1f        # measured: Eigen sgemm 512^3 on %d threads at once, best of repeats\n",
                cpu_model().c_str(), name.c_str(), cpu_model().c_str(), threads, threads, h.clock_hz / 1e9, mem_total_gib(), bw / 1e9,
                threads, flops / 1e9, threads);
  return buf;
}

}  // namespace kvsim
