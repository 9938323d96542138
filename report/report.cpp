#include "report/report.hpp"

#include <nlohmann/json.hpp>

#include "model/plan.hpp"
#include "model/report.hpp"
#include "model/scenario.hpp"
#include "policies/registry.hpp"
#include "report/page.hpp"
#include "report/plotly_js.hpp"
#include "report/report_data.hpp"
#include "serve/serve.hpp"

namespace kvsim::report {

using json = nlohmann::json;

std::string render_report(const ReportInputs& in) {
  const json data = report_data(in);  // the inputs first: a bad file is reported before a missing library
  return render_page(data, plotly_js());
}

namespace {

// `kvsim serve`'s outputs for the scenario's serving: block: the summary (as --format json writes it),
// the per-request and per-iteration CSVs. One policy after another, as the results do not depend on it.
void run_serving_block(const Scenario& s, const Deployment& d, ReportInputs& out) {
  const serve::ServingSpec spec = serve::read_serving(s);
  const std::vector<serve::Request> requests = serve::make_requests(spec.workload, s.model.max_context);
  std::vector<serve::ServeResult> results;
  for (const PolicyChoice& pc : s.policies) results.push_back(serve::run_serving(d, *pc.policy, pc.params, spec, requests, true));
  // Entries of the same policy (with different parameters) are told apart by their entry index, as
  // `kvsim serve` labels them.
  for (size_t a = 0; a < results.size(); ++a)
    for (size_t b = 0; b < results.size(); ++b)
      if (a != b && results[a].label == std::string(s.policies[b].policy->name())) {
        results[a].label.append("#").append(std::to_string(a));  // not `+= "#" + ...`: GCC 12's -Wrestrict false positive
        break;
      }
  json j = {{"scenario", s.file}, {"requests", requests.size()}, {"policies", json::array()}};
  for (const serve::ServeResult& r : results) j["policies"].push_back(serve::summary_json(r, spec));
  out.serve = Source{s.file + " (serve)", j.dump(2) + "\n"};
  out.requests = Source{s.file + " (requests)", serve::requests_csv(results)};
  out.series = Source{s.file + " (iterations)", serve::iterations_csv(results)};
}

}  // namespace

ReportInputs run_scenario(const Scenario& s) {
  const Deployment d = make_deployment(s);
  const std::vector<PlanResult> results = plan_scenario(s, d, *find_policy("full"));
  ReportInputs in;
  in.plan = Source{s.file + " (plan)", plan_json(s, results).dump(2) + "\n"};
  if (s.serving.IsMap()) run_serving_block(s, d, in);
  return in;
}

}  // namespace kvsim::report
