// Capacity planning against a target (docs/planning.md): for one policy, the best configuration —
// budget parameters and batch — that meets a TPOT or throughput target and a quality floor.
//
//   --target-tpot T        maximize throughput subject to TPOT <= T
//   --target-throughput X  minimize TPOT subject to throughput >= X
//   quality floor          recall >= r and/or output error <= e (from a trace replay)
//
// The search relies on two monotonicities instead of a full grid: quality and cost both grow with
// every budget knob (more tokens kept, more bytes moved), and TPOT and throughput both grow with the
// batch. So (1) the smallest budget meeting the quality floor is found by bisection along the last
// knob for each setting of the others, with the previous settings bounding the bisection (a
// staircase walk); (2) budgets that another quality-feasible budget dominates knob by knob are
// pruned without a cost evaluation; (3) the batch is bisected in [1, max batch]. Ties go to the
// smaller budget. plan_target_brute_force evaluates every grid point and every batch; the tests
// check that both agree.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/plan.hpp"

namespace kvsim::sweep {

struct Target {
  enum class Kind { tpot, throughput } kind = Kind::tpot;
  double value = 0;                   // seconds (tpot) or tokens/s per GPU (throughput)
  std::optional<double> min_recall;   // attention-mass recall floor
  std::optional<double> max_error;    // attention-output relative error ceiling
  // Which end of the 80% range (model/uncertainty.hpp) the target is met at: the pessimistic one
  // (TPOT's high end, throughput's low end; the default: a plan that meets its target when the
  // estimate errs as its evidence did) or the estimate itself.
  bool pessimistic = true;
  bool has_quality() const { return min_recall || max_error; }
  // The TPOT and throughput a result is judged by at that end.
  double tpot(const PlanResult& r) const { return pessimistic ? r.tpot_hi_s : r.tpot_s; }
  double throughput(const PlanResult& r) const { return pessimistic ? r.throughput_lo_tok_s() : r.throughput_tok_s; }
};

struct QualityValue {
  double recall = 0;
  std::optional<double> error;
};
using QualityFn = std::function<QualityValue(const Policy&, const ParamValues&)>;

// A budget parameter searched over `values`, ascending (more budget = more quality and more cost).
struct Knob {
  int param = -1;
  std::vector<double> values;
};
// A policy's budget knobs at a context length: the grids its parameter table declares
// (Policy::budget_knobs, model/budget_knob.hpp), each value inside the parameter's range (docs/planning.md).
std::vector<Knob> budget_knobs(const Policy& p, int64_t context);
// "name=value, ..." of the knobs' parameters in `v`; `none` when there are no knobs.
std::string knobs_text(const Policy& p, const ParamValues& v, const std::vector<Knob>& knobs,
                       const std::string& none = "the scenario's parameters");

struct TargetProblem {
  const Deployment* deployment = nullptr;  // calibrated (the scenario's calibration)
  const Deployment* roofline = nullptr;    // the same with every efficiency 1.0
  const Policy* policy = nullptr;
  ParamValues base;                        // the scenario's parameters; knobs override theirs
  std::vector<Knob> knobs;                 // empty without a quality floor: budgets stay at base
  int64_t context = 0, output = 0;
  Target target;
};

// One limit at the answer: how much of it is used and how much is left (slack: the fraction of the
// limit left; for quality, the absolute margin).
struct Limit {
  std::string name;
  double used = 0, limit = 0, slack = 0;
};

struct TargetAnswer {
  const Policy* policy = nullptr;
  bool feasible = false;
  std::string failure;                  // what fails, when nothing is feasible
  ParamValues params;
  std::vector<int> knob_index;          // the chosen value of each knob
  int64_t batch = 0;
  PlanResult estimate;                  // with the scenario's calibration
  PlanResult roofline;                  // uncalibrated bound at the same point
  std::optional<QualityValue> quality;
  std::string binding;                  // what stops a better answer (memory, a bandwidth, compute, the target)
  std::string budget_binding;           // what holds the budget up (the quality floor), or ""
  std::vector<Limit> limits;
  int64_t cost_evaluations = 0, quality_evaluations = 0;
};

TargetAnswer plan_target(const TargetProblem& p, const QualityFn& quality);
TargetAnswer plan_target_brute_force(const TargetProblem& p, const QualityFn& quality);

}  // namespace kvsim::sweep
