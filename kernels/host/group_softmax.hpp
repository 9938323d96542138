// CTKVR's group statistic over scored keys: a softmax over the keys per query head, then the maximum
// over the G heads of the group, exactly as ref::softmax_rows followed by ref::reduce_max_rows compute
// it (the same float exp, the same double sum in key order, the same float inverse), so the result is
// bit-identical and the top-k built on it is the reference's list.
#pragma once
#include <cstdint>

namespace kvsim::host {

// S: G rows of n scores, row g at S + g·lds (overwritten with the row's softmax); A: n outputs,
// A[i] = max over g of softmax_g[i].
void group_softmax_max(float* S, int G, int64_t n, int64_t lds, float* A);

}  // namespace kvsim::host
