// Exact score dot products, fast. The reference scores a query against a key as hd::dot: one sum in
// channel order c = 0..d-1, one rounding per multiply and per add (the build compiles without FP
// contraction, so no fused multiply-add changes a bit). A selection built on those scores (a top-k, a
// quantile, a threshold) must not change when the kernel gets faster, so these kernels keep that exact
// order per (query, key) and take their speed from elsewhere: SIMD lanes run across KEYS, not across
// channels. A tile of 16 keys is transposed once into [d][16] scratch (L1-resident), then every query
// row streams through it with one independent accumulator chain per (row, 8 keys); each lane of each
// chain is one key's reference sum, operation for operation. Results are bit-identical to
// `scale * hd::dot(q, k, d)`; the tests (tests/test_host_kernels.cpp) check that on random data.
#pragma once
#include <cstdint>

namespace kvsim::host {

// S[r * lds + i] = scale * Σ_c Q[r * ldq + c] · K[key(i) * d + c] for r < R, i < n, with key(i) = idx[i]
// when idx is given, else i. Keys are rows of K[*, d]; Q rows are `ldq` apart (ldq >= d).
void exact_dots(const float* Q, int R, int64_t ldq, const float* K, const int32_t* idx, int64_t n, int d,
                float scale, float* S, int64_t lds);

// The same products with one fused multiply-add per term where the CPU has FMA: faster, rounded
// differently from the reference. For attention logits only (never for a score a selection is made from).
void fast_dots(const float* Q, int R, int64_t ldq, const float* K, const int32_t* idx, int64_t n, int d, float scale,
               float* S, int64_t lds);

}  // namespace kvsim::host
