#include "serve/capacity.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "serve/step_range.hpp"

namespace kvsim::serve {

nlohmann::json capacity_json(const CapacityResult& r, bool quality) {
  using json = nlohmann::json;
  json p = {{"policy", r.policy}, {"found", r.found}, {"params", r.params}};
  if (quality) {
    p["budget"] = r.budget;
    p["quality"] = r.quality ? json{{"recall", r.quality->recall},
                                    {"output_error", r.quality->error ? json(*r.quality->error) : json(nullptr)}}
                             : json(nullptr);
  }
  if (r.found) {
    p["gpus"] = r.gpus();
    p["tensor_parallel"] = r.tensor_parallel;
    p["replicas"] = r.replicas;
    p["ttft_p99_s"] = r.summary.ttft.p99;
    p["tpot_p99_s"] = r.summary.tpot.p99;
    p["goodput_rate"] = r.summary.goodput_rate;
    p["sized_at"] = r.pessimistic ? "pessimistic" : "estimate";
    p["step_time_scale"] = {{"decode", r.decode_scale}, {"prefill", r.prefill_scale}};
  } else {
    p["reason"] = r.reason;
  }
  p["trials"] = json::array();
  for (const CapacityTrial& t : r.trials)
    p["trials"].push_back({{"tensor_parallel", t.tensor_parallel}, {"replicas", t.replicas}, {"meets", t.meets},
                           {"why", t.why}, {"ttft_p99_s", t.summary.ttft.p99}, {"tpot_p99_s", t.summary.tpot.p99}});
  return p;
}

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

namespace {

// The budget under a quality floor: the target search's answer at the workload's median request.
sweep::TargetAnswer floor_budget(const Scenario& s, const PolicyChoice& pc, const std::vector<Request>& requests,
                                 const CapacityQuery& q, const sweep::QualityFn& quality,
                                 std::vector<sweep::Knob>& knobs) {
  const MedianRequest median = median_request(requests);
  const Deployment dep = make_deployment(s);
  Scenario ideal = s;
  ideal.calibration = Calibration{};
  const Deployment bound = make_deployment(ideal);
  sweep::TargetProblem p;
  p.deployment = &dep;
  p.roofline = &bound;
  p.policy = pc.policy;
  p.base = pc.params;
  p.context = median.prompt;
  p.output = median.output;
  p.knobs = knobs = sweep::budget_knobs(*pc.policy, p.context);
  p.target.kind = sweep::Target::Kind::tpot;
  p.target.value = q.slo_tpot_p99_s > 0 ? q.slo_tpot_p99_s : 1e9;  // no TPOT target: the most throughput
  p.target.min_recall = q.min_recall;
  p.target.max_error = q.max_error;
  return sweep::plan_target(p, quality);
}

}  // namespace

CapacityResult find_capacity(const Scenario& s, const PolicyChoice& scenario_choice, const ServingSpec& spec,
                             const std::vector<Request>& requests, const CapacityQuery& q,
                             const sweep::QualityFn* quality) {
  CapacityResult res;
  res.policy = std::string(scenario_choice.policy->name());
  res.pessimistic = q.pessimistic;
  PolicyChoice pc = scenario_choice;
  if (q.has_quality()) {
    if (!quality) throw std::logic_error("find_capacity: a quality floor needs a quality function");
    std::vector<sweep::Knob> knobs;
    const sweep::TargetAnswer a = floor_budget(s, pc, requests, q, *quality, knobs);
    if (!a.feasible) {
      res.reason = a.failure;
      return res;
    }
    pc.params = a.params;
    res.budget = sweep::knobs_text(*pc.policy, a.params, knobs);
    res.quality = a.quality;
  }
  res.params = pc.params;
  std::vector<int> tps = q.tensor_parallel;
  if (tps.empty()) tps = {1, 2, 4, 8};
  const ModelConfig& m = s.model;
  for (int tp : tps) {
    if (!m.splits_over(tp)) continue;
    if (tp > q.max_gpus) continue;
    Scenario st = s;  // the deployment points into it
    st.workload.tensor_parallel = tp;
    const Deployment d = make_deployment(st);
    StepCosts costs(d, *pc.policy, pc.params, max_prompt(requests));  // shared by this degree's trials
    // The pessimistic end: the plan's 80% range at the workload's median request, as factors on every
    // step time (serve/step_range.hpp).
    double decode_scale = 1, prefill_scale = 1;
    if (q.pessimistic) {
      const StepRange sr = step_range(d, pc, requests);
      decode_scale = sr.decode_high, prefill_scale = sr.prefill_high;
      costs.scale_times(decode_scale, prefill_scale);
    }
    std::map<int, size_t> tried;  // replicas -> index into res.trials
    auto trial = [&](int replicas) -> const CapacityTrial& {
      auto it = tried.find(replicas);
      if (it == tried.end()) {
        ServingSpec sp = spec;
        sp.replicas = replicas;
        const ServeResult r = run_serving(costs, *pc.policy, sp, requests, false);
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
      res.decode_scale = decode_scale, res.prefill_scale = prefill_scale;
    }
  }
  if (!res.found) {
    res.reason = "no configuration within " + std::to_string(q.max_gpus) + " GPUs meets the targets";
    if (!res.trials.empty()) res.reason += " (largest tried: " + res.trials.back().why + ")";
  }
  return res;
}

}  // namespace kvsim::serve
