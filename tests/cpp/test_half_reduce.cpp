// float16/bfloat16 combine in float32 and round once per ring step: checked
// against a float64 reference within the documented bound,
// (n-1) * u * sum|x_i| for a SUM over n ranks (u = 2^-11 float16, 2^-8 bfloat16).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/math/half_conversion.h"
#include "core/math/host_loops.h"
#include "core/math/host_reduce.h"

using namespace ringreduce;

namespace {

double unitRoundoff(bool half) { return half ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }
double widen(bool half, uint16_t v) { return half ? halfToFloat(v) : bfloat16ToFloat(v); }
uint16_t narrow(bool half, float v) { return half ? floatToHalf(v) : floatToBFloat16(v); }

// n ranks' inputs, already representable in the 16-bit type.
std::vector<std::vector<uint16_t>> inputs(bool half, int n, size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<std::vector<uint16_t>> all(static_cast<size_t>(n), std::vector<uint16_t>(count));
  for (auto& rank : all)
    for (auto& v : rank) v = narrow(half, dist(gen));
  return all;
}

}  // namespace

TEST(HalfReduce, SumAndAverageStayWithinThePerStepBound) {
  const size_t count = 5003;  // more than one block, odd tail
  for (bool half : {true, false}) {
    for (int n : {2, 3, 5, 8}) {
      const auto in = inputs(half, n, count, 11u * n + half);
      std::vector<uint16_t> sum = in[0], avg = in[0];
      for (int r = 1; r < n; ++r) {
        reduceInto(half ? DataType::Float16 : DataType::BFloat16, ReduceOp::Sum, sum.data(),
                   in[r].data(), count);
        if (r < n - 1) {
          reduceInto(half ? DataType::Float16 : DataType::BFloat16, ReduceOp::Avg, avg.data(),
                     in[r].data(), count);
        } else {
          reduceAndAverage(half ? DataType::Float16 : DataType::BFloat16, avg.data(),
                           in[r].data(), count, n);
        }
      }
      for (size_t i = 0; i < count; ++i) {
        double exact = 0, magnitude = 0;
        for (int r = 0; r < n; ++r) {
          exact += widen(half, in[r][i]);
          magnitude += std::fabs(widen(half, in[r][i]));
        }
        const double bound = (n - 1) * unitRoundoff(half) * magnitude * (1 + 1e-6);
        ASSERT_LE(std::fabs(widen(half, sum[i]) - exact), bound) << half << " n=" << n << " " << i;
        // AVG: the same partial sums, divided before the last rounding, which
        // adds at most half a unit of the result.
        const double avgBound = bound / n + unitRoundoff(half) * std::fabs(exact / n);
        ASSERT_LE(std::fabs(widen(half, avg[i]) - exact / n), avgBound)
            << half << " n=" << n << " " << i;
      }
    }
  }
}

TEST(HalfReduce, MinMaxAreExactAndPropagateNan) {
  for (bool half : {true, false}) {
    const auto in = inputs(half, 2, 999, 7);
    std::vector<uint16_t> mx = in[0], mn = in[0];
    mx[5] = narrow(half, std::nanf(""));
    const DataType type = half ? DataType::Float16 : DataType::BFloat16;
    reduceInto(type, ReduceOp::Max, mx.data(), in[1].data(), mx.size());
    reduceInto(type, ReduceOp::Min, mn.data(), in[1].data(), mn.size());
    for (size_t i = 0; i < mx.size(); ++i) {
      const double a = widen(half, in[0][i]), b = widen(half, in[1][i]);
      if (i == 5) {
        ASSERT_TRUE(std::isnan(widen(half, mx[i])));
      } else {
        ASSERT_EQ(widen(half, mx[i]), std::max(a, b)) << i;
      }
      ASSERT_EQ(widen(half, mn[i]), std::min(a, b)) << i;
    }
  }
}
