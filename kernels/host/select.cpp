#include "kernels/host/select.hpp"

#include <algorithm>
#include <array>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/reference/hd.hpp"

namespace kvsim::host {

namespace {
// The high word of hd::rank_word: smaller ranks first.
inline uint32_t rank_key(float f) { return uint32_t(ref::hd::rank_word(f, 0) >> 32); }

// Small k (k·16 <= n): one pass with a shrinking threshold. Candidates' rank words are buffered; when
// the buffer holds 4k, the k-th smallest word becomes the threshold and the rest are dropped. Indices
// only grow, so a later score whose key equals the threshold's ranks after it: a score is a candidate
// only if its key is strictly below the threshold key. 8 keys are made and compared per AVX2 step, so
// once the threshold settles (after ~k·ln(n/k) candidates) the pass runs at load speed.
int64_t topk_small(const float* scores, int64_t n, int64_t k, int32_t* out) {
  thread_local std::vector<unsigned long long> words;
  words.clear();
  const size_t cap = size_t(4 * k);
  uint32_t thr = 0xFFFFFFFFu;  // candidates: key < thr (everything but NaN until the first compaction)
  bool open = true;            // no threshold yet: take everything
  auto compact = [&]() {
    std::nth_element(words.begin(), words.begin() + (k - 1), words.end());
    words.resize(size_t(k));
    thr = uint32_t(*std::max_element(words.begin(), words.end()) >> 32);
    open = false;
  };
  auto take = [&](int64_t i) {
    const uint32_t key = rank_key(scores[i]);
    if (!open && key >= thr) return;
    words.push_back((static_cast<unsigned long long>(key) << 32) | uint32_t(int32_t(i)));
    if (words.size() >= cap) compact();
  };
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  for (; i + 8 <= n; i += 8) {
    if (open) {
      for (int j = 0; j < 8; ++j) take(i + j);
      continue;
    }
    // rank_key: NaN -> 0xFFFFFFFF; -0 -> +0; otherwise ~(u ^ (sign(u) ? ~0 : 0x80000000)).
    const __m256 x = _mm256_loadu_ps(scores + i);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q), zero = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ);
    __m256i u = _mm256_andnot_si256(_mm256_castps_si256(zero), _mm256_castps_si256(x));
    const __m256i asc = _mm256_xor_si256(u, _mm256_or_si256(_mm256_srai_epi32(u, 31), sign));
    const __m256i key = _mm256_or_si256(_mm256_xor_si256(asc, _mm256_set1_epi32(-1)), _mm256_castps_si256(nan));
    // key < thr, unsigned: flip the sign bits and compare signed.
    const __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(thr ^ 0x80000000u)), _mm256_xor_si256(key, sign));
    unsigned mask = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(lt)));
    while (mask) {
      const int j = __builtin_ctz(mask);
      mask &= mask - 1;
      take(i + j);  // rechecks against a threshold a compaction in this step may have lowered
    }
  }
#endif
  for (; i < n; ++i) take(i);
  if (int64_t(words.size()) > k) std::nth_element(words.begin(), words.begin() + (k - 1), words.end());
  std::sort(words.begin(), words.begin() + k);
  for (int64_t j = 0; j < k; ++j) out[j] = int32_t(uint32_t(words[size_t(j)]));
  return k;
}
}  // namespace

int64_t topk_indices(const float* scores, int64_t n, int64_t k, int32_t* out) {
  k = std::clamp<int64_t>(k, 0, n);
  if (k == 0) return 0;
  if (k * 16 <= n) return topk_small(scores, n, k, out);
  thread_local std::vector<uint32_t> keys;
  thread_local std::vector<unsigned long long> words;
  keys.resize(size_t(n));
  // Pass 1: the keys and a histogram of their top 11 bits.
  std::array<int64_t, 2048> hist{};
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = rank_key(scores[i]);
    keys[size_t(i)] = u;
    ++hist[u >> 21];
  }
  // The bin holding the k-th ranked key: everything in lower bins is kept.
  uint32_t bin = 0;
  int64_t before = 0;
  while (before + hist[bin] < k) before += hist[bin++];
  // Scores of similar magnitude share their top 11 bits (sign, exponent, 2 mantissa bits), so that bin
  // can hold most of the n: when it is large, a second histogram over its next 11 bits narrows it.
  uint32_t prefix_bits = 11, prefix = bin;
  if (hist[bin] > 4 * k + 1024) {
    std::array<int64_t, 2048> h2{};
    for (int64_t i = 0; i < n; ++i)
      if ((keys[size_t(i)] >> 21) == bin) ++h2[(keys[size_t(i)] >> 10) & 2047u];
    uint32_t b2 = 0;
    while (before + h2[b2] < k) before += h2[b2++];
    prefix_bits = 22;
    prefix = (bin << 11) | b2;
  }
  // Pass 2: the words of every key whose prefix is at most the k-th's; the k smallest of them are the
  // answer (in order: the rank word is the reference's).
  words.clear();
  const uint32_t shift = 32 - prefix_bits;
  for (int64_t i = 0; i < n; ++i)
    if ((keys[size_t(i)] >> shift) <= prefix)
      words.push_back((static_cast<unsigned long long>(keys[size_t(i)]) << 32) | uint32_t(int32_t(i)));
  if (int64_t(words.size()) > k) std::nth_element(words.begin(), words.begin() + (k - 1), words.end());
  std::sort(words.begin(), words.begin() + k);
  for (int64_t i = 0; i < k; ++i) out[i] = int32_t(uint32_t(words[size_t(i)]));
  return k;
}

std::vector<int32_t> topk(const float* scores, int64_t n, int64_t k) {
  std::vector<int32_t> out(size_t(std::clamp<int64_t>(k, 0, n)));
  topk_indices(scores, n, k, out.data());
  return out;
}

}  // namespace kvsim::host
