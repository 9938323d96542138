// Runs a sweep (or one shard of it) into a results file: points are evaluated on worker threads in
// chunks, and the chunks are appended strictly in point order, so the file's bytes do not depend on
// the number of threads, and a killed run leaves an exact prefix (plus at most a partial line, cut
// on the next open). A rerun skips the points whose key is already in the file. When the run
// completes, the file is in canonical point order (rewritten atomically only if a resumed file was
// not already) and the Pareto fronts are written beside it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "sweep/space.hpp"

namespace kvsim::sweep {

struct RunOptions {
  Shard shard;
  int threads = 0;                          // 0 = one per core
  uint64_t stop_after = 0;                  // testing: stop after committing this many new points (0 = never)
  size_t chunk_points = 256;                // points per work unit
  std::function<void(double)> progress;     // fraction of the shard's points done
  std::function<void(double)> replay_progress;
};

struct RunStats {
  uint64_t total_points = 0;     // in the whole sweep
  uint64_t shard_points = 0;     // in this shard
  uint64_t present = 0;          // already in the results file, skipped
  uint64_t evaluated = 0;        // evaluated and appended by this run
  uint64_t replayed = 0;         // (policy, parameters) configurations replayed on the trace (not from a cache)
  double replay_seconds = 0, evaluate_seconds = 0;  // wall
  int threads = 1;
  bool stopped = false;          // stop_after reached: the file is a prefix, no Pareto file
  bool rewritten = false;        // the file was put back in canonical order
};

RunStats run_sweep(const SweepSpec& spec, const std::string& out_path, const RunOptions& o = {});

}  // namespace kvsim::sweep
