#include "sweep/pareto.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>

#include "core/error.hpp"
#include "model/policy.hpp"
#include "core/csv.hpp"
#include "policies/registry.hpp"

namespace kvsim::sweep {

std::string pareto_path(const std::string& p) {
  const size_t slash = p.rfind('/');
  const size_t dot = p.rfind('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_ext ? p.substr(0, dot) : p) + ".pareto" + (has_ext ? p.substr(dot) : ".csv");
}

std::string pareto_csv(const ResultTable& t, const std::vector<ParetoSpec>& fronts, const std::string& file) {
  std::string header = t.header;
  if (!header.empty() && header.back() == '\n') header.pop_back();
  const std::vector<std::string> cols = split_line(header);
  auto column = [&](const std::string& name) -> size_t {
    const auto it = std::find(cols.begin(), cols.end(), name);
    if (it == cols.end()) throw_input_error(file, 1, name, "the results have no column '" + name + "' for the Pareto front");
    return size_t(it - cols.begin());
  };
  const size_t policy_col = column("policy"), feasible_col = column("feasible");
  // Rows are compared only within one workload: the scenario axes other than the batch (context,
  // hardware, model...) split the rows into groups; budgets and batch are what a front trades.
  std::vector<size_t> group_cols;
  const size_t params_col = size_t(std::find(cols.begin(), cols.end(), "params") - cols.begin());
  for (size_t i = policy_col + 1; i < params_col && params_col < cols.size(); ++i) {
    const size_t dot = cols[i].find('.');
    const bool policy_param = dot != std::string::npos && find_policy(cols[i].substr(0, dot)) != nullptr;
    if (!policy_param && cols[i] != "workload.batch") group_cols.push_back(i);
  }

  // Only the four columns a front needs, read as views: no per-field allocation.
  struct Cells {
    std::string_view feasible, x, y;
    std::string group;  // policy, then the group columns' values
  };
  std::vector<std::string_view> fields;
  auto cells = [&](size_t i, size_t cx, size_t cy, Cells& c) {
    split_views(t.rows[i], fields);
    if (fields.size() != cols.size()) return false;
    c.feasible = fields[feasible_col];
    c.x = fields[cx];
    c.y = fields[cy];
    c.group.assign(fields[policy_col]);
    for (size_t g : group_cols) {
      c.group += '\x1f';
      c.group += fields[g];
    }
    return true;
  };

  std::string out = "front," + header + "\n";
  for (const ParetoSpec& f : fronts) {
    bool max_x = false, max_y = false;
    pareto_column_known(f.x, &max_x);
    pareto_column_known(f.y, &max_y);
    const size_t cx = column(f.x), cy = column(f.y);
    // Per policy and workload group (in order of first appearance): rows with both values.
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::pair<std::pair<double, double>, size_t>>, std::less<>> by_policy;
    Cells c;
    for (size_t i = 0; i < t.rows.size(); ++i) {
      if (!cells(i, cx, cy, c) || c.feasible != "1" || c.x.empty() || c.y.empty()) continue;
      // Both columns as "larger is better", so one rule serves every direction.
      double x = 0, y = 0;
      std::from_chars(c.x.data(), c.x.data() + c.x.size(), x);
      std::from_chars(c.y.data(), c.y.data() + c.y.size(), y);
      if (!max_x) x = -x;
      if (!max_y) y = -y;
      auto it = by_policy.find(c.group);
      if (it == by_policy.end()) {
        order.push_back(c.group);
        it = by_policy.emplace(c.group, std::vector<std::pair<std::pair<double, double>, size_t>>{}).first;
      }
      it->second.push_back({{x, y}, i});
    }
    for (const std::string& p : order) {
      auto& v = by_policy[p];
      // Best x first; among equal x, best y first (the others are dominated by it).
      std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
        return a.first.first != b.first.first ? a.first.first > b.first.first : a.first.second > b.first.second;
      });
      bool any = false;
      double best_y = 0;
      for (const auto& [xy, i] : v) {
        if (any && xy.second <= best_y) continue;
        any = true;
        best_y = xy.second;
        out += f.x + "~" + f.y + "," + t.rows[i] + "\n";
      }
    }
  }
  return out;
}

}  // namespace kvsim::sweep
