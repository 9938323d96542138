// Quest's page upper bound (host reference). Builder: per page, per channel, the min and max key
// (post-RoPE keys K[n, d], pages of page_size tokens, the last page partial over what exists).
// Bound of page p for query q: Σ_i max(q_i·max_i, q_i·min_i) ≥ q·k for every key k in the page.
#pragma once
#include <cstdint>
#include <vector>

namespace kvsim::ref {

// kmin, kmax: [ceil(n / page_size), d].
void quest_page_minmax(const float* K, int64_t n, int d, int page_size, float* kmin, float* kmax);
// bound[num_pages].
void quest_page_bound(const float* q, const float* kmin, const float* kmax, int64_t num_pages, int d, float* bound);
// Quest's page choice: the top k pages by bound (ties by lower id) with the last page always kept
// (k counts it), ascending. k >= num_pages keeps every page.
std::vector<int32_t> quest_select_pages(const float* bound, int64_t num_pages, int64_t k);

}  // namespace kvsim::ref
