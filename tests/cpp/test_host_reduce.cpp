// The host reduction loops: every operator and type, NaN and overflow as torch has them
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <limits>
#include <vector>

#include "core/base/errors.h"
#include "core/math/half_conversion.h"
#include "core/math/host_reduce.h"

using namespace ringreduce;

TEST(HostReduce, FloatOperators) {
  std::vector<float> a{1, -2, 3.5f, 0};
  const std::vector<float> b{4, 5, -1, 0.25f};
  auto run = [&](ReduceOp op) {
    std::vector<float> d = a;
    reduceInto(DataType::Float32, op, d.data(), b.data(), d.size());
    return d;
  };
  EXPECT_EQ(run(ReduceOp::Sum), (std::vector<float>{5, 3, 2.5f, 0.25f}));
  EXPECT_EQ(run(ReduceOp::Product), (std::vector<float>{4, -10, -3.5f, 0}));
  EXPECT_EQ(run(ReduceOp::Min), (std::vector<float>{1, -2, -1, 0}));
  EXPECT_EQ(run(ReduceOp::Max), (std::vector<float>{4, 5, 3.5f, 0.25f}));
}

TEST(HostReduce, MinMaxPropagateNaNLikeTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> d{nan, 1.0f};
  const std::vector<float> s{1.0f, nan};
  reduceInto(DataType::Float32, ReduceOp::Min, d.data(), s.data(), 2);
  EXPECT_TRUE(std::isnan(d[0]));
  EXPECT_TRUE(std::isnan(d[1]));
}

TEST(HostReduce, SignedIntegersWrapAroundLikeTorch) {
  std::vector<int8_t> d{127, -128, 100};
  const std::vector<int8_t> s{1, -1, 100};
  reduceInto(DataType::Int8, ReduceOp::Sum, d.data(), s.data(), 3);
  EXPECT_EQ(d, (std::vector<int8_t>{-128, 127, -56}));
  std::vector<int64_t> big{std::numeric_limits<int64_t>::max()};
  const std::vector<int64_t> two{2};
  reduceInto(DataType::Int64, ReduceOp::Product, big.data(), two.data(), 1);
  EXPECT_EQ(big[0], -2);
}

TEST(HostReduce, BitwiseOperatorsOnIntegers) {
  std::vector<int32_t> d{0b1100, 0b1010};
  const std::vector<int32_t> s{0b1010, 0b0110};
  auto dd = d;
  reduceInto(DataType::Int32, ReduceOp::BAnd, dd.data(), s.data(), 2);
  EXPECT_EQ(dd, (std::vector<int32_t>{0b1000, 0b0010}));
  dd = d;
  reduceInto(DataType::Int32, ReduceOp::BOr, dd.data(), s.data(), 2);
  EXPECT_EQ(dd, (std::vector<int32_t>{0b1110, 0b1110}));
  dd = d;
  reduceInto(DataType::Int32, ReduceOp::BXor, dd.data(), s.data(), 2);
  EXPECT_EQ(dd, (std::vector<int32_t>{0b0110, 0b1100}));
}

TEST(HostReduce, BoolIsLogical) {
  const std::vector<uint8_t> a{0, 0, 1, 1};
  const std::vector<uint8_t> b{0, 1, 0, 1};
  auto run = [&](ReduceOp op) {
    std::vector<uint8_t> d = a;
    reduceInto(DataType::Bool, op, d.data(), b.data(), 4);
    return d;
  };
  EXPECT_EQ(run(ReduceOp::Sum), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(run(ReduceOp::Max), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(run(ReduceOp::Product), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(run(ReduceOp::Min), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(run(ReduceOp::BXor), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_THROW(run(ReduceOp::Avg), InvalidArgument);
}

TEST(HostReduce, ComplexSumAndAverage) {
  std::vector<std::complex<double>> d{{1, 2}, {-3, 0.5}};
  const std::vector<std::complex<double>> s{{0.5, -1}, {3, 1.5}};
  reduceInto(DataType::Complex128, ReduceOp::Sum, d.data(), s.data(), 2);
  EXPECT_EQ(d[0], std::complex<double>(1.5, 1));
  EXPECT_EQ(d[1], std::complex<double>(0, 2));
  finishAverage(DataType::Complex128, d.data(), 2, 2);
  EXPECT_EQ(d[0], std::complex<double>(0.75, 0.5));
  EXPECT_THROW(reduceInto(DataType::Complex64, ReduceOp::Max, d.data(), s.data(), 1),
               InvalidArgument);
}

TEST(HostReduce, IntegerAverageTruncatesTowardZero) {
  std::vector<int32_t> d{7, -7, 6};
  finishAverage(DataType::Int32, d.data(), 3, 2);
  EXPECT_EQ(d, (std::vector<int32_t>{3, -3, 3}));
}

// The integer average divides through a float type; it must equal C++'s
// truncating division for every value of the small types and for the
// extremes and a spread of 32-bit values, with every divisor a group of up
// to 1024 ranks can have.
template <typename T>
void expectSameAsIntegerDivision(DataType type, const std::vector<T>& values) {
  std::vector<int> divisors;
  for (int divisor = 1; divisor <= 1024; divisor = divisor < 16 ? divisor + 1 : divisor * 2 + 1) {
    divisors.push_back(divisor);
  }
  for (int power = 32; power <= 1024; power *= 2) divisors.push_back(power);  // shifted, not divided
  for (int divisor : divisors) {
    std::vector<T> d = values;
    finishAverage(type, d.data(), d.size(), divisor);
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(d[i], static_cast<T>(static_cast<int64_t>(values[i]) / divisor))
          << dataTypeName(type) << " " << +values[i] << " / " << divisor;
    }
  }
}

template <typename T>
std::vector<T> everyValue() {
  std::vector<T> values;
  for (int64_t v = std::numeric_limits<T>::min(); v <= std::numeric_limits<T>::max(); ++v) {
    values.push_back(static_cast<T>(v));
  }
  return values;
}

TEST(HostReduce, IntegerAverageEqualsTruncatingDivision) {
  expectSameAsIntegerDivision(DataType::Int8, everyValue<int8_t>());
  expectSameAsIntegerDivision(DataType::UInt8, everyValue<uint8_t>());
  expectSameAsIntegerDivision(DataType::Int16, everyValue<int16_t>());
  std::vector<int32_t> wide{std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::min() + 1,
                            std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::max() - 1, 0, 1, -1};
  uint32_t x = 12345;
  for (int i = 0; i < 20000; ++i) {
    x = x * 1664525u + 1013904223u;  // a fixed spread over the whole range
    wide.push_back(static_cast<int32_t>(x));
    wide.push_back(static_cast<int32_t>(x >> (i % 31)));
  }
  expectSameAsIntegerDivision(DataType::Int32, wide);
  expectSameAsIntegerDivision(DataType::Int64,
                              std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                   std::numeric_limits<int64_t>::max(), -7, 7});
}

// By a power of two the float average multiplies by the exact reciprocal:
// the same bits as the division, subnormal quotients, infinities and NaN
// included.
template <typename T>
void expectScalingEqualsDivision(DataType type) {
  uint64_t x = 99;
  std::vector<T> values{0, -0.0, INFINITY, -INFINITY, std::numeric_limits<T>::denorm_min(),
                        std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
  for (int i = 0; i < 5000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int exponent = static_cast<int>(x >> 54) % (std::numeric_limits<T>::max_exponent * 2) -
                         std::numeric_limits<T>::max_exponent - 20;
    values.push_back(std::ldexp(static_cast<T>(static_cast<int32_t>(x >> 20)) / T(1 << 30),
                                exponent));
  }
  for (int divisor : {2, 4, 8, 64, 1024}) {
    std::vector<T> d = values;
    finishAverage(type, d.data(), d.size(), divisor);
    for (size_t i = 0; i < values.size(); ++i) {
      volatile T quotient = values[i] / static_cast<T>(divisor);
      const T want = quotient;
      ASSERT_EQ(std::memcmp(&d[i], &want, sizeof(T)), 0)
          << dataTypeName(type) << " " << values[i] << " / " << divisor;
    }
  }
}

TEST(HostReduce, FloatAverageByAPowerOfTwoEqualsTheDivision) {
  expectScalingEqualsDivision<float>(DataType::Float32);
  expectScalingEqualsDivision<double>(DataType::Float64);
}

// AVG's last step reads the data once; it must give the bits of the
// two-pass form (sum, then divide) for every type it fuses.
template <typename T>
void expectFusedAverageMatchesTwoPasses(DataType type) {
  uint32_t x = 777;
  auto next = [&x] { return x = x * 1664525u + 1013904223u; };
  for (int divisor : {2, 3, 4, 7, 1024}) {
    std::vector<T> a(1003), b(1003);
    for (size_t i = 0; i < a.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        a[i] = static_cast<T>(static_cast<int32_t>(next()) / 65536.0);
        b[i] = static_cast<T>(static_cast<int32_t>(next()) / 3.0);
      } else {
        a[i] = static_cast<T>(next());  // wraps when summed, as torch's do
        b[i] = static_cast<T>(next());
      }
    }
    std::vector<T> fused = a, twoPass = a;
    reduceAndAverage(type, fused.data(), b.data(), a.size(), divisor);
    reduceInto(type, ReduceOp::Sum, twoPass.data(), b.data(), a.size());
    finishAverage(type, twoPass.data(), a.size(), divisor);
    ASSERT_EQ(std::memcmp(fused.data(), twoPass.data(), a.size() * sizeof(T)), 0)
        << dataTypeName(type) << " / " << divisor;
  }
}

TEST(HostReduce, FusedAverageGivesTheBitsOfSumThenDivide) {
  expectFusedAverageMatchesTwoPasses<float>(DataType::Float32);
  expectFusedAverageMatchesTwoPasses<double>(DataType::Float64);
  expectFusedAverageMatchesTwoPasses<int8_t>(DataType::Int8);
  expectFusedAverageMatchesTwoPasses<uint8_t>(DataType::UInt8);
  expectFusedAverageMatchesTwoPasses<int16_t>(DataType::Int16);
  expectFusedAverageMatchesTwoPasses<int32_t>(DataType::Int32);
  expectFusedAverageMatchesTwoPasses<int64_t>(DataType::Int64);
}

TEST(HostReduce, UnsupportedPairsExplainThemselves) {
  EXPECT_NE(unsupportedReason(DataType::Float32, ReduceOp::BAnd).find("bitwise"),
            std::string::npos);
  EXPECT_NE(unsupportedReason(DataType::Complex64, ReduceOp::Min).find("complex64"),
            std::string::npos);
  EXPECT_EQ(unsupportedReason(DataType::Int8, ReduceOp::BXor), "");
  float x = 1, y = 2;
  EXPECT_THROW(reduceInto(DataType::Float32, ReduceOp::BOr, &x, &y, 1), InvalidArgument);
  // 16-bit floats reduce in place (core/math/host_loops.h), bitwise ops refused.
  uint16_t a = floatToHalf(1.0f), b = floatToHalf(2.0f);
  reduceInto(DataType::Float16, ReduceOp::Sum, &a, &b, 1);
  EXPECT_EQ(halfToFloat(a), 3.0f);
  EXPECT_THROW(reduceInto(DataType::Float16, ReduceOp::BOr, &a, &b, 1), InvalidArgument);
}
