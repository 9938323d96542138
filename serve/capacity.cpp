#include "serve/capacity.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace kvsim::serve {

std::string capacity_miss(const ServeSummary& s, const CapacityQuery& q) {
  char buf[160];
  if (s.rejected > 0) {
    std::snprintf(buf, sizeof buf, "%lld request(s) do not fit in memory", (long long)s.rejected);
    return buf;
  }
  if (s.overloaded) return "overloaded (the queue grows)";
  if (q.slo_ttft_p99_s > 0 && s.ttft.p99 > q.slo_ttft_p99_s) {
    std::snprintf(buf, sizeof buf, "p99 TTFT %.3g s > %.3g s", s.ttft.p99, q.slo_ttft_p99_s);
    return buf;
  }
  if (q.slo_tpot_p99_s > 0 && s.tpot.p99 > q.slo_tpot_p99_s) {
    std::snprintf(buf, sizeof buf, "p99 TPOT %.3g ms > %.3g ms", s.tpot.p99 * 1e3, q.slo_tpot_p99_s * 1e3);
    return buf;
  }
  return "";
}

CapacityResult find_capacity(const Scenario& s, const PolicyChoice& pc, const ServingSpec& spec,
                             const std::vector<Request>& requests, const CapacityQuery& q) {
  CapacityResult res;
  res.policy = std::string(pc.policy->name());
  std::vector<int> tps = q.tensor_parallel;
  if (tps.empty()) tps = {1, 2, 4, 8};
  const ModelConfig& m = s.model;
  for (int tp : tps) {
    if (!m.splits_over(tp)) continue;
    if (tp > q.max_gpus) continue;
    Scenario st = s;  // the deployment points into it
    st.workload.tensor_parallel = tp;
    const Deployment d = make_deployment(st);
    std::map<int, size_t> tried;  // replicas -> index into res.trials
    auto trial = [&](int replicas) -> const CapacityTrial& {
      auto it = tried.find(replicas);
      if (it == tried.end()) {
        ServingSpec sp = spec;
        sp.replicas = replicas;
        const ServeResult r = run_serving(d, *pc.policy, pc.params, sp, requests, false);
        CapacityTrial t{tp, replicas, false, capacity_miss(r.summary, q), r.summary};
        t.meets = t.why.empty();
        res.trials.push_back(t);
        it = tried.emplace(replicas, res.trials.size() - 1).first;
      }
      return res.trials[it->second];
    };
    // Doubling to the first passing count, then bisection between it and the last failing one.
    const int max_replicas = q.max_gpus / tp;
    int lo = 0, hi = 1;
    bool ok = false;
    for (;;) {
      hi = std::min(hi, max_replicas);
      const CapacityTrial& t = trial(hi);
      if (t.meets) { ok = true; break; }
      // More replicas do not make a request fit; and the GPU cap ends the search.
      if (t.summary.rejected > 0 || hi == max_replicas) break;
      lo = hi;
      hi *= 2;
    }
    if (!ok) continue;
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (trial(mid).meets) hi = mid;
      else lo = mid;
    }
    if (!res.found || tp * hi < res.gpus() || (tp * hi == res.gpus() && tp < res.tensor_parallel)) {
      res.found = true;
      res.tensor_parallel = tp;
      res.replicas = hi;
      res.summary = trial(hi).summary;
    }
  }
  if (!res.found) {
    res.reason = "no configuration within " + std::to_string(q.max_gpus) + " GPUs meets the targets";
    if (!res.trials.empty()) res.reason += " (largest tried: " + res.trials.back().why + ")";
  }
  return res;
}

}  // namespace kvsim::serve
