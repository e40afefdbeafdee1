// The device ring's results and failures, on the fake device (host memory,
// asynchronous tickets: fake_device_steps.h) over the loopback and UCX
// transports. Results are compared with the host ring's bits (the same
// order of combination) and, on exact inputs, with a local reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "algorithms/device/ring.h"
#include "algorithms/device/two_level.h"
#include "algorithms/two_level_allreduce.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/errors.h"
#include "core/math/half_conversion.h"
#include "core/plan/partition.h"
#include "fake_device_steps.h"
#include "rank_threads.h"

using namespace ringreduce;
using ringreduce::testing::FakeDeviceSteps;
using ringreduce::testing::kindName;
using ringreduce::testing::runComms;
using ringreduce::testing::TransportKind;

namespace {

class DeviceRing : public ::testing::TestWithParam<TransportKind> {};

std::string transportName(const ::testing::TestParamInfo<TransportKind>& info) {
  return kindName(info.param);
}

// 3 slots of 256 bytes: every size past a few dozen elements spans many
// segments and reuses each slot several times. Each rank's tickets take
// 1 to 4 polls, drawn from its own seed.
FakeDeviceSteps::Options fakeFor(int rank) {
  FakeDeviceSteps::Options options;
  options.maxPolls = 4;
  options.seed = 17u + static_cast<uint32_t>(rank);
  return options;
}

// Small integers (exact sums in float32 and int64), or any floats.
template <typename T>
std::vector<T> inputOf(int rank, size_t count, uint32_t salt, bool exact) {
  std::mt19937 gen(salt * 7919u + static_cast<uint32_t>(rank));
  std::uniform_int_distribution<int> small(-50, 50);
  std::uniform_real_distribution<float> any(-1.0f, 1.0f);
  std::vector<T> v(count);
  for (auto& x : v) x = exact ? static_cast<T>(small(gen)) : static_cast<T>(any(gen));
  return v;
}

// The reduction of every rank's input: SUM, MAX, or AVG (integers truncate).
template <typename T>
std::vector<T> referenceOf(int n, size_t count, uint32_t salt, ReduceOp op) {
  std::vector<T> out = inputOf<T>(0, count, salt, true);
  for (int r = 1; r < n; ++r) {
    const auto in = inputOf<T>(r, count, salt, true);
    for (size_t i = 0; i < count; ++i) out[i] = op == ReduceOp::Max ? std::max(out[i], in[i])
                                                                     : out[i] + in[i];
  }
  if (op == ReduceOp::Avg) {
    for (auto& x : out) x = x / static_cast<T>(n);
  }
  return out;
}

// Where `result` strays from the float64 sum (or mean) of every rank's
// `inputs` by more than the ring's rounding allows: n-1 steps that round
// once each, by at most `unit` relative to the sum of magnitudes, and one
// rounding more for a mean. A reference of neither ring, so a contribution
// lost in both (as a shared schedule would lose it) shows. Empty: none.
std::string offTheWideReference(const std::vector<float>& result,
                                 const std::vector<std::vector<float>>& inputs, ReduceOp op,
                                 double unit) {
  const double n = static_cast<double>(inputs.size());
  for (size_t i = 0; i < result.size(); ++i) {
    double sum = 0.0, magnitude = 0.0;
    for (const auto& in : inputs) {
      sum += in[i];
      magnitude += std::abs(static_cast<double>(in[i]));
    }
    double bound = (n - 1) * unit * magnitude + 1e-30;
    if (op == ReduceOp::Avg) {
      sum /= n;
      bound = bound / n + unit * magnitude / n;
    }
    if (std::abs(result[i] - sum) > bound) {
      std::ostringstream text;
      text << std::setprecision(9) << "element " << i << ": " << result[i]
           << ", the float64 reference " << sum << " (bound " << bound << ")";
      return text.str();
    }
  }
  return {};
}

// Every rank's input of any floats, rebuilt from its seed; rounded once to
// a 16-bit wire type (each rank rounds its own) where `wire` is not None.
std::vector<std::vector<float>> everyInput(int n, size_t count, uint32_t salt,
                                           WireDtype wire = WireDtype::None) {
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < n; ++r) {
    auto in = inputOf<float>(r, count, salt, false);
    if (wire != WireDtype::None) {
      const bool half = wire == WireDtype::Fp16;
      std::vector<uint16_t> narrow(count);
      floatBufferToHalf(half, in.data(), narrow.data(), count);
      halfBufferToFloat(half, narrow.data(), in.data(), count);
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

// Unit roundoffs: float32's, and the 16-bit wire types'.
double unitOf(WireDtype wire) {
  return std::ldexp(1.0, wire == WireDtype::Fp16 ? -11 : wire == WireDtype::Bf16 ? -8 : -24);
}

template <typename T>
bool sameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

constexpr size_t kCounts[] = {1, 7, 1001, 4099};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max};

OpContext opNamed(const char* name, uint64_t seq) {
  return OpContext(name, seq, std::chrono::seconds(20));
}

// Device and host allreduce on the same input, then the reference.
template <typename T>
void checkAllreduce(const Comm& c, DeviceSteps& device, uint64_t& seq, size_t count,
                    ReduceOp op, uint32_t salt, bool exact) {
  const int n = c.size();
  auto onDevice = inputOf<T>(c.rank(), count, salt, exact);
  auto onHost = onDevice;
  const DataType type = sizeof(T) == 8 ? DataType::Int64 : DataType::Float32;
  deviceRingAllreduce(c, opNamed("allreduce", ++seq), {onDevice.data(), count, type, op}, device);
  ringAllreduce(c, opNamed("allreduce", ++seq), {onHost.data(), count, type, op});
  ASSERT_TRUE(sameBits(onDevice, onHost)) << "count " << count << " n " << n;
  if (exact) {
    ASSERT_TRUE(sameBits(onDevice, referenceOf<T>(n, count, salt, op)));
  } else if constexpr (std::is_same_v<T, float>) {
    ASSERT_EQ(offTheWideReference(onDevice, everyInput(n, count, salt), op,
                                  unitOf(WireDtype::None)), "")
        << "count " << count << " n " << n;
  }
}

// Device reduce-scatter in place and with an output, host reduce-scatter:
// the same bits everywhere (partial sums included); chunk r as the reference.
template <typename T>
void checkReduceScatter(const Comm& c, DeviceSteps& device, uint64_t& seq, size_t count,
                        ReduceOp op, uint32_t salt) {
  const int n = c.size();
  const Range mine = chunkOf(count, n, c.rank());
  auto inPlace = inputOf<T>(c.rank(), count, salt, true);
  auto withOutput = inPlace;
  auto onHost = inPlace;
  std::vector<T> output(mine.count, T(99));
  const DataType type = sizeof(T) == 8 ? DataType::Int64 : DataType::Float32;
  deviceRingReduceScatter(c, opNamed("reduce_scatter", ++seq), {inPlace.data(), count, type, op},
                          device);
  deviceRingReduceScatter(c, opNamed("reduce_scatter", ++seq),
                          {withOutput.data(), count, type, op, output.data()}, device);
  ringReduceScatter(c, opNamed("reduce_scatter", ++seq), {onHost.data(), count, type, op});
  ASSERT_TRUE(sameBits(inPlace, onHost)) << "count " << count << " n " << n;
  ASSERT_TRUE(sameBits(withOutput, onHost)) << "count " << count << " n " << n;
  const auto expected = referenceOf<T>(n, count, salt, op);
  const std::vector<T> expectedMine(expected.begin() + mine.offset,
                                    expected.begin() + mine.offset + mine.count);
  ASSERT_TRUE(sameBits(output, expectedMine)) << "count " << count << " n " << n;
  ASSERT_TRUE(sameBits(std::vector<T>(inPlace.begin() + mine.offset,
                                      inPlace.begin() + mine.offset + mine.count),
                       expectedMine));
}

}  // namespace

TEST_P(DeviceRing, AllreduceMatchesTheHostRingAndTheReference) {
  for (int n : {2, 3, 4, 5}) {
    runComms(n, GetParam(), [&](const Comm& c, int rank) {
      FakeDeviceSteps device(fakeFor(rank));
      uint64_t seq = 0;
      uint32_t salt = 0;
      for (size_t count : kCounts) {
        for (ReduceOp op : kOps) {
          checkAllreduce<float>(c, device, seq, count, op, ++salt, true);
          checkAllreduce<int64_t>(c, device, seq, count, op, ++salt, true);
        }
        // Any floats: the same bits as the host ring still, whatever the rounding.
        checkAllreduce<float>(c, device, seq, count, ReduceOp::Sum, ++salt, false);
      }
      EXPECT_EQ(device.unfinished(), 0u);  // nothing left on the device at return
    });
  }
}

// float32 SUM and AVG on a 16-bit wire: the host ring's bits on the same
// 16-bit copy (what RINGREDUCE_WIRE_DTYPE does on the host: round once,
// combine in float32 rounding once per step, widen back), on every rank
// alike; one narrowing and one widening on the device, the ring's
// reductions in the 16-bit type. Other types, MAX and one rank ignore it.
TEST_P(DeviceRing, AllreduceOnASixteenBitWireMatchesTheHostRingOnIt) {
  for (int n : {2, 3, 4}) {
    runComms(n, GetParam(), [&](const Comm& c, int rank) {
      FakeDeviceSteps device(fakeFor(rank));
      uint64_t seq = 0;
      uint32_t salt = 0;
      for (WireDtype wire : {WireDtype::Fp16, WireDtype::Bf16}) {
        const bool half = wire == WireDtype::Fp16;
        const DataType wireType = half ? DataType::Float16 : DataType::BFloat16;
        for (size_t count : kCounts) {
          for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
            auto onDevice = inputOf<float>(rank, count, ++salt, false);
            std::vector<uint16_t> narrow(count);
            floatBufferToHalf(half, onDevice.data(), narrow.data(), count);
            ringAllreduce(c, opNamed("allreduce", ++seq), {narrow.data(), count, wireType, op});
            std::vector<float> expected(count);
            halfBufferToFloat(half, narrow.data(), expected.data(), count);
            const size_t convertsBefore = device.converts();
            const size_t reducesBefore = device.reduces().size();
            DeviceRingArgs args{onDevice.data(), count, DataType::Float32, op};
            args.wire = wire;
            deviceRingAllreduce(c, opNamed("allreduce", ++seq), args, device);
            ASSERT_TRUE(sameBits(onDevice, expected))
                << nameOf(wire) << " " << reduceOpName(op) << " count " << count << " n " << n;
            // Beside the host ring's bits, a reference of neither ring: the
            // float64 sum of every rank's input as rounded once to the wire
            // type, within one rounding of the wire type per step.
            ASSERT_EQ(offTheWideReference(onDevice, everyInput(n, count, salt, wire), op,
                                          unitOf(wire)), "")
                << nameOf(wire) << " " << reduceOpName(op) << " count " << count << " n " << n;
            EXPECT_EQ(device.converts(), convertsBefore + 2);
            // Every reduction ran on the 16-bit copy, none on the caller's floats.
            for (size_t i = reducesBefore; i < device.reduces().size(); ++i) {
              EXPECT_NE(device.reduces()[i].dst, static_cast<const void*>(onDevice.data()));
            }
          }
        }
        // MAX, and int64 SUM: the wire does not apply, nothing is converted.
        const size_t convertsBefore = device.converts();
        auto maxed = inputOf<float>(rank, 1001, ++salt, true);
        DeviceRingArgs maxArgs{maxed.data(), maxed.size(), DataType::Float32, ReduceOp::Max};
        maxArgs.wire = wire;
        deviceRingAllreduce(c, opNamed("allreduce", ++seq), maxArgs, device);
        ASSERT_TRUE(sameBits(maxed, referenceOf<float>(n, 1001, salt, ReduceOp::Max)));
        auto ints = inputOf<int64_t>(rank, 1001, ++salt, true);
        DeviceRingArgs intArgs{ints.data(), ints.size(), DataType::Int64, ReduceOp::Sum};
        intArgs.wire = wire;
        deviceRingAllreduce(c, opNamed("allreduce", ++seq), intArgs, device);
        ASSERT_TRUE(sameBits(ints, referenceOf<int64_t>(n, 1001, salt, ReduceOp::Sum)));
        EXPECT_EQ(device.converts(), convertsBefore);
      }
      EXPECT_EQ(device.unfinished(), 0u);
    });
  }
}

// Two levels on equal nodes (blocks and interleaved ranks): the reference
// for every op on exact inputs, and on any floats the bits of the host's
// two-level allreduce with a ring across (the same chunks and order of
// combination), the 16-bit wire included. Unequal nodes, one node and one
// rank per node take the flat device ring: its bits.
TEST_P(DeviceRing, TwoLevelOnEqualNodesMatchesTheReferenceAndTheHostsTwoLevel) {
  struct Layout {
    std::vector<int> nodeOf;
    bool twoLevel;
  };
  const Layout layouts[] = {
      {{0, 0, 1, 1}, true},    {{0, 1, 0, 1}, true}, {{0, 0, 0, 1, 1, 1}, true},
      {{0, 0, 1, 1, 2, 2}, true}, {{0, 0, 0, 1}, false}, {{0, 1, 2}, false},
      {{0, 0, 0}, false},
  };
  for (const Layout& layout : layouts) {
    const Topology topology = Topology::fromLabels(layout.nodeOf);
    ASSERT_EQ(topology.equalNodesOfSeveralRanks(), layout.twoLevel);
    const int n = topology.size();
    runComms(n, GetParam(), [&](const Comm& c, int rank) {
      FakeDeviceSteps device(fakeFor(rank));
      uint64_t seq = 0;
      uint32_t salt = 0;
      for (size_t count : kCounts) {
        for (ReduceOp op : kOps) {
          auto f = inputOf<float>(rank, count, ++salt, true);
          deviceTwoLevelAllreduce(c, opNamed("allreduce", ++seq),
                                  {f.data(), count, DataType::Float32, op}, topology, device);
          ASSERT_TRUE(sameBits(f, referenceOf<float>(n, count, salt, op)))
              << "float " << reduceOpName(op) << " count " << count << " n " << n;
          auto i = inputOf<int64_t>(rank, count, ++salt, true);
          deviceTwoLevelAllreduce(c, opNamed("allreduce", ++seq),
                                  {i.data(), count, DataType::Int64, op}, topology, device);
          ASSERT_TRUE(sameBits(i, referenceOf<int64_t>(n, count, salt, op)))
              << "int64 " << reduceOpName(op) << " count " << count << " n " << n;
        }
        // Any floats: the host's two-level bits (the flat ring's where the
        // two levels do not apply), on float32 and on a bfloat16 wire.
        auto onDevice = inputOf<float>(rank, count, ++salt, false);
        auto onHost = onDevice;
        deviceTwoLevelAllreduce(c, opNamed("allreduce", ++seq),
                                {onDevice.data(), count, DataType::Float32, ReduceOp::Sum},
                                topology, device);
        std::vector<uint16_t> narrow(count);
        auto wired = inputOf<float>(rank, count, ++salt, false);
        floatBufferToHalf(false, wired.data(), narrow.data(), count);
        if (layout.twoLevel) {
          twoLevelAllreduce(c, opNamed("allreduce", ++seq),
                            {{onHost.data(), count, DataType::Float32, ReduceOp::Sum}, &topology,
                             AllreduceAlgorithm::Ring});
          twoLevelAllreduce(c, opNamed("allreduce", ++seq),
                            {{narrow.data(), count, DataType::BFloat16, ReduceOp::Sum},
                             &topology, AllreduceAlgorithm::Ring});
        } else {
          ringAllreduce(c, opNamed("allreduce", ++seq),
                        {onHost.data(), count, DataType::Float32, ReduceOp::Sum});
          ringAllreduce(c, opNamed("allreduce", ++seq),
                        {narrow.data(), count, DataType::BFloat16, ReduceOp::Sum});
        }
        ASSERT_TRUE(sameBits(onDevice, onHost)) << "count " << count << " n " << n;
        ASSERT_EQ(offTheWideReference(onDevice, everyInput(n, count, salt - 1), ReduceOp::Sum,
                                      unitOf(WireDtype::None)), "")
            << "count " << count << " n " << n;
        std::vector<float> expected(count);
        halfBufferToFloat(false, narrow.data(), expected.data(), count);
        DeviceRingArgs args{wired.data(), count, DataType::Float32, ReduceOp::Sum};
        args.wire = WireDtype::Bf16;
        deviceTwoLevelAllreduce(c, opNamed("allreduce", ++seq), args, topology, device);
        ASSERT_TRUE(sameBits(wired, expected)) << "bf16 wire, count " << count << " n " << n;
        ASSERT_EQ(offTheWideReference(wired, everyInput(n, count, salt, WireDtype::Bf16),
                                      ReduceOp::Sum, unitOf(WireDtype::Bf16)), "")
            << "bf16 wire, count " << count << " n " << n;
      }
      EXPECT_EQ(device.unfinished(), 0u);
    });
  }
}

TEST_P(DeviceRing, ReduceScatterMatchesTheHostRingAndTheReference) {
  for (int n : {2, 3, 4, 5}) {
    runComms(n, GetParam(), [&](const Comm& c, int rank) {
      FakeDeviceSteps device(fakeFor(rank));
      uint64_t seq = 0;
      uint32_t salt = 0;
      for (size_t count : {size_t{1}, size_t{7}, size_t{1001}, 333 * static_cast<size_t>(n)}) {
        for (ReduceOp op : kOps) {
          checkReduceScatter<float>(c, device, seq, count, op, ++salt);
          checkReduceScatter<int64_t>(c, device, seq, count, op, ++salt);
        }
      }
      EXPECT_EQ(device.unfinished(), 0u);
    });
  }
}

// all_gather_into_tensor: from a separate input (the device copies the own
// block first) and in place.
TEST_P(DeviceRing, AllgatherPlacesEveryRanksBlock) {
  for (int n : {2, 3, 4, 5}) {
    runComms(n, GetParam(), [&](const Comm& c, int rank) {
      FakeDeviceSteps device(fakeFor(rank));
      uint64_t seq = 0;
      auto byteOf = [](int r, size_t i) { return static_cast<uint8_t>(31 * r + i % 251); };
      for (size_t block : {size_t{1}, size_t{7}, size_t{3001}}) {
        std::vector<uint8_t> input(block);
        for (size_t i = 0; i < block; ++i) input[i] = byteOf(rank, i);
        std::vector<uint8_t> separate(block * n, 0xee);
        std::vector<uint8_t> inPlace(block * n, 0xee);
        std::copy(input.begin(), input.end(), inPlace.begin() + block * rank);
        const size_t copiesBefore = device.copies();
        deviceRingAllgather(c, opNamed("all_gather", ++seq), {input.data(), separate.data(), block},
                            device);
        EXPECT_EQ(device.copies(), copiesBefore + 1);
        deviceRingAllgather(c, opNamed("all_gather", ++seq),
                            {inPlace.data() + block * rank, inPlace.data(), block}, device);
        EXPECT_EQ(device.copies(), copiesBefore + 1);  // in place: nothing to copy
        for (int q = 0; q < n; ++q) {
          for (size_t i = 0; i < block; ++i) {
            ASSERT_EQ(separate[block * q + i], byteOf(q, i)) << "block " << q << " byte " << i;
            ASSERT_EQ(inPlace[block * q + i], byteOf(q, i)) << "block " << q << " byte " << i;
          }
        }
      }
    });
  }
}

// One rank: no messages; AVG is the identity, and outputs are copies.
TEST(DeviceRingAlone, OneRankCopiesWhatItMustAndNothingElse) {
  runComms(1, TransportKind::Loopback, [](const Comm& c, int) {
    FakeDeviceSteps device(fakeFor(0));
    std::vector<float> data = {1.5f, -2.0f, 3.25f};
    const auto before = data;
    deviceRingAllreduce(c, opNamed("allreduce", 1), {data.data(), 3, DataType::Float32,
                                                      ReduceOp::Avg}, device);
    EXPECT_EQ(data, before);
    std::vector<float> output(3, 0.0f);
    deviceRingReduceScatter(c, opNamed("reduce_scatter", 2),
                            {data.data(), 3, DataType::Float32, ReduceOp::Sum, output.data()},
                            device);
    EXPECT_EQ(output, before);
    std::vector<float> gathered(3, 0.0f);
    deviceRingAllgather(c, opNamed("all_gather", 3), {data.data(), gathered.data(), 12}, device);
    EXPECT_EQ(gathered, before);
    EXPECT_EQ(device.reduces().size(), 0u);
  });
}

TEST(DeviceRingAlone, RefusesWhatItCannotDo) {
  runComms(2, TransportKind::Loopback, [](const Comm& c, int rank) {
    std::vector<int64_t> data(100, 1), output(50);
    FakeDeviceSteps::Options tiny = fakeFor(rank);
    tiny.slotBytes = 4;  // smaller than one int64
    FakeDeviceSteps small(tiny);
    EXPECT_THROW(deviceRingAllreduce(c, opNamed("allreduce", 1),
                                     {data.data(), 100, DataType::Int64, ReduceOp::Sum}, small),
                 InvalidArgument);
    FakeDeviceSteps device(fakeFor(rank));
    EXPECT_THROW(deviceRingAllreduce(c, opNamed("allreduce", 2),
                                     {data.data(), 100, DataType::Int64, ReduceOp::Sum,
                                      output.data()},
                                     device),
                 InvalidArgument);
    EXPECT_THROW(deviceRingAllreduce(c, opNamed("allreduce", 3),
                                     {data.data(), 100, DataType::Bool, ReduceOp::Avg}, device),
                 InvalidArgument);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceRing,
                         ::testing::Values(TransportKind::Ucx, TransportKind::Loopback),
                         transportName);
