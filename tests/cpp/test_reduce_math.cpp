// The device kernels' element math (cuda/kernels/reduce_element.cuh on top of
// core/math/element_math.h), instantiated on the host: it must give what the host
// loops give (core/math/host_reduce.cpp), so CPU and GPU tensors reduce alike.
// Runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/math/half_conversion.h"
#include "core/math/host_reduce.h"
#include "cuda/kernels/reduce_element.cuh"

using namespace ringreduce;
using namespace ringreduce::cuda;

namespace {

template <typename T, typename Op>
std::vector<T> deviceMath(const std::vector<std::vector<T>>& inputs, int avgDivisor) {
  std::vector<const T*> srcs;
  for (const auto& in : inputs) srcs.push_back(in.data());
  std::vector<T> out(inputs[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = reduceElement<T, T, Op>(srcs.data(), static_cast<int>(srcs.size()), i, avgDivisor);
  }
  return out;
}

template <typename T>
std::vector<T> hostLoops(const std::vector<std::vector<T>>& inputs, DataType type, ReduceOp op) {
  std::vector<T> acc = inputs[0];
  for (size_t s = 1; s < inputs.size(); ++s) {
    reduceInto(type, op, acc.data(), inputs[s].data(), acc.size());
  }
  if (op == ReduceOp::Avg) finishAverage(type, acc.data(), acc.size(), static_cast<int>(inputs.size()));
  return acc;
}

template <typename T>
std::vector<std::vector<T>> randomInputs(int n, size_t count, uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::vector<T>> inputs(n, std::vector<T>(count));
  for (auto& in : inputs) {
    for (auto& x : in) {
      if constexpr (std::is_floating_point_v<T>) {
        x = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(gen));
      } else {
        x = static_cast<T>(gen());  // full range: exercises wrapping
      }
    }
  }
  return inputs;
}

template <typename T>
void expectSameAsHost(DataType type) {
  for (int n = 1; n <= 8; ++n) {
    const auto inputs = randomInputs<T>(n, 257, 11u * n);
    const std::vector<std::pair<ReduceOp, std::vector<T>>> cases = {
        {ReduceOp::Sum, deviceMath<T, SumOp>(inputs, 0)},
        {ReduceOp::Avg, deviceMath<T, SumOp>(inputs, n)},
        {ReduceOp::Product, deviceMath<T, ProductOp>(inputs, 0)},
        {ReduceOp::Min, deviceMath<T, MinOp>(inputs, 0)},
        {ReduceOp::Max, deviceMath<T, MaxOp>(inputs, 0)},
    };
    for (const auto& [op, got] : cases) {
      const auto want = hostLoops(inputs, type, op);
      for (size_t i = 0; i < got.size(); ++i) {
        if constexpr (std::is_floating_point_v<T>) {
          // Same order of operations as the host loop: bit-identical.
          ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
              << dataTypeName(type) << " " << reduceOpName(op) << " n=" << n << " i=" << i;
        } else {
          ASSERT_EQ(got[i], want[i])
              << dataTypeName(type) << " " << reduceOpName(op) << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

}  // namespace

TEST(ReduceMath, MatchesHostLoopsForEveryRealType) {
  expectSameAsHost<float>(DataType::Float32);
  expectSameAsHost<double>(DataType::Float64);
  expectSameAsHost<int8_t>(DataType::Int8);
  expectSameAsHost<uint8_t>(DataType::UInt8);
  expectSameAsHost<int16_t>(DataType::Int16);
  expectSameAsHost<int32_t>(DataType::Int32);
  expectSameAsHost<int64_t>(DataType::Int64);
}

TEST(ReduceMath, BitwiseOpsOnIntegers) {
  const std::vector<std::vector<int32_t>> in = {{0b1100, -1}, {0b1010, 5}};
  EXPECT_EQ((deviceMath<int32_t, BAndOp>(in, 0)), (std::vector<int32_t>{0b1000, 5}));
  EXPECT_EQ((deviceMath<int32_t, BOrOp>(in, 0)), (std::vector<int32_t>{0b1110, -1}));
  EXPECT_EQ((deviceMath<int32_t, BXorOp>(in, 0)), (std::vector<int32_t>{0b0110, -6}));
}

TEST(ReduceMath, SignedIntegersWrapAndAverageTruncatesTowardZero) {
  const std::vector<std::vector<int8_t>> in = {{127, -7}, {1, 0}};
  const auto sum = deviceMath<int8_t, SumOp>(in, 0);
  EXPECT_EQ(sum[0], -128);
  const auto avg = deviceMath<int8_t, SumOp>(in, 2);
  EXPECT_EQ(avg[1], -3);  // -7 / 2 truncates toward zero, as NCCL and the host path do
}

TEST(ReduceMath, MinAndMaxPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> in = {{1.f, nan}, {nan, 2.f}};
  for (float v : deviceMath<float, MinOp>(in, 0)) EXPECT_TRUE(std::isnan(v));
  for (float v : deviceMath<float, MaxOp>(in, 0)) EXPECT_TRUE(std::isnan(v));
}

// float16/bfloat16 accumulate in float32 and round once: 2048 + 1 + 1 is
// 2050 that way, but 2048 with a rounding after each addition (float16 has
// 11 significant bits, so 2049 rounds to 2048).
TEST(ReduceMath, HalfPrecisionAccumulatesInFloat32AndRoundsOnce) {
  const std::vector<std::vector<__half>> in = {
      {__float2half(2048.f)}, {__float2half(1.f)}, {__float2half(1.f)}};
  EXPECT_EQ(__half2float(deviceMath<__half, SumOp>(in, 0)[0]), 2050.f);
  const std::vector<std::vector<__nv_bfloat16>> b = {
      {__float2bfloat16(256.f)}, {__float2bfloat16(1.f)}, {__float2bfloat16(1.f)}};
  EXPECT_EQ(__bfloat162float(deviceMath<__nv_bfloat16, SumOp>(b, 0)[0]), 258.f);
  // AVG divides in float32 before the single rounding.
  const std::vector<std::vector<__half>> a = {{__float2half(1.f)}, {__float2half(2.f)}};
  EXPECT_EQ(__half2float(deviceMath<__half, SumOp>(a, 2)[0]), 1.5f);
}

// The device conversions round like the host's (core/math/half_conversion.h),
// which round like torch: a float32 tensor sent on a 16-bit wire and a
// float16 tensor reduced on the host get the same bits.
TEST(ReduceMath, WireCastsRoundLikeTheHostConversions) {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> dist(-70000.f, 70000.f);
  for (int i = 0; i < 100000; ++i) {
    const float f = i < 8 ? std::vector<float>{0.f, -0.f, 1e-8f, 65504.f, 65520.f, 1e30f,
                                               std::numeric_limits<float>::infinity(),
                                               3.14159f}[i]
                          : dist(gen);
    const float* src = &f;
    const __half h = reduceElement<float, __half, SumOp>(&src, 1, 0, 0);
    uint16_t hbits;
    std::memcpy(&hbits, &h, 2);
    ASSERT_EQ(hbits, floatToHalf(f)) << f;
    const __nv_bfloat16 b = reduceElement<float, __nv_bfloat16, SumOp>(&src, 1, 0, 0);
    uint16_t bbits;
    std::memcpy(&bbits, &b, 2);
    ASSERT_EQ(bbits, floatToBFloat16(f)) << f;
    // And back: the widening is exact.
    const __half* hs = &h;
    ASSERT_EQ((reduceElement<__half, float, SumOp>(&hs, 1, 0, 0)), halfToFloat(hbits));
  }
}
