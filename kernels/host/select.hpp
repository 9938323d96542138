// Top-k, fast and identical to ref::topk_indices: the same ranking (hd::rank_word: higher score first,
// ties by the lower index, NaN last, one strict total order, so any correct selection returns the same
// list), without the reference's allocation per call, and with the k-th word found by a radix select
// on the score's 32-bit key (two passes over 11 + 21 bits) instead of nth_element on 64-bit words. Bound:
// about 2-3 reads of the n scores plus a sort of the k survivors.
#pragma once
#include <cstdint>
#include <vector>

namespace kvsim::host {

int64_t topk_indices(const float* scores, int64_t n, int64_t k, int32_t* out);
std::vector<int32_t> topk(const float* scores, int64_t n, int64_t k);

}  // namespace kvsim::host
