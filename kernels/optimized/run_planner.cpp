#include "kernels/optimized/run_planner.hpp"

#include <stdexcept>

namespace kvsim::opt {

RowRuns plan_page_runs(std::span<const int32_t> pages, int rows_per_page, int max_run_pages) {
  if (rows_per_page <= 0) throw std::invalid_argument("plan_page_runs: rows_per_page <= 0");
  if (max_run_pages < 0) throw std::invalid_argument("plan_page_runs: max_run_pages < 0");
  RowRuns r;
  int run_pages = 0;
  for (size_t i = 0; i < pages.size(); ++i) {
    const int32_t pg = pages[i];
    if (pg < 0) throw std::invalid_argument("plan_page_runs: negative page id");
    const bool extends = run_pages > 0 && pg == pages[i - 1] + 1 && (max_run_pages == 0 || run_pages < max_run_pages);
    if (extends) {
      r.rows.back() += rows_per_page;
      ++run_pages;
    } else {
      r.src_row.push_back(int32_t(int64_t(pg) * rows_per_page));
      r.dst_row.push_back(int32_t(r.total_rows));
      r.rows.push_back(rows_per_page);
      run_pages = 1;
    }
    r.total_rows += rows_per_page;
  }
  return r;
}

}  // namespace kvsim::opt
