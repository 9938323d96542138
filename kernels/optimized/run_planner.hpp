// The host side of the staging gather (gather_runs.cu): a page list turned into runs of adjacent rows.
// A scattered copy of single pages is bound by per-transfer overhead (PCIe/NVLink TLPs of one page,
// one DMA or block setup each); merging pages whose ids are consecutive into one run lets a copy move
// long contiguous spans — published H100 measurements: about 12 GB/s for scattered pages, about 54 GB/s
// with runs of 16 pages (kernels/optimized/README.md).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvsim::opt {

// Runs in the layout of GatherRunsParams (params.hpp), to be uploaded as its three arrays.
struct RowRuns {
  std::vector<int32_t> src_row, dst_row, rows;
  int64_t total_rows = 0;
  int64_t size() const { return int64_t(rows.size()); }
};

// Page i of `pages` is rows [pages[i]·rows_per_page, (pages[i] + 1)·rows_per_page) of the source and
// goes to staging rows [i·rows_per_page, ...) (the page list's order is kept). Consecutive entries with
// pages[i + 1] = pages[i] + 1 join one run, up to max_run_pages pages per run (0: no limit; a limit
// keeps the per-block work of the copy kernel even). Throws std::invalid_argument on rows_per_page <= 0,
// a negative page id or max_run_pages < 0.
RowRuns plan_page_runs(std::span<const int32_t> pages, int rows_per_page, int max_run_pages = 0);

}  // namespace kvsim::opt
