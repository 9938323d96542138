#include "serve/serve.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

#include "core/error.hpp"
#include "core/quantile.hpp"
#include "core/yaml_reader.hpp"

namespace kvsim::serve {

const char* router_name(Router r) { return r == Router::least_loaded ? "least_loaded" : "round_robin"; }

ServingSpec read_serving(const Scenario& s) {
  YAML::Node node = s.serving;
  bool has_lines = true;
  if (!node || node.IsNull()) {
    // No block: a Poisson stream of 1,000 requests at 1 request/s with the workload's first context
    // and output lengths, so `kvsim serve` on any planning scenario answers something.
    node = YAML::Node(YAML::NodeType::Map);
    node["arrival"] = "poisson";
    node["rate"] = 1;
    node["requests"] = 1000;
    node["prompt_tokens"] = s.workload.context_tokens.empty() ? int64_t(8192) : s.workload.context_tokens.front();
    node["output_tokens"] = s.workload.output_tokens;
    has_lines = false;
  }
  if (!node.IsMap()) throw_input_error(s.file, line_of(node), "serving", "expected a mapping (docs/serving.md)");
  YamlMap m(node, s.file, "serving", has_lines);
  ServingSpec sp;
  sp.workload = read_workload(m);
  sp.engine.token_budget = m.integer("token_budget", Range::between(1, 1 << 24), 8192);
  sp.engine.chunk_tokens = m.integer("chunk_tokens", Range::between(1, 1 << 24),
                                     std::min<int64_t>(s.workload.prefill_chunk_tokens, sp.engine.token_budget));
  sp.engine.max_running = m.integer("max_running", Range::between(0, 1 << 20), 0);
  sp.engine.preemption =
      m.choice("preemption", {"recompute", "swap"}, std::string("recompute")) == "swap" ? Preemption::swap
                                                                                      : Preemption::recompute;
  sp.concurrency = m.integer("concurrency", Range::between(0, 1 << 20), 0);
  sp.slo_ttft_s = m.number("slo_ttft_s", Range::between(0, 1e6), 0.0);
  sp.slo_tpot_s = m.number("slo_tpot_s", Range::between(0, 1e6), 0.0);
  sp.replicas = int(m.integer("replicas", Range::between(1, 4096), 1));
  sp.router = m.choice("router", {"round_robin", "least_loaded"}, std::string("round_robin")) == "least_loaded"
                  ? Router::least_loaded
                  : Router::round_robin;
  m.finish();
  if (sp.concurrency > 0 && sp.workload.requests <= 0)
    throw_input_error(s.file, m.line_of("concurrency"), "serving.concurrency",
                      "a closed loop needs `requests` (how many requests the clients issue in all)");
  return sp;
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = int64_t(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  p.p50 = interpolated_quantile(v, 0.5);
  p.p90 = interpolated_quantile(v, 0.9);
  p.p99 = interpolated_quantile(v, 0.99);
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  p.max = v.back();
  return p;
}

namespace {

int pick(const std::vector<Engine>& engines, Router router, int64_t i) {
  if (router == Router::round_robin) return int(i % int64_t(engines.size()));
  int best = 0;
  for (int k = 1; k < int(engines.size()); ++k)
    if (engines[size_t(k)].outstanding() < engines[size_t(best)].outstanding()) best = k;
  return best;
}

}  // namespace

int64_t max_prompt(const std::vector<Request>& requests) {
  int64_t m = 1;
  for (const Request& r : requests) m = std::max(m, r.prompt_tokens);
  return m;
}

ServeResult run_serving(const Deployment& d, const Policy& pol, const ParamValues& params, const ServingSpec& spec,
                        const std::vector<Request>& requests, bool record_iterations) {
  StepCosts costs(d, pol, params, max_prompt(requests));
  return run_serving(costs, pol, spec, requests, record_iterations);
}

ServeResult run_serving(StepCosts& costs, const Policy& pol, const ServingSpec& spec,
                        const std::vector<Request>& requests, bool record_iterations) {
  const auto t0 = std::chrono::steady_clock::now();
  ServeResult res;
  res.label = std::string(pol.name());
  res.tensor_parallel = costs.deployment().tp;
  res.replicas = spec.replicas;
  const int64_t evaluations_before = costs.decode_evaluations();
  // One cost table for all replicas: they are the same deployment.
  EngineConfig cfg = spec.engine;
  cfg.record_iterations = record_iterations;
  std::vector<Engine> engines;
  engines.reserve(size_t(spec.replicas));
  for (int k = 0; k < spec.replicas; ++k) engines.emplace_back(costs, cfg, k);

  if (spec.concurrency <= 0) {
    // Open loop: each request joins its replica when that replica's clock reaches its arrival.
    for (size_t i = 0; i < requests.size(); ++i) {
      const Request& r = requests[i];
      if (spec.router == Router::least_loaded)
        for (Engine& e : engines) e.advance_to(r.arrival_s);
      Engine& e = engines[size_t(pick(engines, spec.router, int64_t(i)))];
      e.advance_to(r.arrival_s);
      e.submit(r);
    }
    for (Engine& e : engines) e.drain();
  } else {
    // Closed loop: `concurrency` clients, each issuing its next request when its last one finishes.
    // The replica whose clock is furthest behind steps next, so requests are issued in time order.
    size_t issued = 0;
    auto issue = [&](double t) {
      Request r = requests[issued];
      r.arrival_s = t;
      const int k = pick(engines, spec.router, int64_t(issued));
      ++issued;
      engines[size_t(k)].advance_to(t);
      engines[size_t(k)].submit(r);
    };
    while (issued < requests.size() && int64_t(issued) < spec.concurrency) issue(0.0);
    for (;;) {
      int k = -1;
      for (int j = 0; j < int(engines.size()); ++j)
        if (engines[size_t(j)].outstanding() > 0 && (k < 0 || engines[size_t(j)].now() < engines[size_t(k)].now()))
          k = j;
      if (k < 0) break;
      Engine& e = engines[size_t(k)];
      const int64_t before = e.finished();
      if (!e.step()) break;  // cannot happen: outstanding work has arrived
      for (int64_t f = before; f < e.finished() && issued < requests.size(); ++f) issue(e.now());
    }
  }

  std::vector<EngineTotals> totals;
  res.requests.resize(requests.size());
  for (Engine& e : engines) {
    for (const RequestResult& r : e.results()) res.requests[size_t(r.id)] = r;
    totals.push_back(e.totals());
    if (record_iterations) res.iterations.push_back(e.iterations());
  }
  res.summary = summarize(res.requests, totals, spec, costs.hbm_capacity());
  res.decode_evaluations = costs.decode_evaluations() - evaluations_before;
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

ServeSummary summarize(const std::vector<RequestResult>& reqs, const std::vector<EngineTotals>& totals,
                       const ServingSpec& spec, double hbm_capacity) {
  ServeSummary s;
  s.requests = int64_t(reqs.size());
  s.hbm_capacity = hbm_capacity;
  std::vector<double> ttft, tpot, e2e;
  double first = 1e300, last_finish = 0, last_arrival = 0, out_tokens = 0;
  int64_t good = 0;
  for (const RequestResult& r : reqs) {
    first = std::min(first, r.arrival_s);
    last_arrival = std::max(last_arrival, r.arrival_s);
    if (r.rejected) { ++s.rejected; continue; }
    if (r.finish_s < 0) continue;
    ++s.finished;
    last_finish = std::max(last_finish, r.finish_s);
    ttft.push_back(r.ttft());
    if (r.output_tokens > 1) tpot.push_back(r.tpot());
    e2e.push_back(r.e2e());
    out_tokens += double(r.output_tokens);
    const bool ok = (spec.slo_ttft_s <= 0 || r.ttft() <= spec.slo_ttft_s) && (spec.slo_tpot_s <= 0 || r.tpot() <= spec.slo_tpot_s);
    good += ok;
  }
  if (reqs.empty()) return s;
  s.duration_s = std::max(1e-12, last_finish - first);
  s.last_arrival_s = last_arrival;
  s.drain_s = std::max(0.0, last_finish - last_arrival);
  s.ttft = percentiles(ttft);
  s.tpot = percentiles(tpot);
  s.e2e = percentiles(e2e);
  s.throughput_tok_s = out_tokens / s.duration_s;
  s.request_rate = double(s.finished) / s.duration_s;
  s.goodput_rate = double(good) / s.duration_s;
  s.slo_attainment = s.finished > 0 ? double(good) / double(s.finished) : 0;
  double busy = 0, area = 0, wait = 0, batch = 0, hbm = 0, dram = 0;
  for (const EngineTotals& t : totals) {
    s.preemptions += t.preemptions;
    s.iterations += t.iterations;
    busy += t.busy_s;
    area += t.in_system_area;
    wait += t.waiting_area;
    batch += t.batch_area;
    hbm += t.hbm_area;
    dram += t.dram_area;
    s.hbm_peak = std::max(s.hbm_peak, t.hbm_peak);
    s.dram_peak = std::max(s.dram_peak, t.dram_peak);
    s.swap_bytes += t.swap_bytes;
  }
  const double replicas = double(std::max<size_t>(1, totals.size()));
  s.busy_fraction = busy / (s.duration_s * replicas);
  s.mean_batch = busy > 0 ? batch / busy : 0;            // while busy
  s.mean_waiting = wait / (s.duration_s * replicas);     // per replica, over the run
  s.hbm_mean = busy > 0 ? hbm / busy : 0;
  s.dram_mean = busy > 0 ? dram / busy : 0;
  // Little's law, L = λW: the time-averaged number of requests in the system (from the iterations)
  // against the finished rate times the mean end-to-end latency (from the requests).
  s.little_l = area / s.duration_s;
  s.little_lambda_w = s.request_rate * s.e2e.mean;
  // Overload: a stable queue has a stationary TTFT; past capacity the queue, and TTFT with it, grows
  // with every arrival. Compare the last quarter of arrivals with the second.
  if (spec.concurrency <= 0 && ttft.size() >= 40) {
    std::vector<const RequestResult*> done;  // by id, which is arrival order in an open loop
    for (const RequestResult& r : reqs)
      if (!r.rejected && r.finish_s >= 0) done.push_back(&r);
    const size_t q = done.size() / 4;
    double q2 = 0, q4 = 0;
    for (size_t i = q; i < 2 * q; ++i) q2 += done[i]->ttft();
    for (size_t i = 3 * q; i < done.size(); ++i) q4 += done[i]->ttft();
    q2 /= double(q);
    q4 /= double(done.size() - 3 * q);
    if (q4 > 2 * q2 + 1.0) {
      s.overloaded = true;
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "the queue grows: mean TTFT %.3g s for the last quarter of arrivals against %.3g s for the "
                    "second; the arrival rate exceeds what %g replica(s) serve",
                    q4, q2, replicas);
      s.overload_reason = buf;
    }
  }
  return s;
}

namespace {
nlohmann::json pct_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}, {"n", p.n}};
}
}  // namespace

nlohmann::json summary_json(const ServeResult& r, const ServingSpec& spec) {
  const ServeSummary& s = r.summary;
  nlohmann::json j;
  j["policy"] = r.label;
  j["tensor_parallel"] = r.tensor_parallel;
  j["replicas"] = r.replicas;
  j["gpus"] = r.tensor_parallel * r.replicas;
  j["requests"] = s.requests;
  j["finished"] = s.finished;
  j["rejected"] = s.rejected;
  j["preemptions"] = s.preemptions;
  j["preemption_mode"] = preemption_name(spec.engine.preemption);
  j["iterations"] = s.iterations;
  j["duration_s"] = s.duration_s;
  j["drain_s"] = s.drain_s;
  j["ttft_s"] = pct_json(s.ttft);
  j["tpot_s"] = pct_json(s.tpot);
  j["e2e_s"] = pct_json(s.e2e);
  j["throughput_tok_s"] = s.throughput_tok_s;
  j["request_rate"] = s.request_rate;
  j["goodput_rate"] = s.goodput_rate;
  j["slo_attainment"] = s.slo_attainment;
  j["slo"] = {{"ttft_s", spec.slo_ttft_s}, {"tpot_s", spec.slo_tpot_s}};
  j["mean_batch"] = s.mean_batch;
  j["mean_waiting"] = s.mean_waiting;
  j["busy_fraction"] = s.busy_fraction;
  j["little"] = {{"L", s.little_l}, {"lambda_W", s.little_lambda_w}};
  j["memory"] = {{"hbm_capacity_bytes", s.hbm_capacity}, {"hbm_mean_bytes", s.hbm_mean}, {"hbm_peak_bytes", s.hbm_peak},
                 {"dram_mean_bytes", s.dram_mean}, {"dram_peak_bytes", s.dram_peak}, {"swap_bytes", s.swap_bytes}};
  j["overloaded"] = s.overloaded;
  if (s.overloaded) j["overload_reason"] = s.overload_reason;
  // The simulation's own speed goes to standard error and `kvsim bench`: the same seed must give
  // byte-identical output files.
  j["exact_decode_steps"] = r.decode_evaluations;
  return j;
}

std::string requests_csv(const std::vector<ServeResult>& results) {
  std::string out = "policy,tensor_parallel,replica,id,arrival_s,first_token_s,finish_s,ttft_s,tpot_s,e2e_s,prompt_tokens,"
                    "output_tokens,preemptions,rejected\n";
  char buf[512];
  for (const ServeResult& r : results)
    for (const RequestResult& q : r.requests) {
      const bool done = !q.rejected && q.finish_s >= 0;
      std::snprintf(buf, sizeof buf, "%s,%d,%d,%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%lld,%d,%d\n", r.label.c_str(),
                    r.tensor_parallel, q.replica, (long long)q.id, q.arrival_s, done ? q.first_token_s : NAN,
                    done ? q.finish_s : NAN, done ? q.ttft() : NAN, done ? q.tpot() : NAN, done ? q.e2e() : NAN,
                    (long long)q.prompt_tokens, (long long)q.output_tokens, q.preemptions, int(q.rejected));
      out += buf;
    }
  return out;
}

nlohmann::json iterations_timeline(const std::vector<ServeResult>& results) {
  nlohmann::json ev = nlohmann::json::array();
  int pid = 0;
  for (const ServeResult& r : results) {
    ++pid;
    ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", r.label}}}});
    for (size_t k = 0; k < r.iterations.size(); ++k) {
      const int tid = int(k);
      ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid},
                    {"args", {{"name", "replica " + std::to_string(k)}}}});
      for (const IterationRecord& it : r.iterations[k]) {
        ev.push_back({{"ph", "X"}, {"name", it.prefills > 0 ? "mixed" : "decode"}, {"pid", pid}, {"tid", tid},
                      {"ts", it.start_s * 1e6}, {"dur", it.seconds * 1e6},
                      {"args", {{"decodes", it.decodes}, {"prefills", it.prefills},
                                {"prefill_tokens", it.prefill_tokens}, {"preempted", it.preempted}}}});
        ev.push_back({{"ph", "C"}, {"name", "requests r" + std::to_string(k)}, {"pid", pid}, {"ts", it.start_s * 1e6},
                      {"args", {{"running", it.running}, {"waiting", it.waiting}}}});
        ev.push_back({{"ph", "C"}, {"name", "HBM GiB r" + std::to_string(k)}, {"pid", pid}, {"ts", it.start_s * 1e6},
                      {"args", {{"sequences", it.hbm_used / double(1 << 30)}}}});
      }
    }
  }
  return {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
}

std::string iterations_csv(const std::vector<ServeResult>& results) {
  std::string out = "policy,replica,start_s,seconds,decodes,prefills,prefill_tokens,running,waiting,hbm_bytes,dram_bytes,"
                    "preempted\n";
  char buf[512];
  for (const ServeResult& r : results)
    for (size_t k = 0; k < r.iterations.size(); ++k)
      for (const IterationRecord& it : r.iterations[k]) {
        std::snprintf(buf, sizeof buf, "%s,%zu,%.9g,%.9g,%d,%d,%lld,%d,%d,%.6g,%.6g,%d\n", r.label.c_str(), k,
                      it.start_s, it.seconds, it.decodes, it.prefills, (long long)it.prefill_tokens, it.running,
                      it.waiting, it.hbm_used, it.dram_used, it.preempted);
        out += buf;
      }
  return out;
}

}  // namespace kvsim::serve
