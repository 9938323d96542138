#include "sweep/runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/atomic_file.hpp"
#include "sweep/evaluator.hpp"
#include "sweep/pareto.hpp"
#include "sweep/quality.hpp"
#include "sweep/result_row.hpp"
#include "sweep/result_store.hpp"

namespace kvsim::sweep {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The row of `row` with its point number replaced.
std::string renumber(const std::string& row, uint64_t point) {
  return std::to_string(point) + row.substr(row.find(','));
}

// Puts a resumed file whose rows came from an edited sweep (or out of order) back in point order,
// keeping only rows of this sweep's points.
void canonicalize(const std::string& path, const PointSpace& space, const Evaluator& ev, const Shard& shard) {
  ResultTable t = read_results(path);
  std::unordered_map<uint64_t, size_t> by_key;
  for (size_t i = 0; i < t.rows.size(); ++i) by_key[row_key(t.rows[i], path)] = i;
  std::string out = t.header;
  Coords c;
  PointInputs in;
  const uint64_t n = shard.size(space.size());
  for (uint64_t j = 0; j < n; ++j) {
    const uint64_t point = shard.point(j);
    space.decode(point, c);
    ev.resolve(c, in);
    const auto it = by_key.find(ev.key(in));
    if (it == by_key.end()) continue;
    out += renumber(t.rows[it->second], point);
    out += '\n';
  }
  write_file_atomic(path, out);
}

// What every stage of a run reads: the sweep, its point space, the evaluator and the shard.
struct SweepRun {
  const SweepSpec& spec;
  const PointSpace& space;
  const Evaluator& ev;
  const Shard& shard;
};

// One chunk of points as a worker leaves it for the committer, which appends chunks in order.
struct Slot {
  bool ready = false;
  std::string rows;
  uint64_t evaluated = 0, present = 0, matched = 0;
  bool out_of_order = false;
};

// Replays in one batch every (policy, parameters) configuration of a shard point the file does not have yet.
void replay_missing(const SweepRun& sw, const ResultFile& file, QualityCache& quality, const RunOptions& o,
                    RunStats& st) {
  const PointSpace& space = sw.space;
  const Evaluator& ev = sw.ev;
  const Shard& shard = sw.shard;
  const auto t0 = Clock::now();
  std::vector<std::pair<const Policy*, ParamValues>> wanted;
  Coords c;
  PointInputs in;
  for (uint64_t j = 0; j < st.shard_points; ++j) {
    space.decode(shard.point(j), c);
    ev.resolve(c, in);
    if (!file.find(ev.key(in))) wanted.emplace_back(in.policy, in.params);
  }
  st.replayed = quality.replay(wanted, st.threads, o.replay_progress);
  st.replay_seconds = since(t0);
}

// A worker's share: the rows of chunk `chunk` (K points) into `s`; points the file already has are only counted.
void evaluate_chunk(const SweepRun& sw, const ResultFile& file, const QualityCache& quality, uint64_t shard_points,
                    size_t K, uint64_t chunk, Coords& c, PointInputs& in, Slot& s) {
  const SweepSpec& spec = sw.spec;
  const PointSpace& space = sw.space;
  const Evaluator& ev = sw.ev;
  const Shard& shard = sw.shard;
  const uint64_t end = std::min<uint64_t>(shard_points, (chunk + 1) * K);
  for (uint64_t j = chunk * K; j < end; ++j) {
    const uint64_t point = shard.point(j);
    space.decode(point, c);
    ev.resolve(c, in);
    const uint64_t key = ev.key(in);
    if (const ExistingRow* e = file.find(key)) {
      ++s.present;
      ++s.matched;
      s.out_of_order |= e->point != point;
      continue;
    }
    s.out_of_order |= file.existing_rows() > 0 && point < file.max_existing_point();
    const PlanResult r = ev.evaluate(in);
    append_row(s.rows, spec, point, key, c, in, r, spec.trace ? quality.find(in.policy, in.params) : nullptr);
    ++s.evaluated;
  }
}

// Keep exactly the first stop_after new rows: what a kill right after them would leave.
void keep_first_rows(Slot& s, const RunOptions& o, RunStats& st) {
  size_t pos = 0;
  for (uint64_t k = st.evaluated; k < o.stop_after; ++k) pos = s.rows.find('\n', pos) + 1;
  s.rows.resize(pos);
  s.evaluated = o.stop_after - st.evaluated;
  st.stopped = true;
}

// Evaluates the shard's missing points on worker threads in chunks and appends the chunks strictly in point
// order; returns whether the file must be rewritten in canonical order afterwards.
bool evaluate_shard(const SweepRun& sw, ResultFile& file, const QualityCache& quality, const RunOptions& o,
                    RunStats& st) {
  bool needs_rewrite = false;
  uint64_t matched = 0;
  const size_t K = std::max<size_t>(1, o.chunk_points);
  const uint64_t chunks = (st.shard_points + K - 1) / K;
  const size_t window = size_t(4 * st.threads);
  std::vector<Slot> slots(window);
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next = 0, committed = 0;
  bool stop = false;
  std::exception_ptr failure;

  auto work = [&] {
    Coords c;
    PointInputs in;
    for (;;) {
      uint64_t chunk;
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return stop || next >= chunks || next < committed + window; });
        if (stop || next >= chunks) return;
        chunk = next++;
      }
      Slot s;
      try {
        evaluate_chunk(sw, file, quality, st.shard_points, K, chunk, c, in, s);
      } catch (...) {
        std::lock_guard lk(mu);
        if (!failure) failure = std::current_exception();
        stop = true;
        cv.notify_all();
        return;
      }
      std::lock_guard lk(mu);
      s.ready = true;
      slots[chunk % window] = std::move(s);
      cv.notify_all();
    }
  };

  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int i = 0; i < st.threads; ++i) pool.emplace_back(work);
  for (uint64_t chunk = 0; chunk < chunks; ++chunk) {
    Slot s;
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return stop || slots[chunk % window].ready; });
      if (stop) break;
      s = std::move(slots[chunk % window]);
      slots[chunk % window] = Slot{};
    }
    if (o.stop_after > 0 && st.evaluated + s.evaluated >= o.stop_after) keep_first_rows(s, o, st);
    file.append(s.rows);
    st.evaluated += s.evaluated;
    st.present += s.present;
    matched += s.matched;
    needs_rewrite |= s.out_of_order;
    {
      std::lock_guard lk(mu);
      committed = chunk + 1;
      if (st.stopped) stop = true;
      cv.notify_all();
    }
    if (o.progress) o.progress(double(std::min<uint64_t>((chunk + 1) * K, st.shard_points)) / double(st.shard_points));
    if (st.stopped) break;
  }
  {
    std::lock_guard lk(mu);
    stop = true;
    cv.notify_all();
  }
  for (std::thread& t : pool) t.join();
  st.evaluate_seconds = since(t0);
  if (failure) std::rethrow_exception(failure);
  needs_rewrite |= !file.existing_in_order() || matched < file.existing_rows();
  return needs_rewrite;
}
}  // namespace

RunStats run_sweep(const SweepSpec& spec, const std::string& out_path, const RunOptions& o) {
  RunStats st;
  const PointSpace space(spec);
  const Evaluator ev(spec, space);
  const Shard shard = o.shard;
  st.total_points = space.size();
  st.shard_points = shard.size(space.size());
  st.threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const SweepRun sw{spec, space, ev, shard};

  bool needs_rewrite = false;
  {
    ResultFile file(out_path, results_header(spec));

    // Quality first: every configuration of a missing point, replayed together.
    QualityCache quality(spec.trace ? *spec.trace : TraceSettings{});
    if (spec.trace) {
      if (!spec.trace->cache.empty()) quality.use_file(spec.trace->cache);
      replay_missing(sw, file, quality, o, st);
    }
    needs_rewrite = evaluate_shard(sw, file, quality, o, st);
    file.sync();  // the journal durable once evaluated (a stopped run's rows too: its resume reads them)
  }
  if (st.stopped) return st;
  if (needs_rewrite) {
    canonicalize(out_path, space, ev, shard);
    st.rewritten = true;
  }
  write_file_atomic(pareto_path(out_path), pareto_csv(read_results(out_path), spec.pareto, out_path));
  return st;
}

}  // namespace kvsim::sweep
