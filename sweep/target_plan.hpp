// `kvsim plan --target-tpot MS | --target-throughput TOK_S` as one library call, shared by the CLI
// (tools/kvsim/target_plan_cmd.cpp) and the Python module (kvsim.target_plan): for every context and
// policy of a scenario, the target search of sweep/target_search.hpp, with the policy's own budget knobs
// (or --knob's) when a quality floor is given, and the answers as JSON (`kvsim.target_plan/1`) or a
// table (docs/planning.md).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/scenario.hpp"
#include "sweep/target_search.hpp"

namespace kvsim::sweep {

struct TargetPlanRequest {
  Target target;
  // Per policy, knobs searched in place of the ones its table declares (--knob).
  std::map<const Policy*, std::vector<Knob>> knobs;
  bool exhaustive = false;  // every grid point and batch (plan_target_brute_force), to check the search
  // Quality of a configuration, from replaying a trace; null without a trace. With one, every feasible
  // answer carries its quality, floor or not.
  const QualityFn* quality = nullptr;
  std::string trace;  // the trace's path (or synthetic config), for the report
  // Where the quality numbers come from, in words (QualitySource::description) and its kind ("real",
  // "fitted", "preset"); empty without a trace.
  std::string quality_source, quality_kind;
};

struct TargetPlanEntry {
  int64_t context = 0;
  std::vector<Knob> knobs;  // the knobs searched (empty without a quality floor)
  TargetAnswer answer;
  bool pessimistic = true;  // the end of the 80% range the target was met at (Target::pessimistic)
};

// Every context of the scenario's workload × every policy, in that order. A quality floor needs
// `quality` (a logic error otherwise: callers check their own options first).
std::vector<TargetPlanEntry> plan_targets(const Scenario& s, const TargetPlanRequest& r);

// One --knob "POLICY.PARAM=V1,V2,..." (model/policy_setting.hpp), values ascending and in the
// parameter's range, into `knobs`. Throws InputError naming --knob, the text and what is allowed.
void add_knob(const std::string& text, const PolicyCatalog& catalog, std::map<const Policy*, std::vector<Knob>>& knobs);

// The answers as `kvsim.target_plan/1` JSON, or as the table `kvsim plan --target-*` prints.
std::string target_plan_json(const Scenario& s, const TargetPlanRequest& r, const std::vector<TargetPlanEntry>& answers);
std::string target_plan_text(const Scenario& s, const TargetPlanRequest& r, const std::vector<TargetPlanEntry>& answers);

}  // namespace kvsim::sweep
