// The host loops are compiled once per instruction set (core/math/host_loops.h)
// and must give the same bits on every one: each set this CPU runs is
// checked against the baseline set (itself checked against float64 and
// integer references in test_host_reduce.cpp and test_half_reduce.cpp), for
// every dtype x op, on random bit patterns (NaN, infinities, signed zeros,
// subnormals, wrapping integers), lengths around the vector widths and views
// one element off alignment.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/base/data_type.h"
#include "core/math/half_conversion.h"
#include "core/math/host_loops.h"
#include "core/base/reduce_op.h"
#include "exact_inputs.h"

using namespace ringreduce;
using ringreduce::testing::kOps;
using ringreduce::testing::kTypes;

namespace {

constexpr size_t kLengths[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 1000, 4099};

// Random bytes, then for float types a sprinkling of special values: the
// interesting cases of rounding and NaN handling at every lane position.
std::vector<uint8_t> randomBytes(DataType type, size_t count, std::mt19937_64& gen) {
  const size_t size = elementSize(type);
  std::vector<uint8_t> bytes(count * size + 64);
  for (auto& b : bytes) b = static_cast<uint8_t>(gen());
  if (type == DataType::Bool) {
    for (auto& b : bytes) b = b % 3 == 0 ? 0 : (b % 3 == 1 ? 1 : b);  // nonzero reads as true
  }
  if (type == DataType::Float32 || type == DataType::Complex64) {
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f, 1.0f};
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      float v = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(gen),
                           static_cast<int>(gen() % 40) - 20);
      if (gen() % 8 == 0) v = specials[gen() % 9];
      std::memcpy(&bytes[i], &v, 4);
    }
  }
  if (type == DataType::Float64 || type == DataType::Complex128) {
    const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, 1.0};
    for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
      double v = std::uniform_real_distribution<double>(-1e6, 1e6)(gen);
      if (gen() % 8 == 0) v = specials[gen() % 8];
      std::memcpy(&bytes[i], &v, 8);
    }
  }
  return bytes;  // 16-bit floats: every bit pattern is a value, NaNs included
}

bool isNanAt(DataType type, const uint8_t* p) {
  switch (type) {
    case DataType::Float32:
    case DataType::Complex64: {
      float v;
      std::memcpy(&v, p, 4);
      return std::isnan(v);
    }
    case DataType::Float64:
    case DataType::Complex128: {
      double v;
      std::memcpy(&v, p, 8);
      return std::isnan(v);
    }
    case DataType::Float16:
    case DataType::BFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return std::isnan(type == DataType::Float16 ? halfToFloat(v) : bfloat16ToFloat(v));
    }
    default:
      return false;
  }
}

// Equal bits. A float16/bfloat16 NaN may carry another payload (the
// hand-written 16-bit paths combine with intrinsics whose operands the
// compiler may swap); a 32- or 64-bit float NaN may not (element_math.h
// fixes which NaN a sum or product keeps).
void expectSameBits(DataType type, const uint8_t* got, const uint8_t* want, size_t count,
                    const std::string& what) {
  const size_t unit = isComplex(type) ? elementSize(type) / 2 : elementSize(type);
  const bool anyNanPayload = type == DataType::Float16 || type == DataType::BFloat16;
  for (size_t i = 0; i < count * elementSize(type) / unit; ++i) {
    const uint8_t* g = got + i * unit;
    const uint8_t* w = want + i * unit;
    if (anyNanPayload && isNanAt(type, w)) {
      ASSERT_TRUE(isNanAt(type, g)) << what << " element " << i << ": NaN expected";
    } else {
      ASSERT_EQ(0, std::memcmp(g, w, unit)) << what << " element " << i;
    }
  }
}

}  // namespace

TEST(HostLoops, BaselineIsAlwaysThereAndTheChoiceIsOneOfTheAvailable) {
  const auto all = availableHostLoops();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front()->isa, HostIsa::Baseline);
  bool found = false;
  for (const HostLoops* loops : all) found = found || loops == &hostLoops();
  EXPECT_TRUE(found) << "chosen: " << hostLoops().name;
}

TEST(HostLoops, EveryInstructionSetGivesTheBaselineBits) {
  const HostLoops& baseline = *hostLoopsFor(HostIsa::Baseline);
  std::mt19937_64 gen(2026);
  for (const HostLoops* loops : availableHostLoops()) {
    if (loops->isa == HostIsa::Baseline) continue;
    for (DataType type : kTypes) {
      const size_t size = elementSize(type);
      for (size_t count : kLengths) {
        for (size_t offset : {size_t{0}, size}) {  // aligned, and one element off
          const auto a = randomBytes(type, count, gen);
          const auto b = randomBytes(type, count, gen);
          for (ReduceOp op : kOps) {
            if (!unsupportedReason(type, op).empty()) continue;
            const std::string what = std::string(loops->name) + " " + dataTypeName(type) + " " +
                                     reduceOpName(op) + " count " + std::to_string(count) +
                                     " offset " + std::to_string(offset);
            auto want = a, got = a;
            baseline.reduce(type, op, want.data() + offset, b.data() + offset, count);
            loops->reduce(type, op, got.data() + offset, b.data() + offset, count);
            expectSameBits(type, got.data() + offset, want.data() + offset, count, what);
            if (op != ReduceOp::Avg) continue;
            for (int divisor : {2, 3, 7}) {
              auto fusedWant = a, fusedGot = a, finishWant = a, finishGot = a;
              baseline.reduceAndAverage(type, fusedWant.data() + offset, b.data() + offset,
                                        count, divisor);
              loops->reduceAndAverage(type, fusedGot.data() + offset, b.data() + offset, count,
                                      divisor);
              expectSameBits(type, fusedGot.data() + offset, fusedWant.data() + offset, count,
                             what + " fused /" + std::to_string(divisor));
              baseline.finishAverage(type, finishWant.data() + offset, count, divisor);
              loops->finishAverage(type, finishGot.data() + offset, count, divisor);
              expectSameBits(type, finishGot.data() + offset, finishWant.data() + offset, count,
                             what + " finish /" + std::to_string(divisor));
            }
          }
        }
      }
    }
  }
}

// Where both operands of a float sum or product are NaN, x86's rule: the
// first operand's NaN, quieted, at every lane position and in every tail,
// on every instruction set. A compiler may swap a commutative operation's
// operands; before element_math.h chose the NaN itself, the AVX2 loops' scalar
// tail kept the second operand's, so the same two tensors reduced whole
// and in a two-phase allreduce's chunks kept different NaNs at a chunk's edge.
TEST(HostLoops, AFloatSumOrProductOfTwoNansKeepsTheFirstOperandsQuietedEverywhere) {
  for (const HostLoops* loops : availableHostLoops()) {
    for (size_t count : kLengths) {
      std::vector<uint32_t> a(count), b(count), want(count);
      std::vector<uint64_t> a64(count), b64(count), want64(count);
      for (size_t i = 0; i < count; ++i) {
        // Quiet and signalling NaNs of both signs, each with its own payload.
        a[i] = (i % 2 ? 0xff800000u : 0x7f800000u) | (i % 3 ? 0x400000u : 0u) | uint32_t(i + 1);
        b[i] = 0xffc00000u | uint32_t(i + 0x1000);
        want[i] = a[i] | 0x400000u;
        a64[i] = (i % 2 ? 0xfff0000000000000ull : 0x7ff0000000000000ull) |
                 (i % 3 ? 0x8000000000000ull : 0ull) | (i + 1);
        b64[i] = 0x7ff8000000000000ull | (i + 0x1000);
        want64[i] = a64[i] | 0x8000000000000ull;
      }
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Avg}) {
        const std::string what = std::string(loops->name) + " " + reduceOpName(op) + " count " +
                                 std::to_string(count);
        auto got = a;
        auto got64 = a64;
        loops->reduce(DataType::Float32, op, got.data(), b.data(), count);
        loops->reduce(DataType::Float64, op, got64.data(), b64.data(), count);
        EXPECT_EQ(got, want) << what << " float32";
        EXPECT_EQ(got64, want64) << what << " float64";
      }
      auto fused = a;
      loops->reduceAndAverage(DataType::Float32, fused.data(), b.data(), count, 3);
      EXPECT_EQ(fused, want) << loops->name << " AVG fused, count " << count;
    }
  }
}

TEST(HostLoops, EveryInstructionSetConvertsHalvesLikeTheScalarForms) {
  std::mt19937_64 gen(7);
  for (const HostLoops* loops : availableHostLoops()) {
    for (bool half : {true, false}) {
      for (size_t count : kLengths) {
        std::vector<uint16_t> in(count + 1);
        std::vector<float> wide(count + 1), values(count + 1);
        for (auto& v : in) v = static_cast<uint16_t>(gen());
        for (auto& v : values) {
          const uint32_t bits = static_cast<uint32_t>(gen());
          std::memcpy(&v, &bits, 4);
        }
        std::vector<uint16_t> narrow(count + 1);
        loops->widen(half, in.data() + 1, wide.data() + 1, count);
        loops->narrow(half, values.data() + 1, narrow.data() + 1, count);
        for (size_t i = 1; i <= count; ++i) {
          const float w = half ? halfToFloat(in[i]) : bfloat16ToFloat(in[i]);
          const uint16_t n = half ? floatToHalf(values[i]) : floatToBFloat16(values[i]);
          if (std::isnan(w)) {
            ASSERT_TRUE(std::isnan(wide[i])) << loops->name << " widen " << in[i];
          } else {
            ASSERT_EQ(0, std::memcmp(&w, &wide[i], 4)) << loops->name << " widen " << in[i];
          }
          if (std::isnan(values[i])) {
            const float back = half ? halfToFloat(narrow[i]) : bfloat16ToFloat(narrow[i]);
            ASSERT_TRUE(std::isnan(back)) << loops->name << " narrow NaN";
            ASSERT_EQ(narrow[i] & 0x8000, n & 0x8000) << loops->name << " narrow NaN sign";
          } else {
            ASSERT_EQ(narrow[i], n) << loops->name << " narrow " << values[i];
          }
        }
      }
    }
  }
}

// MIN/MAX of float16/bfloat16 compare the 16-bit patterns themselves. Random
// patterns almost never pair the cases where that can go wrong, so every
// pair of them is checked here: signed zeros (equal floats, different bits),
// subnormals, the extremes, infinities, quiet and signalling NaNs of both
// signs, in both orders.
TEST(HostLoops, HalfMinMaxOnEveryPairOfSpecialValues) {
  const uint16_t halfSpecials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400,
                                   0x8400, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x7c00, 0xfc00,
                                   0x7e00, 0xfe00, 0x7c01, 0xfd55, 0x3555, 0xb555};
  const uint16_t bfloatSpecials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080,
                                     0x8080, 0x3f80, 0xbf80, 0x7f7f, 0xff7f, 0x7f80, 0xff80,
                                     0x7fc0, 0xffc0, 0x7f81, 0xffa5, 0x3eab, 0xbeab};
  const HostLoops& baseline = *hostLoopsFor(HostIsa::Baseline);
  for (DataType type : {DataType::Float16, DataType::BFloat16}) {
    const uint16_t* specials = type == DataType::Float16 ? halfSpecials : bfloatSpecials;
    std::vector<uint16_t> a, b;
    for (size_t i = 0; i < 20; ++i) {
      for (size_t j = 0; j < 20; ++j) {
        a.push_back(specials[i]);
        b.push_back(specials[j]);
      }
    }
    for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      auto want = a;
      baseline.reduce(type, op, want.data(), b.data(), want.size());
      // The rule itself, on the baseline: equal floats keep dst's bits.
      for (size_t k = 0; k < a.size(); ++k) {
        if ((a[k] | b[k]) == 0x8000) {
          EXPECT_EQ(want[k], a[k]) << "signed zeros, pair " << k;
        }
      }
      for (const HostLoops* loops : availableHostLoops()) {
        auto got = a;
        loops->reduce(type, op, got.data(), b.data(), got.size());
        const std::string what = std::string(loops->name) + " " + dataTypeName(type) + " " +
                                 reduceOpName(op);
        expectSameBits(type, reinterpret_cast<const uint8_t*>(got.data()),
                       reinterpret_cast<const uint8_t*>(want.data()), got.size(), what);
        for (size_t k = 0; k < got.size(); ++k) {
          if (isNanAt(type, reinterpret_cast<const uint8_t*>(&want[k]))) {
            EXPECT_EQ(got[k] & 0x8000, want[k] & 0x8000) << what << " NaN sign, pair " << k;
          }
        }
      }
    }
  }
}

// Calls over fewer bytes than kWideVectorsFromBytes take the AVX2 loops where
// AVX-512 is the default (no per-call 512-bit warm-up for a small message);
// larger ones, and every call where the process chose something else, take
// the process's loops.
TEST(HostLoops, SmallCallsTakeTheNarrowerVectorsWhereAvx512IsTheDefault) {
  const HostLoops& chosen = hostLoops();
  const HostLoops& small = hostLoopsForBytes(kWideVectorsFromBytes - 1);
  EXPECT_EQ(&hostLoopsForBytes(kWideVectorsFromBytes), &chosen);
  EXPECT_EQ(&hostLoopsForBytes(size_t{64} << 20), &chosen);
  EXPECT_EQ(&hostLoopsForBytes(0), &small);
  const char* named = std::getenv("RINGREDUCE_HOST_ISA");
  const bool byDefault = named == nullptr || *named == '\0';
  if (chosen.isa == HostIsa::Avx512 && byDefault) {
    EXPECT_EQ(small.isa, HostIsa::Avx2);
  } else {
    EXPECT_EQ(&small, &chosen);
  }
}
