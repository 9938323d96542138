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

#if defined(__AVX2__)
// rank_key of scores[0, 8): NaN -> 0xFFFFFFFF; -0 -> +0; otherwise ~(u ^ (sign(u) ? ~0 : 0x80000000)).
inline __m256i keys8(const float* scores) {
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  const __m256 x = _mm256_loadu_ps(scores);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q), zero = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ);
  const __m256i u = _mm256_andnot_si256(_mm256_castps_si256(zero), _mm256_castps_si256(x));
  const __m256i asc = _mm256_xor_si256(u, _mm256_or_si256(_mm256_srai_epi32(u, 31), sign));
  return _mm256_or_si256(_mm256_xor_si256(asc, _mm256_set1_epi32(-1)), _mm256_castps_si256(nan));
}

// For each 8-bit mask, the lanes of its set bits in ascending order, then padding: permuting a vector
// by it packs the lanes a mask selects to the front, in order.
const __m256i* compress_lanes() {
  static const auto table = [] {
    std::array<std::array<int32_t, 8>, 256> t{};
    for (int m = 0; m < 256; ++m) {
      int w = 0;
      for (int j = 0; j < 8; ++j)
        if (m >> j & 1) t[size_t(m)][size_t(w++)] = j;
      for (; w < 8; ++w) t[size_t(m)][size_t(w)] = 0;
    }
    return t;
  }();
  static_assert(sizeof(table) == 256 * sizeof(__m256i));
  return reinterpret_cast<const __m256i*>(table.data());
}
#endif

// Above this k the threshold pass's final comparison sort of the k kept words costs more than the
// radix path's two passes over the scores and linear sort.
constexpr int64_t kSmallMaxK = 2048;

// Small k (k·16 <= n, k <= kSmallMaxK): one pass with a shrinking threshold. Candidates' rank words are buffered; when
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
    const __m256i key = keys8(scores + i);
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
  // The threshold pass wins while k is small enough that sorting the kept k costs little; above that
  // the radix path below, whose sort of the kept k is linear, is the faster one.
  if (k * 16 <= n && k <= kSmallMaxK) return topk_small(scores, n, k, out);
  // Pass 1: a histogram of the keys' top 11 bits (keys are recomputed in pass 2 rather than stored:
  // that reads the scores again instead of writing and reading n keys).
  std::array<uint32_t, 4 * 2048> h4{};  // 4 interleaved copies: runs of equal bins do not serialize
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    alignas(32) uint32_t kk[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(kk), _mm256_srli_epi32(keys8(scores + i), 21));
    for (int j = 0; j < 8; ++j) ++h4[size_t(j & 3) * 2048 + kk[j]];
  }
#endif
  for (; i < n; ++i) ++h4[rank_key(scores[i]) >> 21];
  // The bin holding the k-th ranked key: every key in a lower bin is kept, and so are the first
  // k - before of the bin's.
  uint32_t bin = 0;
  int64_t before = 0;
  auto count = [&](uint32_t b) { return int64_t(h4[b]) + h4[2048 + b] + h4[4096 + b] + h4[6144 + b]; };
  while (before + count(bin) < k) before += count(bin++);
  // Pass 2: the candidates (key < (bin + 1) << 21), in index order.
  thread_local std::vector<uint32_t> ck, ci, tk, ti;
  const int64_t cap = before + count(bin);
  ck.resize(size_t(cap) + 8);  // + 8: the packed stores write a full vector past the last candidate
  ci.resize(size_t(cap) + 8);
  const uint64_t lim = uint64_t(bin + 1) << 21;  // candidates: key < lim (2^32 when bin is the last)
  int64_t c = 0;
  i = 0;
#if defined(__AVX2__)
  if (lim <= 0xFFFFFFFFu) {
    const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
    const __m256i lim_s = _mm256_set1_epi32(int(uint32_t(lim) ^ 0x80000000u));
    const __m256i* lanes = compress_lanes();
    for (; i + 8 <= n; i += 8) {
      // Branch-free: the 8 keys and indices are packed (candidates first) and all 8 stored; c advances
      // by the candidates' count. A branch per 8 scores mispredicts when ~1/8 of them are candidates.
      const __m256i key = keys8(scores + i);
      const unsigned mask = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(lim_s, _mm256_xor_si256(key, sign)))));
      const __m256i perm = _mm256_loadu_si256(lanes + mask);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ck.data() + c), _mm256_permutevar8x32_epi32(key, perm));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ci.data() + c), _mm256_add_epi32(_mm256_set1_epi32(int(i)), perm));
      c += __builtin_popcount(mask);
    }
  }
#endif
  for (; i < n; ++i) {
    const uint32_t key = rank_key(scores[i]);
    if (key < lim) {
      ck[size_t(c)] = key;
      ci[size_t(c++)] = uint32_t(i);
    }
  }
  // When the k-th's bin is large (scores of one magnitude), narrow it by the next 11 bits, among the
  // candidates only.
  if (c > 2 * k + 4096) {
    std::array<int64_t, 2048> h2{};
    for (int64_t j = 0; j < c; ++j)
      if ((ck[size_t(j)] >> 21) == bin) ++h2[(ck[size_t(j)] >> 10) & 2047u];
    uint32_t b2 = 0;
    while (before + h2[b2] < k) before += h2[b2++];
    const uint32_t prefix = (bin << 11) | b2;
    int64_t w = 0;
    for (int64_t j = 0; j < c; ++j)
      if ((ck[size_t(j)] >> 10) <= prefix) {
        ck[size_t(w)] = ck[size_t(j)];
        ci[size_t(w++)] = ci[size_t(j)];
      }
    c = w;
  }
  // The candidates are in index order, so a stable sort by key alone puts them in the reference's
  // order (key, then index): an LSD radix sort, 3 digits of 11 bits, each skipped when one bucket holds
  // every candidate.
  tk.resize(size_t(c));
  ti.resize(size_t(c));
  std::array<uint32_t, 3 * 2048> dh{};
  for (int64_t j = 0; j < c; ++j) {
    const uint32_t key = ck[size_t(j)];
    ++dh[key & 2047u];
    ++dh[2048 + ((key >> 11) & 2047u)];
    ++dh[4096 + (key >> 22)];
  }
  uint32_t *sk = ck.data(), *si = ci.data(), *dk = tk.data(), *di = ti.data();
  for (int pass = 0; pass < 3; ++pass) {
    uint32_t* h = dh.data() + pass * 2048;
    const int shift = 11 * pass;
    const uint32_t first = sk[0];
    if (h[(first >> shift) & 2047u] == uint32_t(c)) continue;  // one bucket: already in order by this digit
    uint32_t sum = 0;
    for (int b = 0; b < 2048; ++b) {
      const uint32_t t = h[b];
      h[b] = sum;
      sum += t;
    }
    for (int64_t j = 0; j < c; ++j) {
      const uint32_t key = sk[j], pos = h[(key >> shift) & 2047u]++;
      dk[pos] = key;
      di[pos] = si[j];
    }
    std::swap(sk, dk);
    std::swap(si, di);
  }
  for (int64_t j = 0; j < k; ++j) out[j] = int32_t(si[j]);
  return k;
}

std::vector<int32_t> topk(const float* scores, int64_t n, int64_t k) {
  std::vector<int32_t> out(size_t(std::clamp<int64_t>(k, 0, n)));
  topk_indices(scores, n, k, out.data());
  return out;
}

}  // namespace kvsim::host
