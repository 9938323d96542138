// Exact merge of partial-softmax states (FlashInfer's merge_state / merge_states; host reference).
// A state is (o[d], lse): o is the softmax-normalized output over some key set, lse = log Σ exp(s_i)
// over that set. Merging states of disjoint key sets gives exactly the state of their union.
// Empty states (lse = -inf) are identities.
#pragma once
#include <cstdint>

namespace kvsim::ref {

// out may alias o_a or o_b. Returns the merged lse.
float merge_state(const float* o_a, float lse_a, const float* o_b, float lse_b, int d, float* out);

// N states o[N, d], lse[N] -> out[d]; returns the merged lse (max-shifted, one pass).
float merge_states(const float* o, const float* lse, int n_states, int d, float* out);

}  // namespace kvsim::ref
