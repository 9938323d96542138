// Dedup of index lists and gathers of rows into contiguous staging (host reference): CTKVR's
// DedupIdx + Gather, the "gather of offloaded KV into pinned staging" of SentenceKV/CTKVR/SEKV.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kvsim::ref {

// Sorted ascending, each id once.
std::vector<int32_t> dedup(std::span<const int32_t> ids);
// In place on ids[0..n): sorts, removes repeats, returns the new length.
int64_t dedup_inplace(int32_t* ids, int64_t n);

// dst[m, row_elems] = src rows idx[0..m) of src[n_rows, row_elems]. Throws std::out_of_range on an
// index outside [0, n_rows).
void gather_rows(const float* src, int64_t n_rows, int64_t row_elems, const int32_t* idx, int64_t m, float* dst);

// Gather of contiguous runs into staging: run r is rows [starts[r], starts[r] + lens[r]) of
// src[n_rows, row_elems]; the runs are written back to back into dst (a sentence, span or page of
// offloaded KV copied into the pinned staging buffer that a PCIe transfer then sends). The run length
// (lens[r] · row_elems · 4 bytes) is what sets a gather's efficiency (calibration.hpp). Returns the rows
// written. Throws std::out_of_range on a run outside [0, n_rows) and std::invalid_argument on a
// negative length or spans of different sizes.
int64_t gather_runs(const float* src, int64_t n_rows, int64_t row_elems, std::span<const int32_t> starts,
                    std::span<const int32_t> lens, float* dst);
// The inverse: dst rows idx[i] = src row i (a KV append / compaction write-back).
void scatter_rows(const float* src, int64_t m, int64_t row_elems, const int32_t* idx, float* dst, int64_t n_rows);

}  // namespace kvsim::ref
