#include "core/quantile.hpp"
#include "replay/replay.hpp"

#include "core/parallel.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <cmath>
#include <numeric>
#include <thread>
#include <time.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "kernels/backend/backend.hpp"
#include "kernels/host/attention.hpp"
#include "kernels/host/select.hpp"
#include "kernels/reference/reference.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "policies/kernel_selector.hpp"
#include "policies/registry.hpp"

namespace kvsim::replay {

namespace {
using Clock = std::chrono::steady_clock;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMap = Eigen::Map<RowMat>;
using CRowMap = Eigen::Map<const RowMat>;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU time of the calling thread: FLOP/s per CPU-second is what a core delivers, whatever else shares
// the machine (wall time would charge this run for other processes' time slices).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::string gib_text(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}
}  // namespace

double trace_data_bytes(const TraceSource& t) {
  const TraceMeta& m = t.meta();
  const double d = m.model.head_dim, T = double(t.tokens_count()), S = double(t.steps_count());
  const double kv = double(m.layers.size()) * double(m.kv_heads.size()) * T * d * 4.0;
  return kv * (t.has_values() ? 2.0 : 1.0) + double(m.layers.size()) * double(m.query_heads.size()) * S * d * 4.0;
}

TraceData load_trace_data(const TraceSource& t, double memory_limit_bytes, const std::string& where) {
  const double need = trace_data_bytes(t);
  if (need > memory_limit_bytes)
    throw_input_error(where, 0, "memory",
                      "replay holds the trace in float32: it needs " + gib_text(need) + " (" +
                          std::to_string(int64_t(need)) + " bytes), over the limit of " + gib_text(memory_limit_bytes) +
                          "; raise --memory-limit or cut the trace down with `kvsim trace slice` (--layers, "
                          "--kv-heads, --steps)");
  const TraceMeta& m = t.meta();
  TraceData d;
  d.source = &t;
  d.layers = int(m.layers.size());
  d.kv_heads = int(m.kv_heads.size());
  d.q_heads = int(m.query_heads.size());
  d.d = m.model.head_dim;
  d.T = t.tokens_count();
  d.S = t.steps_count();
  d.P = m.prompt_tokens;
  d.group_of.assign(size_t(d.kv_heads), {});
  for (int q = 0; q < d.q_heads; ++q) {
    const int h = t.kv_slot_of_query(q);
    if (h >= 0) d.group_of[size_t(h)].push_back(q);
  }
  d.group = d.kv_heads > 0 ? int(d.group_of[0].size()) : 0;
  const size_t kv = size_t(d.T) * d.d;
  d.keys.resize(size_t(d.layers) * d.kv_heads * kv);
  if (t.has_values()) d.values.resize(d.keys.size());
  d.queries.resize(size_t(d.layers) * d.q_heads * size_t(d.S) * d.d);
  // Every (layer, KV head) converts its rows on its own (a TraceSource's reads are thread-safe), then
  // each layer's queries: in parallel.
  const int pairs = d.layers * d.kv_heads;
  parallel_for(pairs + d.layers, [&](int i, int) {
    if (i < pairs) {
      const int l = i / d.kv_heads, h = i % d.kv_heads;
      t.keys(l, h, 0, d.T, d.keys.data() + size_t(i) * kv);
      if (t.has_values()) t.values(l, h, 0, d.T, d.values.data() + size_t(i) * kv);
      return;
    }
    const int l = i - pairs;
    for (int q = 0; q < d.q_heads; ++q)
      t.queries(l, q, 0, d.S, d.queries.data() + (size_t(l) * d.q_heads + q) * size_t(d.S) * d.d);
  });
  return d;
}

void ground_truth_block(const TraceData& t, int l, int h, int64_t s0, int64_t s1, GroundTruthBlock& out) {
  const auto& grp = t.group_of[size_t(h)];
  const int g = int(grp.size()), d = t.d;
  const int64_t rows = s1 - s0, cols = t.position(s1 - 1) + 1;
  out.s0 = s0;
  out.rows = rows;
  out.cols = cols;
  out.group = g;
  out.d = d;
  const float scale = 1.0f / std::sqrt(float(d));
  // Q_block [g·rows, d], pre-scaled: one GEMM for the whole group and block.
  RowMat Q(g * rows, d);
  for (int j = 0; j < g; ++j)
    Q.middleRows(j * rows, rows) = CRowMap(t.q(l, grp[size_t(j)], s0), rows, d) * scale;
  out.probs.resize(size_t(g * rows) * size_t(cols));
  out.lse.resize(size_t(g * rows));
  RowMap S(out.probs.data(), g * rows, cols);
  const CRowMap K(t.k(l, h), cols, d);
  S.noalias() = Q * K.transpose();
  out.flops = 2.0 * double(g * rows) * double(cols) * d;
  // Causal mask and softmax per row: row (j, r) sees tokens 0..position(s0 + r).
  for (int j = 0; j < g; ++j)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = t.position(s0 + r) + 1;
      auto row = S.row(j * rows + r);
      auto seen = row.head(n).array();
      const float mx = seen.maxCoeff();
      seen = (seen - mx).exp();
      const float sum = seen.sum();
      seen /= sum;
      out.lse[size_t(j * rows + r)] = mx + std::log(sum);
      row.tail(cols - n).setZero();
    }
  if (t.source->has_values()) {
    out.outputs.resize(size_t(g * rows) * d);
    RowMap O(out.outputs.data(), g * rows, d);
    O.noalias() = S * CRowMap(t.v(l, h), cols, d);
    out.flops *= 2;
  } else {
    out.outputs.clear();
  }
}

double measure_sgemm_peak(int n, int reps) {
  Eigen::MatrixXf A = Eigen::MatrixXf::Random(n, n), B = Eigen::MatrixXf::Random(n, n), C(n, n);
  double best = 1e30;
  for (int i = 0; i < std::max(1, reps); ++i) {
    const double t0 = thread_cpu_seconds();
    C.noalias() = A * B;
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  volatile float sink = C(0, 0);
  (void)sink;
  return 2.0 * double(n) * n * n / best;
}

namespace {

Summary summarize(std::vector<float> v) {
  Summary s;
  s.n = int64_t(v.size());
  if (v.empty()) return s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.p10 = interpolated_quantile(v, 0.1);
  s.p50 = interpolated_quantile(v, 0.5);
  s.p90 = interpolated_quantile(v, 0.9);
  return s;
}

// Per (policy, decode row, layer, query head slot): the four metrics.
struct MetricStore {
  int64_t rows = 0;
  int layers = 0, q_heads = 0;
  std::vector<float> recall, error, topk, tokens, focus;
  size_t at(int64_t r, int l, int q) const { return (size_t(r) * layers + l) * q_heads + q; }
  void init(int64_t r, int L, int Q) {
    rows = r;
    layers = L;
    q_heads = Q;
    const size_t n = size_t(r) * L * Q;
    recall.assign(n, NAN);
    error.assign(n, NAN);
    topk.assign(n, NAN);
    tokens.assign(n, NAN);
    focus.assign(n, NAN);
  }
};

Quality quality_of(const MetricStore& m, bool values, bool focus, int64_t r0, int64_t r1, int layer /* -1 = all */) {
  std::vector<float> rec, err, tk, tok, foc;
  for (int64_t r = r0; r < r1; ++r)
    for (int l = 0; l < m.layers; ++l) {
      if (layer >= 0 && l != layer) continue;
      for (int q = 0; q < m.q_heads; ++q) {
        const size_t i = m.at(r, l, q);
        if (std::isnan(m.recall[i])) continue;  // a query head whose KV head is not stored
        rec.push_back(m.recall[i]);
        tk.push_back(m.topk[i]);
        tok.push_back(m.tokens[i]);
        if (values) err.push_back(m.error[i]);
        if (focus && !std::isnan(m.focus[i])) foc.push_back(m.focus[i]);
      }
    }
  Quality q;
  q.recall = summarize(std::move(rec));
  q.topk_recall = summarize(std::move(tk));
  q.tokens = summarize(std::move(tok));
  if (values) q.error = summarize(std::move(err));
  if (focus) q.focus = summarize(std::move(foc));
  return q;
}

// The exact top-k of a probability row under the reference ranking (higher first, ties by the lower
// index): the optimized radix select (kernels/host/select.hpp); callers only test membership.
void topk_of_row(const float* p, int64_t n, int64_t k, std::vector<int32_t>& out) {
  k = std::max<int64_t>(0, std::min(k, n));
  out.resize(size_t(k));
  if (k > 0) host::topk_indices(p, n, k, out.data());
}


// Attention restricted to a selection, from the ground truth's probabilities (ReplayOptions::
// attention_kernel says why), for every (policy, decode row) of one (layer, KV head) block at once:
// out[j] = Σ_S p_j(x)·v_x / Σ_S p_j, lse[j] = lse_j + log Σ_S p_j.
//
// Why a block at once: the selections of nine policies over 32 rows read ~30 K value rows each, and
// one (layer, KV head)'s values (n·d·4 bytes, 8 MB at 32 K tokens) do not stay in cache from one
// selection to the next. Walking the value rows in tiles of kTile tokens, every selection's part of a
// tile is accumulated while the tile is in L2; the mass is still summed in double in list order.
struct SubsetJob {
  const std::vector<int32_t>* tokens = nullptr;  // sorted ascending
  int64_t r = 0;      // decode row in the block
  int64_t at = 0;     // next token of the list
  bool ok = true;     // false: fall back to the attention kernel (mass underflow)
  double mass[16] = {};
};

void subset_attention_block(const GroundTruthBlock& gt, const float* V, int d, std::vector<SubsetJob>& jobs,
                            float* out /* [jobs][g][d] */, float* lse /* [jobs][g] */) {
  constexpr int64_t kTile = 1024;  // 256 KB of value rows at d = 64
  const int g = gt.group;
  std::fill_n(out, jobs.size() * size_t(g) * size_t(d), 0.f);
  for (int64_t t0 = 0; t0 < gt.cols; t0 += kTile) {
    const int32_t t1 = int32_t(std::min(gt.cols, t0 + kTile));
    for (size_t k = 0; k < jobs.size(); ++k) {
      SubsetJob& jb = jobs[k];
      const std::vector<int32_t>& tok = *jb.tokens;
      const int64_t end = std::lower_bound(tok.begin() + jb.at, tok.end(), t1) - tok.begin();
      if (end == jb.at) continue;
      const float* rows[16];
      for (int j = 0; j < g; ++j) rows[j] = gt.p(j, jb.r);
      host::weighted_rows({.values = V, .idx = tok.data() + jb.at, .m = end - jb.at, .d = d, .rows = g,
                           .weights = rows, .out = out + k * size_t(g) * d, .mass = jb.mass, .accumulate = true});
      jb.at = end;
    }
  }
  for (size_t k = 0; k < jobs.size(); ++k) {
    SubsetJob& jb = jobs[k];
    for (int j = 0; j < g; ++j) jb.ok = jb.ok && jb.mass[j] >= 1e-30;
    if (!jb.ok) continue;
    for (int j = 0; j < g; ++j) {
      const float inv = float(1.0 / jb.mass[j]);
      float* oj = out + (k * size_t(g) + size_t(j)) * d;
      for (int c = 0; c < d; ++c) oj[c] *= inv;
      lse[k * size_t(g) + size_t(j)] = float(double(gt.lse_of(j, jb.r)) + std::log(jb.mass[j]));
    }
  }
}

struct Worker {
  GroundTruthBlock gt;
  std::vector<uint8_t> mark;
  std::vector<float> Qg, o_sel, lse, o_extra, lse_extra;
  HeadSelection flat;                        // a selection's extra entries made contiguous
  std::vector<host::AttendSegment> segments;  // a selection's extra entries, where they are
  std::vector<std::vector<int32_t>> top;  // [group * rows]
  std::vector<SubsetJob> jobs;            // the block's selections restricted from the ground truth
  std::vector<int> job_of;                // [policy * rows] -> job, or -1
  std::vector<float> sub_out, sub_lse;    // [job][group][d], [job][group]
  double gt_seconds = 0, metric_seconds = 0, flops = 0;
  // --device: the device backend's attention outputs and their agreement with the host's, per policy.
  std::vector<float> d_q, d_out, d_lse, d_extra, d_extra_lse;
  std::vector<int32_t> iota;
  std::vector<int64_t> dev_outputs;
  std::vector<double> dev_error;
  int64_t dev_id_lists = 0, dev_id_mismatched = 0;  // the current policy's `all` id lists (reset per policy)
  std::vector<int64_t> dev_ids, dev_ids_bad;  // per policy: `all` id lists checked, and how many differed
};

// `hs` itself when its extra entries are all owned, else a copy in `scratch` with them flattened.
const HeadSelection& flat_extras(const HeadSelection& hs, int d, HeadSelection& scratch) {
  if (hs.extra_runs.empty()) return hs;
  scratch.clear();
  scratch.extra_k = hs.extra_k;
  scratch.extra_v = hs.extra_v;
  scratch.extra_bias = hs.extra_bias;
  scratch.extra_runs = hs.extra_runs;
  scratch.flatten_extras(d);
  return scratch;
}

// One KV head's attention for the query heads of its group at decode row s over selection `dh`, on
// backend `be`: the token gather, then the extra entries (biased) merged in, as the host path does with
// the reference kernels. Into w.d_out [g, d].
void device_attention(const kernels::Backend& be, const TraceData& t, int l, int h, int64_t s, int64_t n,
                      const HeadSelection& dh, float scale, Worker& w) {
  const auto& grp = t.group_of[size_t(h)];
  const int g = int(grp.size());
  w.d_q.resize(size_t(g) * t.d);
  for (int j = 0; j < g; ++j) std::copy_n(t.q(l, grp[size_t(j)], s), t.d, w.d_q.data() + size_t(j) * t.d);
  w.d_out.resize(size_t(g) * t.d);
  w.d_lse.resize(size_t(g));
  const std::vector<int32_t>* idx = &dh.tokens;
  if (dh.all) {
    // Full attention's ids 0..n-1, written by the backend (on the device: where the attention reads them)
    // and checked, so full attention's "selection" is compared too.
    w.iota = be.position_ids({.n = n, .sinks = n, .window = 0});
    bool same = int64_t(w.iota.size()) == n;
    for (int64_t i = 0; same && i < n; ++i) same = w.iota[size_t(i)] == int32_t(i);
    ++w.dev_id_lists;
    if (!same) ++w.dev_id_mismatched;
    idx = &w.iota;
  }
  be.gather_attention({.queries = w.d_q.data(), .rows = g, .keys = t.k(l, h), .values = t.v(l, h),
                       .resident_rows = t.T, .d = t.d, .idx = idx->data(), .m = int64_t(idx->size()),
                       .scale = scale, .out = w.d_out.data(), .lse = w.d_lse.data()});
  const int64_t m_extra = dh.all ? 0 : dh.extra_count();
  if (m_extra == 0) return;
  w.d_extra.resize(size_t(g) * t.d);
  w.d_extra_lse.resize(size_t(g));
  const HeadSelection& ex = flat_extras(dh, t.d, w.flat);
  be.biased_attention({.queries = w.d_q.data(), .rows = g, .keys = ex.extra_k.data(), .values = ex.extra_v.data(),
                       .bias = ex.extra_bias.data(), .m = m_extra, .d = t.d, .scale = scale,
                       .out = w.d_extra.data(), .lse = w.d_extra_lse.data()});
  be.merge_state({.out_a = w.d_out.data(), .lse_a = w.d_lse.data(), .out_b = w.d_extra.data(),
                  .lse_b = w.d_extra_lse.data(), .rows = g, .d = t.d, .out = w.d_out.data(), .lse = w.d_lse.data()});
}

// ||o_sel - o_full|| / ||o_full|| (the absolute norm when o_full is zero), summed in double.
float output_error(const float* of, const float* os, int d) {
  double num = 0, den = 0;
  for (int c = 0; c < d; ++c) {
    num += double(os[c] - of[c]) * double(os[c] - of[c]);
    den += double(of[c]) * double(of[c]);
  }
  return float(den > 0 ? std::sqrt(num / den) : std::sqrt(num));
}

// One replay, phase by phase; run_replay below drives it. The phases, each a member: set-up (decode
// rows, threads, one selector per run), prefill (every policy's prefill, concurrently), and per block of
// decode rows select_block (every policy's selections, concurrently) then score_pair per (layer, KV
// head) — the ground truth once, then every policy's attention and metrics — and at the end aggregate.
class Replayer {
 public:
  Replayer(const TraceData& t, const std::vector<PolicyRun>& runs, const ReplayOptions& o)
      : t_(t), runs_(runs), o_(o), host_(o.host ? *o.host : kernels::host_optimized_backend()) {
    res_.has_values = t.source->has_values();
    if (o.measure_peak) res_.sgemm_peak_flops = measure_sgemm_peak();
    // Decode rows, in order.
    for (int64_t s = 0; s < t.S; ++s)
      if (t.position(s) >= t.P) rows_.push_back(s);
    if (o.max_steps > 0 && int64_t(rows_.size()) > o.max_steps) rows_.resize(size_t(o.max_steps));
    R_ = int64_t(rows_.size());
    res_.decode_rows = R_;
    // Decode rows are contiguous in S (query positions are increasing and every row after the first
    // decode row is a decode row), so a block of rows is a range of S.
    npol_ = int(runs.size());
    pairs_ = t.layers * t.kv_heads;
    threads_ = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    threads_ = std::max(1, std::min(threads_, pairs_));
    res_.threads = threads_;
    sel_.resize(runs.size());
    metrics_.resize(runs.size());
    dev_.resize(runs.size());
    dsel_.resize(runs.size());
    checks_.resize(runs.size());
    res_.policies.resize(size_t(npol_));
    for (int i = 0; i < npol_; ++i) {
      sel_[size_t(i)] = make_selector(runs[size_t(i)].policy, runs[size_t(i)].params);
      if (!sel_[size_t(i)]) throw std::logic_error("no trace selector for policy " + runs[size_t(i)].policy);
      if (auto* ks = dynamic_cast<policies::KernelSelector*>(sel_[size_t(i)].get())) ks->use_backend(host_);
      res_.policies[size_t(i)].run = runs[size_t(i)];
      if (res_.policies[size_t(i)].run.label.empty()) res_.policies[size_t(i)].run.label = runs[size_t(i)].policy;
      metrics_[size_t(i)].init(R_, t.layers, t.q_heads);
    }
    B_ = std::max(1, o.block_rows);
    workers_.resize(static_cast<size_t>(threads_));
    sels_.resize(runs.size());
    dsels_.resize(runs.size());
    scale_ = 1.0f / std::sqrt(float(t.d));
    values_ = res_.has_values;
    topk_ = std::max(1, o.topk);
  }

  // Policies are independent (each selector keeps its own state and reads the trace only), so their
  // prefills, and below each block's selections, run concurrently, one policy per worker. A policy's
  // select_s is its own wall time on its worker.
  void prefill() {
    const auto prefill0 = Clock::now();
    parallel_for(npol_, [&](int i, int) {
      const auto t0 = Clock::now();
      sel_[size_t(i)]->prefill(t_);
      res_.policies[size_t(i)].prefill_seconds = seconds_since(t0);
      res_.policies[size_t(i)].select_seconds += res_.policies[size_t(i)].prefill_seconds;
      if (o_.device) prefill_device(i);
    }, threads_);
    res_.prefill_wall_seconds = seconds_since(prefill0);
  }

  void run_blocks() {
    for (int64_t b0 = 0; b0 < R_; b0 += B_) {
      Block bk;
      bk.b0 = b0;
      bk.b1 = std::min(R_, b0 + B_);
      bk.nb = bk.b1 - b0;
      bk.s0 = rows_[size_t(bk.b0)];
      bk.s1 = rows_[size_t(bk.b1 - 1)] + 1;
      if (bk.s1 - bk.s0 != bk.nb) throw std::logic_error("replay: decode rows are not contiguous");
      // 1. Selections, in row order (selectors may keep state); policies concurrently.
      const auto select0 = Clock::now();
      parallel_for(npol_, [&](int i, int) { select_block(bk, i); }, threads_);
      res_.select_wall_seconds += seconds_since(select0);
      // 2. Ground truth once per (layer, KV head), then every policy's attention and metrics.
      // Per (layer, KV head) pair, on the worker thread `wi`; an error in one (a selector's bad token id)
      // stops the others and is rethrown by parallel_for.
      const auto metrics0 = Clock::now();
      parallel_for(pairs_, [&](int pair, int wi) { score_pair(bk, pair, workers_[size_t(wi)]); }, threads_);
      res_.metrics_wall_seconds += seconds_since(metrics0);
      if (o_.progress) o_.progress(double(bk.b1) / double(R_));
    }
  }

  ReplayResult aggregate(Clock::time_point wall0) {
    for (const Worker& w : workers_) {
      res_.gt_flops += w.flops;
      res_.gt_thread_seconds += w.gt_seconds;
      res_.metric_thread_seconds += w.metric_seconds;
      for (size_t i = 0; i < w.dev_ids.size(); ++i) {
        checks_[i].id_lists += w.dev_ids[i];
        checks_[i].mismatched += w.dev_ids_bad[i];
        if (w.dev_ids_bad[i] > 0 && checks_[i].first_mismatch.empty())
          checks_[i].first_mismatch = "the device's ids for full attention are not 0..p";
      }
      for (size_t i = 0; i < w.dev_outputs.size(); ++i) {
        checks_[i].outputs += w.dev_outputs[i];
        checks_[i].max_rel_error = std::max(checks_[i].max_rel_error, w.dev_error[i]);
      }
    }
    const int64_t R = R_;
    const int nr = int(std::max<int64_t>(1, std::min<int64_t>(o_.step_ranges, R)));
    double ctx = 0;
    for (int64_t r = 0; r < R; ++r) ctx += double(t_.position(rows_[size_t(r)]) + 1);
    for (int i = 0; i < npol_; ++i) {
      PolicyReplay& pr = res_.policies[size_t(i)];
      const MetricStore& m = metrics_[size_t(i)];
      const bool focus = !o_.focus_tokens.empty();
      pr.overall = quality_of(m, values_, focus, 0, R, -1);
      for (int l = 0; l < t_.layers; ++l) pr.per_layer.push_back(quality_of(m, values_, focus, 0, R, l));
      for (int k = 0; k < nr && R > 0; ++k) {
        const int64_t a = R * k / nr, b = R * (k + 1) / nr;
        pr.ranges.emplace_back(a, b);
        pr.per_range.push_back(quality_of(m, values_, focus, a, b, -1));
      }
      pr.statistics = sel_[size_t(i)]->statistics();
      pr.context_mean = R > 0 ? ctx / double(R) : 0;
      if (o_.device) {
        pr.device = checks_[size_t(i)];
        pr.device->steps = device_steps(*dev_[size_t(i)]);
      }
    }
    res_.wall_seconds = seconds_since(wall0);
    return std::move(res_);
  }

 private:
  struct Block {
    int64_t b0 = 0, b1 = 0, nb = 0;  // decode rows [b0, b1), nb of them
    int64_t s0 = 0, s1 = 0;          // the same rows as trace rows [s0, s1)
  };
  // One (layer, KV head) pair and the query heads of its group.
  struct Pair {
    int pair = 0, l = 0, h = 0, g = 0;
    const std::vector<int>* grp = nullptr;
  };

  // --device: per policy a fork of the device backend (its own step log) and, when the selector runs its
  // kernels on a backend (policies/kernel_selector.hpp), a second instance of it on that fork.
  void prefill_device(int i) {
    dev_[size_t(i)] = o_.device->fork();
    DeviceCheck& c = checks_[size_t(i)];
    c.backend = dev_[size_t(i)]->name();
    c.timing_meaningful = dev_[size_t(i)]->timing_meaningful();
    auto d = make_selector(runs_[size_t(i)].policy, runs_[size_t(i)].params);
    if (auto* ks = dynamic_cast<policies::KernelSelector*>(d.get())) {
      ks->use_backend(*dev_[size_t(i)]);
      d->prefill(t_);
      dsel_[size_t(i)] = std::move(d);
      c.selection_on_backend = true;
    }
  }

  // Policy i's selections for the block's rows, then (--device) the same rows on the device backend,
  // compared set by set with the host's.
  void select_block(const Block& bk, int i) {
    auto& ps = sels_[size_t(i)];
    ps.resize(size_t(B_));
    const auto t0 = Clock::now();
    for (int64_t r = 0; r < bk.nb; ++r) {
      auto& out = ps[size_t(r)];
      out.resize(size_t(pairs_));
      for (auto& hs : out) hs.clear();
      sel_[size_t(i)]->select(t_, bk.s0 + r, out);
    }
    res_.policies[size_t(i)].select_seconds += seconds_since(t0);
    DeviceCheck& c = checks_[size_t(i)];
    if (!dsel_[size_t(i)]) {
      c.selections += o_.device ? bk.nb * pairs_ : 0;  // the host's own selection: identical by construction
      return;
    }
    auto& ds = dsels_[size_t(i)];
    ds.resize(size_t(B_));
    for (int64_t r = 0; r < bk.nb; ++r) {
      auto& out = ds[size_t(r)];
      out.resize(size_t(pairs_));
      for (auto& hs : out) hs.clear();
      dsel_[size_t(i)]->select(t_, bk.s0 + r, out);
      for (int pair = 0; pair < pairs_; ++pair) {
        ++c.selections;
        if (same_selection(ps[size_t(r)][size_t(pair)], out[size_t(pair)])) continue;
        if (c.mismatched++ == 0)
          c.first_mismatch = "decode row " + std::to_string(bk.b0 + r) + ", layer slot " +
                             std::to_string(pair / t_.kv_heads) + ", KV head slot " + std::to_string(pair % t_.kv_heads);
      }
    }
  }

  // The ground truth of one (layer, KV head) over the block, its top-k per row, then every policy's
  // selections scored against it.
  void score_pair(const Block& bk, int pair, Worker& w) {
    Pair p;
    p.pair = pair;
    p.l = pair / t_.kv_heads;
    p.h = pair % t_.kv_heads;
    p.grp = &t_.group_of[size_t(p.h)];
    p.g = int(p.grp->size());
    const int g = p.g;
    const int64_t nb = bk.nb;
    double c0 = thread_cpu_seconds();
    ground_truth_block(t_, p.l, p.h, bk.s0, bk.s1, w.gt);
    w.gt_seconds += thread_cpu_seconds() - c0;
    w.flops += w.gt.flops;
    c0 = thread_cpu_seconds();
    const int64_t cols = w.gt.cols;
    if (int64_t(w.mark.size()) < cols) w.mark.assign(size_t(cols), 0);
    w.top.resize(size_t(g) * nb);
    for (int j = 0; j < g; ++j)
      for (int64_t r = 0; r < nb; ++r)
        topk_of_row(w.gt.p(j, r), t_.position(bk.s0 + r) + 1, topk_, w.top[size_t(j) * nb + r]);
    w.Qg.resize(size_t(g) * t_.d);
    w.o_sel.resize(size_t(g) * t_.d);
    w.lse.resize(size_t(g));
    w.dev_outputs.resize(size_t(npol_));
    w.dev_error.resize(size_t(npol_));
    w.dev_ids.resize(size_t(npol_));
    w.dev_ids_bad.resize(size_t(npol_));
    w.jobs.clear();
    w.job_of.assign(size_t(npol_) * size_t(nb), -1);
    if (values_ && !o_.attention_kernel && g <= 16) restrict_from_ground_truth(bk, p, w);
    for (int i = 0; i < npol_; ++i)
      for (int64_t r = 0; r < nb; ++r) score_selection(bk, p, i, r, w);
    w.metric_seconds += thread_cpu_seconds() - c0;
  }

  // The block's selections whose attention can be restricted from the ground truth (strictly increasing
  // token lists, in range), as jobs, and their attention outputs (subset_attention_block).
  void restrict_from_ground_truth(const Block& bk, const Pair& p, Worker& w) {
    const int64_t nb = bk.nb;
    for (int i = 0; i < npol_; ++i)
      for (int64_t r = 0; r < nb; ++r) {
        const HeadSelection& hs = sels_[size_t(i)][size_t(r)][size_t(p.pair)];
        if (hs.all || std::adjacent_find(hs.tokens.begin(), hs.tokens.end(), std::greater_equal<>()) !=
                          hs.tokens.end())
          continue;  // not strictly increasing: the general path
        if (!hs.tokens.empty() && (hs.tokens.front() < 0 || hs.tokens.back() >= t_.position(bk.s0 + r) + 1))
          continue;  // score_selection names the bad token
        w.job_of[size_t(i) * size_t(nb) + size_t(r)] = int(w.jobs.size());
        SubsetJob jb;
        jb.tokens = &hs.tokens;
        jb.r = r;
        w.jobs.push_back(jb);
      }
    w.sub_out.resize(w.jobs.size() * size_t(p.g) * t_.d);
    w.sub_lse.resize(w.jobs.size() * size_t(p.g));
    subset_attention_block(w.gt, t_.v(p.l, p.h), t_.d, w.jobs, w.sub_out.data(), w.sub_lse.data());
  }

  // --device: the attention over the device's own selection on the device backend, against the host's
  // output (the ground truth's for `all`, which the host path takes as exact).
  void check_device(const Pair& p, int i, int64_t r, int64_t s, int64_t n, const HeadSelection& hs, Worker& w) {
    if (!o_.device || !values_) return;
    const HeadSelection& dh = dsel_[size_t(i)] ? dsels_[size_t(i)][size_t(r)][size_t(p.pair)] : hs;
    w.dev_id_lists = w.dev_id_mismatched = 0;
    device_attention(*dev_[size_t(i)], t_, p.l, p.h, s, n, dh, scale_, w);
    w.dev_ids[size_t(i)] += w.dev_id_lists;
    w.dev_ids_bad[size_t(i)] += w.dev_id_mismatched;
    for (int j = 0; j < p.g; ++j) {
      const float* host = hs.all ? w.gt.o(j, r) : w.o_sel.data() + size_t(j) * t_.d;
      w.dev_error[size_t(i)] =
          std::max(w.dev_error[size_t(i)], relative_error(w.d_out.data() + size_t(j) * t_.d, host, t_.d));
      ++w.dev_outputs[size_t(i)];
    }
  }

  // The attention output over a selection into w.o_sel / w.lse: restricted from the ground truth (job
  // `jb`) or the host backend's gather kernel, then its extra entries merged in.
  void attend_selection(const Pair& p, int64_t s, int64_t n, const HeadSelection& hs, int job,
                        const SubsetJob* jb, Worker& w) {
    const int g = p.g;
    const int64_t m_extra = hs.extra_count();
    for (int j = 0; j < g; ++j) std::copy_n(t_.q(p.l, (*p.grp)[size_t(j)], s), t_.d, w.Qg.data() + size_t(j) * t_.d);
    if (jb != nullptr) {
      std::copy_n(w.sub_out.data() + size_t(job) * g * t_.d, size_t(g) * t_.d, w.o_sel.data());
      std::copy_n(w.sub_lse.data() + size_t(job) * g, size_t(g), w.lse.data());
    } else
      host_.gather_attention({.queries = w.Qg.data(), .rows = g, .keys = t_.k(p.l, p.h), .values = t_.v(p.l, p.h),
                              .resident_rows = n, .d = t_.d, .idx = hs.tokens.data(),
                              .m = int64_t(hs.tokens.size()), .scale = scale_, .out = w.o_sel.data(),
                              .lse = w.lse.data()});
    if (m_extra == 0) return;
    w.o_extra.resize(size_t(g) * t_.d);
    w.lse_extra.resize(size_t(g));
    if (o_.attention_kernel) {  // the backend's kernel over the entries made contiguous
      const HeadSelection& ex = flat_extras(hs, t_.d, w.flat);
      host_.biased_attention({.queries = w.Qg.data(), .rows = g, .keys = ex.extra_k.data(),
                              .values = ex.extra_v.data(), .bias = ex.extra_bias.data(), .m = m_extra,
                              .d = t_.d, .scale = scale_, .out = w.o_extra.data(), .lse = w.lse_extra.data()});
    } else {  // the optimized kernel over the owned rows and the runs where they are
      w.segments.clear();
      if (!hs.extra_bias.empty())
        w.segments.push_back({hs.extra_k.data(), hs.extra_v.data(), nullptr, hs.extra_bias.data(),
                              int64_t(hs.extra_bias.size())});
      for (const auto& run : hs.extra_runs)
        w.segments.push_back({.keys = run.k, .values = run.v, .bias = run.bias, .m = run.count,
                              .k_us = run.k_us, .k_vt = run.k_vt, .v_us = run.v_us, .v_vt = run.v_vt,
                              .k_rank = run.k_rank, .v_rank = run.v_rank});
      host::attend_segments(w.Qg.data(), g, w.segments.data(), int(w.segments.size()), t_.d, scale_,
                            w.o_extra.data(), w.lse_extra.data());
    }
    host_.merge_state({.out_a = w.o_sel.data(), .lse_a = w.lse.data(), .out_b = w.o_extra.data(),
                       .lse_b = w.lse_extra.data(), .rows = g, .d = t_.d, .out = w.o_sel.data(),
                       .lse = w.lse.data()});
  }

  // Policy i's selection at block row r for the pair: its attention and every metric (replay.hpp).
  void score_selection(const Block& bk, const Pair& p, int i, int64_t r, Worker& w) {
    const int g = p.g;
    const int64_t nb = bk.nb;
    MetricStore& m = metrics_[size_t(i)];
    const HeadSelection& hs = sels_[size_t(i)][size_t(r)][size_t(p.pair)];
    const int64_t s = bk.s0 + r, n = t_.position(s) + 1, ri = bk.b0 + r;
    if (hs.all) {
      check_device(p, i, r, s, n, hs, w);
      for (int j = 0; j < g; ++j) {
        const size_t at = m.at(ri, p.l, (*p.grp)[size_t(j)]);
        m.recall[at] = 1;
        m.topk[at] = 1;
        m.tokens[at] = float(n);
        m.error[at] = 0;
        m.focus[at] = 1;
      }
      return;
    }
    // A strictly increasing token list already restricted from the ground truth, with no extra
    // entries: its recall is the mass the restriction summed (the same doubles, in the same
    // order) and membership is a binary search. Otherwise mark the attended tokens (full
    // resolution or represented by extra entries).
    const int job = w.job_of[size_t(i) * size_t(nb) + size_t(r)];
    const SubsetJob* jb = job >= 0 && w.jobs[size_t(job)].ok ? &w.jobs[size_t(job)] : nullptr;
    const bool searched = jb != nullptr && hs.extra_tokens.empty();
    auto attended = [&](int32_t x) {
      return searched ? std::binary_search(hs.tokens.begin(), hs.tokens.end(), x) : w.mark[size_t(x)] != 0;
    };
    if (!searched) {
      for (int32_t x : hs.tokens) {
        if (x < 0 || x >= n) throw std::logic_error("selector " + runs_[size_t(i)].policy + " selected token " +
                                                    std::to_string(x) + " outside 0.." + std::to_string(n - 1));
        w.mark[size_t(x)] = 1;
      }
      for (int32_t x : hs.extra_tokens)
        if (x >= 0 && x < n) w.mark[size_t(x)] = 1;
    }
    const int64_t m_extra = hs.extra_count();
    // Focus recall: the share of the focus tokens already in the cache (< n) that are attended.
    float focus_recall = NAN;
    {
      int64_t in = 0, kept = 0;
      for (int32_t x : o_.focus_tokens)
        if (x < n) { ++in; kept += attended(x); }
      if (in > 0) focus_recall = float(double(kept) / double(in));
    }
    if (values_) attend_selection(p, s, n, hs, job, jb, w);
    check_device(p, i, r, s, n, hs, w);
    for (int j = 0; j < g; ++j) {
      double rec = 0;
      int64_t hit = 0;
      const auto& top = w.top[size_t(j) * nb + r];
      if (searched) {
        rec = jb->mass[j];
        for (int32_t x : top) hit += attended(x);
      } else {
        const float* pr = w.gt.p(j, r);
        // Σ over the union tokens ∪ extra_tokens: a token counts once (mark 1 -> 2 when counted).
        for (int32_t x : hs.tokens) { rec += pr[x]; w.mark[size_t(x)] = 2; }
        for (int32_t x : hs.extra_tokens)
          if (x >= 0 && x < n && w.mark[size_t(x)] == 1) { rec += pr[x]; w.mark[size_t(x)] = 2; }
        for (int32_t x : top) hit += w.mark[size_t(x)] != 0;
        // restore marks for the next head of the group
        for (int32_t x : hs.tokens) w.mark[size_t(x)] = 1;
        for (int32_t x : hs.extra_tokens)
          if (x >= 0 && x < n) w.mark[size_t(x)] = 1;
      }
      const size_t at = m.at(ri, p.l, (*p.grp)[size_t(j)]);
      m.recall[at] = float(std::min(1.0, rec));
      m.topk[at] = top.empty() ? 1.0f : float(hit) / float(top.size());
      m.tokens[at] = float(int64_t(hs.tokens.size()) + m_extra);
      m.focus[at] = focus_recall;
      if (values_) m.error[at] = output_error(w.gt.o(j, r), w.o_sel.data() + size_t(j) * t_.d, t_.d);
    }
    if (searched) return;
    for (int32_t x : hs.tokens) w.mark[size_t(x)] = 0;
    for (int32_t x : hs.extra_tokens)
      if (x >= 0 && x < n) w.mark[size_t(x)] = 0;
  }

  const TraceData& t_;
  const std::vector<PolicyRun>& runs_;
  const ReplayOptions& o_;
  const kernels::Backend& host_;
  ReplayResult res_;
  std::vector<int64_t> rows_;  // the decode rows replayed, in order
  int64_t R_ = 0;
  int npol_ = 0, pairs_ = 0, threads_ = 1, B_ = 1;
  std::vector<std::unique_ptr<TraceSelector>> sel_;
  std::vector<MetricStore> metrics_;
  std::vector<std::unique_ptr<kernels::Backend>> dev_;
  std::vector<std::unique_ptr<TraceSelector>> dsel_;
  std::vector<DeviceCheck> checks_;
  std::vector<Worker> workers_;
  // sels_[policy][row in block][pair]
  std::vector<std::vector<std::vector<HeadSelection>>> sels_, dsels_;
  float scale_ = 1;
  bool values_ = false;
  int64_t topk_ = 1;
};

}  // namespace

ReplayResult run_replay(const TraceData& t, const std::vector<PolicyRun>& runs, const ReplayOptions& o) {
  const auto wall0 = Clock::now();
#if defined(__GLIBC__)
  // Selectors and metrics allocate and free buffers of hundreds of KiB per (layer, head) and step; with
  // glibc's defaults some of them are mmap'd and unmapped or trimmed every time, and the page faults of
  // re-touching them cost seconds over a long replay. Keep them in the heap.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  Replayer rp(t, runs, o);
  rp.prefill();
  rp.run_blocks();
  return rp.aggregate(wall0);
}

std::vector<CarriedStatistic> apply_statistics(const Policy& policy, ParamValues& params,
                                               const std::map<std::string, Statistic>& stats, double context_ratio) {
  if (params.empty()) params = policy.defaults();
  std::vector<CarriedStatistic> out;
  const auto& specs = policy.params();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto it = stats.find(specs[i].name);
    if (it == stats.end() || it->second.samples <= 0 || !std::isfinite(it->second.value)) continue;
    CarriedStatistic c;
    c.param = specs[i].name;
    c.analytical = params[i];
    c.measured = it->second.value;
    c.rule = specs[i].carry;
    c.samples = it->second.samples;
    c.doc = it->second.doc;
    double v = c.rule == CarryRule::scale_context ? c.measured * context_ratio : c.measured;
    const Range& r = specs[i].range;
    if (specs[i].integer) v = std::round(v);
    if (r.lo_exclusive && v <= r.lo) v = std::nextafter(r.lo, r.hi);
    v = std::clamp(v, r.lo, r.hi);
    c.applied = v;
    params[i] = v;
    out.push_back(c);
  }
  return out;
}

}  // namespace kvsim::replay
