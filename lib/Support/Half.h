//===- Half.h - Conversions between float and 16-bit float formats --------===//
//
// The tools and tests move f16 and bf16 tensors around as raw uint16_t bit
// patterns and convert them with these functions, so that nothing depends on
// a compiler's `_Float16` or `__bf16` support. Both directions follow IEEE
// 754: float -> 16 bit rounds to nearest, ties to even, overflows to
// infinity and keeps NaNs NaN (quieted, sign and leading payload bits kept);
// 16 bit -> float is exact.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SUPPORT_HALF_H
#define ATTN_SUPPORT_HALF_H

#include <cstdint>
#include <cstring>

namespace attn {

inline uint32_t floatToBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

//===----------------------------------------------------------------------===//
// bfloat16: the upper half of a float
//===----------------------------------------------------------------------===//

inline uint16_t floatToBF16(float value) {
  uint32_t bits = floatToBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // Truncating could clear every payload bit and turn the NaN into an
    // infinity; setting the quiet bit keeps it a NaN.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
  // a carry out of the mantissa correctly bumps the exponent (up to inf).
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

//===----------------------------------------------------------------------===//
// IEEE binary16
//===----------------------------------------------------------------------===//

inline uint16_t floatToHalf(float value) {
  uint32_t bits = floatToBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude >= 0x7f800000u) {
    if (magnitude == 0x7f800000u)
      return sign | 0x7c00u;
    // NaN: keep the top payload bits and force the quiet bit so that a
    // payload living only in the low bits still gives a NaN.
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504) and 2^16; ties go to
  // the even neighbour, which is infinity.
  if (magnitude >= 0x477ff000u)
    return sign | 0x7c00u;

  if (magnitude >= 0x38800000u) {
    // Normal half: rebias the exponent and round the 13 dropped bits. A
    // carry out of the mantissa moves into the exponent, as it should.
    uint32_t half =
        ((magnitude >> 23) - 112u) << 10 | ((magnitude >> 13) & 0x3ffu);
    uint32_t dropped = magnitude & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }

  // Subnormal half (or zero): the value is mantissa * 2^-24. Below 2^-25 it
  // rounds to zero (2^-25 itself is a tie that goes to the even zero).
  if (magnitude < 0x33000000u)
    return sign;
  uint32_t exponent = magnitude >> 23;
  uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - exponent; // in [14, 24]
  uint32_t half = mantissa >> shift;
  uint32_t dropped = mantissa & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1u);
  if (dropped > halfway || (dropped == halfway && (half & 1u)))
    ++half; // may carry into the smallest normal, which is the right answer
  return static_cast<uint16_t>(sign | half);
}

inline float halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;

  if (exponent == 0x1fu) // inf or NaN, payload kept
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0)
    return bitsToFloat(sign);
  // Subnormal half: normalize so that the leading one becomes implicit.
  uint32_t floatExponent = 113u; // the exponent of 2^-14, biased for float
  while (!(mantissa & 0x400u)) {
    mantissa <<= 1;
    --floatExponent;
  }
  return bitsToFloat(sign | (floatExponent << 23) |
                     ((mantissa & 0x3ffu) << 13));
}

} // namespace attn

#endif // ATTN_SUPPORT_HALF_H
