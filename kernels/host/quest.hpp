// Quest's page bound (score of every page from its per-channel key min/max), fast and bit-identical to
// ref::quest_page_bound: each page's bound is the reference's sum in channel order of
// max(q_c·min_c, q_c·max_c); the SIMD lanes run across 8 pages (8×8 register transposes of the min and
// max rows), not across channels. Bound: the 2·pages·d·4 bytes of the min/max rows.
#pragma once
#include <cstdint>

namespace kvsim::host {

void quest_page_bound(const float* q, const float* kmin, const float* kmax, int64_t num_pages, int d, float* bound);

}  // namespace kvsim::host
