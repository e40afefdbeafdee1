// float16 / bfloat16 <-> float32 conversions against every value (core/math/half_conversion.h)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/math/half_conversion.h"

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

namespace {
uint32_t bitsOfFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
float floatOfBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
}  // namespace

// The buffer forms run eight values per instruction where the CPU allows;
// they must give the scalar forms' bits for every value (a NaN: a NaN of the
// same sign), at every length (the tails run scalar).
TEST(HalfConversion, BufferWidenMatchesScalarForEvery16BitPattern) {
  std::vector<uint16_t> all(65536 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (bool half : {true, false}) {
    std::vector<float> wide(all.size());
    halfBufferToFloat(half, all.data(), wide.data(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const float expected = half ? halfToFloat(all[i]) : bfloat16ToFloat(all[i]);
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(wide[i])) << half << " " << i;
        ASSERT_EQ(std::signbit(wide[i]), std::signbit(expected)) << half << " " << i;
      } else {
        ASSERT_EQ(bitsOfFloat(wide[i]), bitsOfFloat(expected)) << half << " " << i;
      }
    }
  }
}

TEST(HalfConversion, BufferNarrowMatchesScalarAcrossRoundingBoundaries) {
  // Every float32 whose low 13 (fp16) or 16 (bf16) bits sit at a rounding
  // tie or next to one, over all exponents, plus specials.
  std::vector<float> values;
  for (uint32_t high = 0; high < (1u << 16); high += 3) {
    for (uint32_t low : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      values.push_back(floatOfBits((high << 16) | low));
    }
  }
  for (float special : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, -1e-8f, 6e-8f,
                        std::numeric_limits<float>::infinity(), std::nanf(""), -std::nanf("")}) {
    values.push_back(special);
  }
  for (size_t length : {values.size(), size_t{7}, size_t{9}, size_t{1}}) {
    for (bool half : {true, false}) {
      std::vector<uint16_t> narrow(length);
      floatBufferToHalf(half, values.data(), narrow.data(), length);
      for (size_t i = 0; i < length; ++i) {
        const uint16_t expected = half ? floatToHalf(values[i]) : floatToBFloat16(values[i]);
        const float back = half ? halfToFloat(narrow[i]) : bfloat16ToFloat(narrow[i]);
        if (std::isnan(values[i])) {
          ASSERT_TRUE(std::isnan(back)) << half << " " << i;
          ASSERT_EQ(std::signbit(back), std::signbit(values[i])) << half << " " << i;
        } else {
          ASSERT_EQ(narrow[i], expected) << half << " value " << values[i] << " bits "
                                         << bitsOfFloat(values[i]);
        }
      }
    }
  }
}
