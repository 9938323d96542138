#include "sweep/target_search.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/units.hpp"
#include "core/format.hpp"

namespace kvsim::sweep {

namespace {

// Resource time of a phase: its roofline with only one resource's work, so the calibration's
// efficiencies (and gather penalties) apply exactly as they do to the whole phase.
enum class Res { gpu_compute, host_compute, hbm, dram, h2d, d2h, link, count };
constexpr const char* kResNames[] = {"GPU compute", "host compute", "HBM bandwidth", "host DRAM bandwidth",
                                     "PCIe host-to-device", "PCIe device-to-host", "GPU interconnect"};
double busy(const Phase& ph, Res r, const Machine& m) {
  Phase x = ph;
  x.work = Work{};
  const Work& w = ph.work;
  switch (r) {
    case Res::gpu_compute: if (ph.unit != ComputeUnit::host) x.work.flops = w.flops; break;
    case Res::host_compute: if (ph.unit == ComputeUnit::host) x.work.flops = w.flops; break;
    case Res::hbm: x.work.hbm_bytes = w.hbm_bytes; break;
    case Res::dram: x.work.dram_bytes = w.dram_bytes; break;
    case Res::h2d: x.work.h2d_bytes = w.h2d_bytes; break;
    case Res::d2h: x.work.d2h_bytes = w.d2h_bytes; break;
    case Res::link: x.work.link_bytes = w.link_bytes; break;
    case Res::count: break;
  }
  return roofline(x, m).seconds;
}

class Search {
 public:
  Search(const TargetProblem& p, const QualityFn& q) : p_(p), qf_(q) {}

  ParamValues params_of(const std::vector<int>& idx) const {
    ParamValues v = p_.base;
    for (size_t i = 0; i < idx.size(); ++i) v[size_t(p_.knobs[i].param)] = p_.knobs[i].values[size_t(idx[i])];
    return v;
  }
  const QualityValue& quality(const std::vector<int>& idx) {
    auto it = qcache_.find(idx);
    if (it != qcache_.end()) return it->second;
    ++quality_evals;
    return qcache_[idx] = qf_(*p_.policy, params_of(idx));
  }
  bool meets_quality(const QualityValue& q) const {
    const Target& t = p_.target;
    if (t.min_recall && q.recall < *t.min_recall) return false;
    if (t.max_error && (!q.error || *q.error > *t.max_error)) return false;
    return true;
  }
  bool ok(const std::vector<int>& idx) { return !p_.target.has_quality() || meets_quality(quality(idx)); }

  PlanResult eval(const ParamValues& v, int64_t batch, const Deployment* d = nullptr) {
    ++cost_evals;
    const DesignPoint dp{d ? d : p_.deployment, p_.policy, &v, p_.context, p_.output, batch};
    return evaluate(dp);
  }

  struct Pick {
    bool ok = false;
    int64_t batch = 0;
    double objective = 0;  // larger is better
    std::string why;
  };
  // The best batch for one configuration: bisection (or every batch, for the brute force).
  Pick pick_batch(const ParamValues& v, bool every_batch) {
    Pick k;
    const DesignPoint dp{p_.deployment, p_.policy, &v, p_.context, p_.output, 0};
    std::string reason;
    const int64_t M = plan_memory(dp, &reason).max_batch;
    if (M < 1) {
      k.why = "memory: " + reason;
      return k;
    }
    const bool tpot = p_.target.kind == Target::Kind::tpot;
    const double T = p_.target.value;
    const Target& tg = p_.target;
    auto meets = [&](const PlanResult& r) { return r.feasible && (tpot ? tg.tpot(r) <= T : tg.throughput(r) >= T); };
    auto objective = [&](const PlanResult& r) { return tpot ? tg.throughput(r) : -tg.tpot(r); };
    if (every_batch) {
      for (int64_t b = 1; b <= M; ++b) {
        const PlanResult r = eval(v, b);
        if (meets(r) && (!k.ok || objective(r) > k.objective)) k = {true, b, objective(r), ""};
      }
    } else if (tpot) {
      // TPOT grows with the batch: the largest batch within the target.
      if (!meets(eval(v, 1))) {
        k.batch = 0;
      } else {
        int64_t lo = 1, hi = M;
        if (meets(eval(v, M))) lo = M;
        while (hi - lo > 1) {
          const int64_t mid = lo + (hi - lo) / 2;
          (meets(eval(v, mid)) ? lo : hi) = mid;
        }
        k = {true, lo, objective(eval(v, lo)), ""};
      }
    } else {
      // Throughput grows with the batch: the smallest batch that reaches the target.
      if (meets(eval(v, M))) {
        int64_t lo = 1, hi = M;
        if (meets(eval(v, 1))) hi = 1;
        while (hi - lo > 1) {
          const int64_t mid = lo + (hi - lo) / 2;
          (meets(eval(v, mid)) ? hi : lo) = mid;
        }
        k = {true, hi, objective(eval(v, hi)), ""};
      }
    }
    if (!k.ok) {
      const PlanResult r = eval(v, tpot ? 1 : M);
      const std::string end = tg.pessimistic ? " (the high end of its 80% range)" : "";
      const std::string tend = tg.pessimistic ? " (the low end of its 80% range)" : "";
      k.why = tpot ? "TPOT: " + fmt("%.3f", tg.tpot(r) * 1e3) + " ms" + end + " at batch 1 exceeds the target " +
                         fmt("%.3f", T * 1e3) + " ms (the step is " + std::string(to_string(r.dominant)) + "-bound)"
                   : "throughput: " + fmt("%.1f", tg.throughput(r)) + " tok/s" + tend + " at the largest batch that fits (" +
                         std::to_string(M) + ": memory-limited) is below the target " + fmt("%.1f", T) +
                         " tok/s (the step is " + std::string(to_string(r.dominant)) + "-bound)";
    }
    return k;
  }

  // The answer for a chosen configuration: both estimates, limits and what binds.
  TargetAnswer finish(const std::vector<int>& idx, const Pick& k) {
    TargetAnswer a;
    a.policy = p_.policy;
    a.feasible = true;
    a.knob_index = idx;
    a.params = params_of(idx);
    a.batch = k.batch;
    a.estimate = eval(a.params, k.batch);
    a.roofline = eval(a.params, k.batch, p_.roofline);
    if (p_.target.has_quality()) a.quality = quality(idx);
    const Target& t = p_.target;
    const PlanResult& r = a.estimate;
    if (t.kind == Target::Kind::tpot) a.limits.push_back({"TPOT target", t.tpot(r), t.value, 1 - t.tpot(r) / t.value});
    else a.limits.push_back({"throughput target", t.throughput(r), t.value, t.throughput(r) / t.value - 1});
    const MemoryReport& m = r.memory;
    a.limits.push_back({"HBM capacity", m.hbm_bytes, m.hbm_usable, 1 - m.hbm_bytes / m.hbm_usable});
    if (m.dram_bytes > 0) a.limits.push_back({"host DRAM capacity", m.dram_bytes, m.dram_usable, 1 - m.dram_bytes / m.dram_usable});
    // Each resource's busy time in the step against the step time.
    double best_busy = 0;
    std::string busiest = "kernel-launch latency";
    for (size_t i = 0; i < size_t(Res::count); ++i) {
      double b = 0;
      for (const PhaseResult& ph : r.decode) b += busy(ph.phase, Res(i), p_.deployment->machine);
      if (b <= 0) continue;
      a.limits.push_back({kResNames[i], b, r.tpot_s, 1 - b / r.tpot_s});
      if (b > best_busy) best_busy = b, busiest = kResNames[i];
    }
    if (a.quality && t.min_recall) a.limits.push_back({"recall floor", a.quality->recall, *t.min_recall, a.quality->recall - *t.min_recall});
    if (a.quality && t.max_error && a.quality->error)
      a.limits.push_back({"output error ceiling", *a.quality->error, *t.max_error, *t.max_error - *a.quality->error});

    const bool at_max = k.batch == m.max_batch;
    const bool dram_tighter = m.dram_bytes > 0 && 1 - m.dram_bytes / m.dram_usable < 1 - m.hbm_bytes / m.hbm_usable;
    const std::string memory = std::string(dram_tighter ? "host DRAM capacity" : "HBM capacity") +
                               " (batch " + std::to_string(k.batch) + " is the largest that fits)";
    if (t.kind == Target::Kind::tpot) {
      a.binding = at_max ? memory
                         : "TPOT target (batch " + std::to_string(k.batch + 1) + " would exceed it); the step is limited by " +
                               busiest;
    } else {
      a.binding = "TPOT is set by " + busiest + " at the smallest batch (" + std::to_string(k.batch) +
                  ") that reaches the throughput target";
    }
    bool raised = false;
    for (int i : idx) raised |= i > 0;
    if (raised)
      a.budget_binding = "quality: " +
                         std::string(t.min_recall ? "recall >= " + fmt("%g", *t.min_recall) : "") +
                         (t.min_recall && t.max_error ? " and " : "") +
                         (t.max_error ? "output error <= " + fmt("%g", *t.max_error) : "") + " needs " +
                         knobs_text(*p_.policy, a.params, p_.knobs);
    return a;
  }

  const TargetProblem& p_;
  const QualityFn& qf_;
  std::map<std::vector<int>, QualityValue> qcache_;
  int64_t cost_evals = 0, quality_evals = 0;
};

// Mixed-radix increment over sizes; false after the last.
bool next_index(std::vector<int>& idx, const std::vector<size_t>& sizes) {
  for (size_t i = idx.size(); i-- > 0;) {
    if (size_t(++idx[i]) < sizes[i]) return true;
    idx[i] = 0;
  }
  return false;
}

TargetAnswer failed(Search& s, const TargetProblem& p, std::string why) {
  TargetAnswer a;
  a.policy = p.policy;
  a.failure = std::move(why);
  a.cost_evaluations = s.cost_evals;
  a.quality_evaluations = s.quality_evals;
  return a;
}

std::string quality_failure(Search& s, const TargetProblem& p) {
  std::vector<int> top;
  for (const Knob& k : p.knobs) top.push_back(int(k.values.size()) - 1);
  const QualityValue& q = s.quality(top);
  return "quality: no budget on the grid meets the floor; the largest (" + knobs_text(*p.policy, s.params_of(top), p.knobs) +
         ") reaches recall " + fmt("%.4f", q.recall) + (q.error ? ", output error " + fmt("%.4f", *q.error) : "");
}

}  // namespace

std::string knobs_text(const Policy& p, const ParamValues& v, const std::vector<Knob>& knobs, const std::string& none) {
  std::string s;
  for (const Knob& k : knobs)
    s += (s.empty() ? "" : ", ") + p.params()[size_t(k.param)].name + "=" +
         param_text(p.params()[size_t(k.param)], v[size_t(k.param)]);
  return s.empty() ? none : s;
}

std::vector<Knob> budget_knobs(const Policy& p, int64_t context) {
  std::vector<Knob> knobs;
  for (const BudgetKnob& bk : p.budget_knobs()) {
    const Range& r = p.params()[size_t(bk.param)].range;
    Knob k{bk.param, {}};
    for (double v : bk.grid.at(context))
      if (r.contains(v)) k.values.push_back(v);
    if (!k.values.empty()) knobs.push_back(std::move(k));
  }
  return knobs;
}

TargetAnswer plan_target(const TargetProblem& p, const QualityFn& qf) {
  Search s(p, qf);
  const size_t n = p.knobs.size();
  std::vector<std::vector<int>> candidates;
  if (n == 0) {
    candidates.push_back({});
    if (!s.ok({})) return failed(s, p, quality_failure(s, p));
  } else {
    // Staircase: for each setting of knobs 0..n-2, bisect the last knob for the smallest value that
    // meets the floor. A setting one step below in any knob already met the floor at j, so this
    // one does at j or earlier (monotone quality): j bounds the bisection from above.
    const size_t last = p.knobs.back().values.size();
    std::vector<size_t> sizes;
    for (size_t i = 0; i + 1 < n; ++i) sizes.push_back(p.knobs[i].values.size());
    std::map<std::vector<int>, int> jmin;
    std::vector<int> prefix(n - 1, 0);
    do {
      int hi = int(last) - 1;
      bool bounded = false;
      for (size_t i = 0; i + 1 < n; ++i) {
        if (prefix[i] == 0) continue;
        std::vector<int> q = prefix;
        --q[i];
        const int j = jmin.at(q);
        if (j >= 0 && j <= hi) hi = j, bounded = true;
      }
      std::vector<int> idx = prefix;
      idx.push_back(hi);
      if (!bounded && !s.ok(idx)) {
        jmin[prefix] = -1;
        continue;
      }
      int lo = -1;  // invariant: lo fails (or is below the grid), hi meets the floor
      while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        idx.back() = mid;
        (s.ok(idx) ? hi : lo) = mid;
      }
      idx.back() = hi;
      jmin[prefix] = hi;
      candidates.push_back(idx);
    } while (next_index(prefix, sizes));
    if (candidates.empty()) return failed(s, p, quality_failure(s, p));
    // Pareto pruning: a candidate another one dominates knob by knob costs at least as much.
    std::vector<std::vector<int>> kept;
    for (const auto& c : candidates) {
      bool dominated = false;
      for (const auto& d : candidates) {
        if (&d == &c) continue;
        bool le = true;
        for (size_t i = 0; i < n && le; ++i) le = d[i] <= c[i];
        dominated |= le && d != c;
      }
      if (!dominated) kept.push_back(c);
    }
    candidates = std::move(kept);
  }
  // Candidates are in lexicographic order, so keeping the first of equal objectives keeps the
  // smaller budget.
  std::optional<std::pair<std::vector<int>, Search::Pick>> best;
  std::string first_failure;
  for (const auto& c : candidates) {
    const Search::Pick k = s.pick_batch(s.params_of(c), false);
    if (!k.ok) {
      if (first_failure.empty()) first_failure = k.why + " (at " + knobs_text(*p.policy, s.params_of(c), p.knobs) + ")";
      continue;
    }
    if (!best || k.objective > best->second.objective) best = {{c, k}};
  }
  if (!best) return failed(s, p, first_failure);
  TargetAnswer a = s.finish(best->first, best->second);
  a.cost_evaluations = s.cost_evals;
  a.quality_evaluations = s.quality_evals;
  return a;
}

TargetAnswer plan_target_brute_force(const TargetProblem& p, const QualityFn& qf) {
  Search s(p, qf);
  std::vector<size_t> sizes;
  for (const Knob& k : p.knobs) sizes.push_back(k.values.size());
  std::vector<int> idx(p.knobs.size(), 0);
  std::optional<std::pair<std::vector<int>, Search::Pick>> best;
  bool any_quality = false;
  std::string first_failure;
  do {
    if (!s.ok(idx)) continue;
    any_quality = true;
    const Search::Pick k = s.pick_batch(s.params_of(idx), true);
    if (!k.ok) {
      if (first_failure.empty()) first_failure = k.why;
      continue;
    }
    if (!best || k.objective > best->second.objective) best = {{idx, k}};
  } while (next_index(idx, sizes));
  if (!any_quality) return failed(s, p, quality_failure(s, p));
  if (!best) return failed(s, p, first_failure);
  TargetAnswer a = s.finish(best->first, best->second);
  a.cost_evaluations = s.cost_evals;
  a.quality_evaluations = s.quality_evals;
  return a;
}

}  // namespace kvsim::sweep
