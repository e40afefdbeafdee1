#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "core/half_conversion.h"

using namespace ringreduce;

TEST(HalfConversion, EveryFloat16RoundTripsExactly) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = halfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f)))) << bits;
      continue;
    }
    EXPECT_EQ(floatToHalf(f), h) << "bits 0x" << std::hex << bits;
  }
}

TEST(HalfConversion, Float16KnownValuesAndRounding) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  // 1 + 2^-11 lies exactly between two halves: ties go to even (1.0).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 ties between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(70000.0f), 0x7c00);    // overflow to +inf
  EXPECT_EQ(floatToHalf(-70000.0f), 0xfc00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -26)), 0x0000);  // below half the smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -26)), 0x0001);  // rounds up to the smallest subnormal
}

TEST(HalfConversion, EveryBFloat16RoundTripsExactly) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = bfloat16ToFloat(b);
    if (std::isnan(f)) continue;
    EXPECT_EQ(floatToBFloat16(f), b) << bits;
  }
}

TEST(HalfConversion, BFloat16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(floatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBFloat16(std::nanf("")))));
}

TEST(HalfConversion, BufferFormsMatchScalarForms) {
  const float values[] = {0.5f, -3.25f, 1e-6f, 1000.125f};
  uint16_t narrow[4];
  float wide[4];
  for (bool half : {true, false}) {
    floatBufferToHalf(half, values, narrow, 4);
    halfBufferToFloat(half, narrow, wide, 4);
    for (int i = 0; i < 4; ++i) {
      const uint16_t expected = half ? floatToHalf(values[i]) : floatToBFloat16(values[i]);
      EXPECT_EQ(narrow[i], expected);
      EXPECT_EQ(wide[i], half ? halfToFloat(expected) : bfloat16ToFloat(expected));
    }
  }
}
