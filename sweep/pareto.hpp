// Pareto fronts of a results table: for each front (two columns, e.g. TPOT and recall), each policy
// and each workload — the values of the scenario axes other than the batch (context, hardware,
// model...) — the feasible rows that no other row of that policy and workload beats on both columns
// (at least as good on one, strictly better on the other). A front thus trades budgets and batch. Directions: times and bytes are minimized, throughput
// and quality maximized (spec.hpp). Rows missing either value are left out.
#pragma once
#include <string>
#include <vector>

#include "sweep/result_store.hpp"
#include "sweep/spec.hpp"

namespace kvsim::sweep {

// The fronts as CSV: a `front` column ("X~Y") followed by the table's own columns; fronts in the
// given order, (policy, workload) groups in order of first appearance, rows by X from best to worst.
std::string pareto_csv(const ResultTable& t, const std::vector<ParetoSpec>& fronts, const std::string& file);

// The path of the fronts beside a results file: results.csv -> results.pareto.csv.
std::string pareto_path(const std::string& results_path);

}  // namespace kvsim::sweep
