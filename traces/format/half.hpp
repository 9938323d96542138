// IEEE fp16 (binary16) and bfloat16 conversions to and from float. Round to nearest even; NaN stays
// NaN, overflow becomes infinity. Traces store keys/queries/values in either, and every reader works
// in float.
#pragma once
#include <bit>
#include <cstdint>

namespace kvsim {

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN: keep it quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
  return uint16_t(u >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf or NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
  } else if (man == 0) {
    u = sign;  // signed zero
  } else {     // subnormal: normalize
    int e = -1;
    do { man <<= 1; ++e; } while ((man & 0x400u) == 0);
    u = sign | (uint32_t(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(u);
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // rounds to >= 65520: infinity
  if (a < 0x38800000u) {                                  // below the smallest normal (2^-14): subnormal or zero
    if (a < 0x33000000u) return sign;                     // below half the smallest subnormal (2^-25): zero
    const uint32_t man = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(a >> 23);                 // 14..24
    const uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    return uint16_t(sign | (q + ((rem > half || (rem == half && (q & 1u))) ? 1 : 0)));
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // round to nearest even at bit 13
  return uint16_t(sign | ((r - 0x38000000u) >> 13));
}

}  // namespace kvsim
