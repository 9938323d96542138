#include "kernels/host/select.hpp"

#include <algorithm>
#include <array>

#include "kernels/reference/hd.hpp"

namespace kvsim::host {

namespace {
// The high word of hd::rank_word: smaller ranks first.
inline uint32_t rank_key(float f) { return uint32_t(ref::hd::rank_word(f, 0) >> 32); }
}  // namespace

int64_t topk_indices(const float* scores, int64_t n, int64_t k, int32_t* out) {
  k = std::clamp<int64_t>(k, 0, n);
  if (k == 0) return 0;
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
