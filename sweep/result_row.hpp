// The columns of a sweep's results file and the text of one row (docs/sweeps.md lists them):
//   point, key, policy, one column per axis (empty where the axis is another policy's parameter),
//   params (every parameter of the policy, name=value;...), then the planner's answer (feasible,
//   reason, batch, max batch, TPOT, TTFT, throughput, memory per tier, the dominant bound, the decode
//   step's solo roofline time per phase kind) and, with a trace, the replayed quality.
#pragma once
#include <cstdint>
#include <string>

#include "model/plan.hpp"
#include "sweep/evaluator.hpp"
#include "replay/replay.hpp"

namespace kvsim::sweep {

std::string results_header(const SweepSpec& spec);  // with its newline

// Appends one row (with its newline). `quality` is null without a trace or without a selector.
void append_row(std::string& out, const SweepSpec& spec, uint64_t point, uint64_t key, const Coords& c,
                const PointInputs& in, const PlanResult& r, const replay::Quality* quality);

}  // namespace kvsim::sweep
