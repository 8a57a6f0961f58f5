//===- HalfTest.cpp - Tests of the f16 and bf16 conversions ---------------===//
//
// Every 16-bit pattern is checked exhaustively: decoding is exact and
// encoding the decoded value gives the pattern back. Rounding is checked at
// the points where it is easy to get wrong (ties, overflow, the subnormal
// range) and, for f16, against an independent double-precision model of
// round-to-nearest-even on many random floats.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace attn;

namespace {

bool isHalfNaN(uint16_t bits) {
  return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu);
}

/// An independent model of binary16 round-to-nearest-even, in double
/// arithmetic: find the two neighbours and pick the nearer (even on a tie).
double modelHalfRound(double x) {
  double magnitude = std::fabs(x);
  if (magnitude >= 65520.0)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  // The spacing of halves at this magnitude: 2^(e-10), at least 2^-24.
  int exponent = magnitude > 0 ? std::ilogb(magnitude) : -24;
  double ulp = std::ldexp(1.0, std::max(exponent, -14) - 10);
  double lower = std::floor(magnitude / ulp) * ulp;
  double upper = lower + ulp;
  double rounded;
  if (magnitude - lower < upper - magnitude)
    rounded = lower;
  else if (magnitude - lower > upper - magnitude)
    rounded = upper;
  else
    rounded = std::fmod(lower / ulp, 2.0) == 0 ? lower : upper;
  return std::copysign(rounded, x);
}

TEST(Half, DecodesKnownValues) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(halfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(halfToFloat(0x7c00)));
  EXPECT_LT(halfToFloat(0xfc00), 0.0f);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));
}

TEST(Half, ExhaustiveRoundTrip) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float value = halfToFloat(h);
    if (isHalfNaN(h)) {
      ASSERT_TRUE(std::isnan(value)) << std::hex << bits;
      uint16_t back = floatToHalf(value);
      ASSERT_TRUE(isHalfNaN(back)) << std::hex << bits;
      // Sign and payload survive; only the quiet bit may be added.
      ASSERT_EQ(back & ~0x0200u, h & ~0x0200u) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(floatToHalf(value), h) << std::hex << bits;
    // Decoding is exact: the double model agrees bit for bit.
    ASSERT_EQ(static_cast<double>(value), modelHalfRound(value))
        << std::hex << bits;
  }
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above the tie rounds up.
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)),
            0x3c01);
  // A carry out of the mantissa bumps the exponent: 2 - 2^-12 rounds to 2.
  EXPECT_EQ(floatToHalf(2.0f - std::ldexp(1.0f, -12)), 0x4000);
  EXPECT_EQ(floatToHalf(-1.0f), 0xbc00);
}

TEST(Half, Overflow) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // the tie goes to even: inf
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(Half, Subnormals) {
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000); // tie to even zero
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002); // 1.5 ulp: tie, even
  EXPECT_EQ(floatToHalf(std::ldexp(5.0f, -25)), 0x0002); // 2.5 ulp: tie, even
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
}

TEST(Half, NaNsStayNaN) {
  EXPECT_TRUE(isHalfNaN(floatToHalf(std::numeric_limits<float>::quiet_NaN())));
  // A signalling NaN whose payload lives only in the low bits would become
  // an infinity if truncated.
  float lowPayload = bitsToFloat(0x7f800001u);
  EXPECT_TRUE(isHalfNaN(floatToHalf(lowPayload)));
  EXPECT_EQ(floatToHalf(bitsToFloat(0xff800001u)) & 0x8000u, 0x8000u);
}

TEST(Half, MatchesTheModelOnRandomFloats) {
  std::mt19937 rng(42);
  for (int n = 0; n < 2000000; ++n) {
    // Random bit patterns cover every exponent; keep the interesting range.
    float value = bitsToFloat(static_cast<uint32_t>(rng()));
    if (std::isnan(value))
      continue;
    double expected = modelHalfRound(value);
    float actual = halfToFloat(floatToHalf(value));
    ASSERT_EQ(static_cast<double>(actual), expected)
        << value << " bits " << std::hex << floatToBits(value);
    ASSERT_EQ(std::signbit(actual), std::signbit(value));
  }
}

//===----------------------------------------------------------------------===//
// bfloat16
//===----------------------------------------------------------------------===//

TEST(BF16, ExhaustiveRoundTrip) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    uint16_t b = static_cast<uint16_t>(bits);
    float value = bf16ToFloat(b);
    ASSERT_EQ(floatToBits(value), bits << 16);
    uint16_t back = floatToBF16(value);
    if (std::isnan(value)) {
      ASSERT_TRUE(std::isnan(bf16ToFloat(back))) << std::hex << bits;
      ASSERT_EQ(back & ~0x0040u, b & ~0x0040u) << std::hex << bits;
    } else {
      ASSERT_EQ(back, b) << std::hex << bits;
    }
  }
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(floatToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between odd 1 + 2^-7 and 1 + 2^-6: up.
  EXPECT_EQ(floatToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(floatToBF16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)),
            0x3f81);
  EXPECT_EQ(floatToBF16(-3.140625f), 0xc049);
  // Rounding up from the largest finite bf16 overflows to infinity.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBF16(bitsToFloat(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(floatToBF16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(floatToBF16(-0.0f), 0x8000);
  // Subnormals round like any other value.
  EXPECT_EQ(floatToBF16(bitsToFloat(0x00008000u)), 0x0000);
  EXPECT_EQ(floatToBF16(bitsToFloat(0x00018000u)), 0x0002);
}

TEST(BF16, NaNsStayNaN) {
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(bitsToFloat(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(bitsToFloat(0xffffffffu)))));
  EXPECT_EQ(floatToBF16(bitsToFloat(0xff800001u)) & 0x8000u, 0x8000u);
}

} // namespace
