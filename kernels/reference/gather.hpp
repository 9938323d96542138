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

// The inverse: dst rows idx[i] = src row i (a KV append / compaction write-back).
void scatter_rows(const float* src, int64_t m, int64_t row_elems, const int32_t* idx, float* dst, int64_t n_rows);

}  // namespace kvsim::ref
