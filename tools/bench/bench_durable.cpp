// Google Benchmarks of durable outputs (docs/robustness.md, "Crash safety and durability"), run with
// `kvsim bench --benchmark_filter=AtomicWrite` from a directory on the disk the outputs go to (the files
// are written to ./kvsim-bench-durable/, removed afterwards; on tmpfs fsync costs nothing).
//
// BM_AtomicWrite/bytes: write_file_atomic as every text output uses it (temporary file, fsync, rename,
// fsync of the directory). BM_AtomicWriteNoSync/bytes: the same temporary file and rename without the two
// fsyncs, as it was before — the difference is what durability costs per write. Wall time (UseRealTime):
// an fsync waits for the disk, which CPU time does not see.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/atomic_file.hpp"

namespace {

// Created for each benchmark, removed after it.
std::string bench_dir() {
  std::filesystem::create_directories("kvsim-bench-durable");
  return "kvsim-bench-durable";
}

void BM_AtomicWrite(benchmark::State& state) {
  const std::string content(size_t(state.range(0)), 'x'), path = bench_dir() + "/out.csv";
  for (auto _ : state) kvsim::write_file_atomic(path, content);
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
  std::filesystem::remove_all(bench_dir());
}
BENCHMARK(BM_AtomicWrite)->Arg(4 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_AtomicWriteNoSync(benchmark::State& state) {
  const std::string content(size_t(state.range(0)), 'x'), path = bench_dir() + "/out.csv";
  const std::string tmp = path + ".tmp";
  for (auto _ : state) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, content.data(), content.size()) != ssize_t(content.size())) {
      state.SkipWithError("cannot write the benchmark file");
      break;
    }
    ::close(fd);
    std::rename(tmp.c_str(), path.c_str());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
  std::filesystem::remove_all(bench_dir());
}
BENCHMARK(BM_AtomicWriteNoSync)->Arg(4 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
