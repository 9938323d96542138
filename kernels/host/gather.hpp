// The staging gather (offloaded KV rows into a pinned staging buffer), fast: the index list is cut into
// runs of adjacent rows and each run is one memcpy, so a run of r rows costs one call instead of r
// (the reference copies row by row). Same output as ref::gather_rows. Bound: 2·m·row bytes (read and
// write) at DRAM speed for long runs; short runs pay a fixed cost per run (docs/validation/cpu.md).
#pragma once
#include <cstdint>

namespace kvsim::host {

// dst[j] = src[idx[j]] for rows of row_elems floats; idx entries in [0, n_rows) (checked). Returns the
// number of runs copied.
int64_t gather_rows(const float* src, int64_t n_rows, int64_t row_elems, const int32_t* idx, int64_t m, float* dst);

// ref::dedup_inplace's result (ids sorted ascending, unique; returns the count) from a bitmap over the
// id range instead of a sort: one pass setting bits, one scan of (max id + 1) / 64 words. For CTKVR's
// recall (C'·rho ids from a context of n tokens) that is O(C'·rho + n/64) instead of O(C'·rho·log).
// Falls back to the sort when an id is negative or the range is over 64 times the id count.
int64_t dedup_inplace(int32_t* ids, int64_t n);

}  // namespace kvsim::host
