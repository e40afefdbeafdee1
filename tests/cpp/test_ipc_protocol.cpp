// The IPC collectives' host protocol (csrc/cuda/ipc/ipc_collectives.cpp) with
// ranks as threads over real UCX transports and a host stand-in for the
// device (fake_device.h): every rank must take the same branch and run the
// same exchange rounds (or the group hangs), slices and chunks must tile the
// buffer, and a rank that cannot share its tensor must move every rank to
// the fallback together. The device side itself is tested in tests/gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <memory>
#include <vector>

#include "algorithms/record_allgather.h"
#include "core/math/half_conversion.h"
#include "cuda/ipc/ipc_collectives.h"
#include "fake_device.h"
#include "rank_threads.h"

using namespace ringreduce;
using namespace ringreduce::cuda;
using ringreduce::testing::exchangeFor;
using ringreduce::testing::runRanks;

namespace {

std::unique_ptr<IpcCollectives> setUp(Transport& t, int rank, int n, size_t scratch) {
  std::string why;
  auto ipc = IpcCollectives::setUp(rank, n, 0, scratch, exchangeFor(t, 1), &why);
  if (!ipc) throw Error("set-up failed: " + why);
  return ipc;
}

// Small integers: every sum is exact in float32, bfloat16 (|x| < 256) and int64.
double valueOf(int rank, size_t i) { return static_cast<double>((rank * 7 + i * 3) % 11) - 5; }

template <typename T>
T encode(double v) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return floatToBFloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double decode(T v) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return bfloat16ToFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

double expectedSum(int n, size_t i) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += valueOf(r, i);
  return s;
}

// T is the storage type (uint16_t stands for bfloat16).
// What should run: one-shot while the data fits the scratch, two-shot in
// place unless a wire dtype is asked for or some rank cannot share its
// tensor, the staged form otherwise.
DevicePathTaken expectedAlgorithm(DevicePathTaken asked, size_t count, size_t capacity,
                                  bool wire, bool unshareable) {
  if (asked == DevicePathTaken::OneShot && count <= capacity) return DevicePathTaken::OneShot;
  if (asked == DevicePathTaken::TwoShot && !wire && !unshareable) return DevicePathTaken::TwoShot;
  return DevicePathTaken::Staged;
}

template <typename T>
void allreduceCase(DataType type, DataType wire, DevicePathTaken algorithm, bool avg,
                   int unshareableRank = -1) {
  for (int n : {1, 2, 3, 4}) {
    runRanks(n, [&, n](Transport& t, int rank) {
      auto ipc = setUp(t, rank, n, 4096);  // 2 KiB halves: larger counts run in chunks
      uint64_t seq = 10;
      for (size_t count : {0ul, 1ul, 7ul, 1000ul, 5003ul}) {
        std::vector<T> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = encode<T>(valueOf(rank, i));
        if (rank == unshareableRank) ringreduce::testing::markUnshareable(data.data());
        const DevicePathTaken ran =
            ipc->allreduce(data.data(), count, type, avg ? ReduceOp::Avg : ReduceOp::Sum, wire,
                           algorithm, nullptr, exchangeFor(t, ++seq));
        // What fits one-shot, from the test's own numbers, not the product's
        // capacity: the 2 KiB input half in the wire's elements (the product
        // rounds it down to whole vectors per rank; no count here is near).
        const size_t fitsOneShot = 2048 / (wire != type ? 2 : sizeof(T));
        const DevicePathTaken expected =
            expectedAlgorithm(algorithm, count, fitsOneShot, wire != type,
                              unshareableRank >= 0 && unshareableRank < n);
        if (count > 0) {
          EXPECT_STREQ(nameOf(ran), nameOf(expected))
              << "count " << count << " n " << n;
        }
        // Sums of small integers are exact; an average in (or through) 16
        // bits is rounded once to 8 significant bits.
        const bool rounded = avg && (type == DataType::BFloat16 || wire != type);
        for (size_t i = 0; i < count; ++i) {
          double want = expectedSum(n, i);
          if (avg) want = type == DataType::Int64 ? std::trunc(want / n) : want / n;
          ASSERT_NEAR(decode(data[i]), want, rounded ? 0.02 : 0.0)
              << "count " << count << " n " << n << " i " << i;
        }
      }
    });
    ringreduce::testing::clearUnshareable();
  }
}

}  // namespace

TEST(IpcProtocol, OneShotSumAndAverage) {
  allreduceCase<float>(DataType::Float32, DataType::Float32, DevicePathTaken::OneShot, false);
  allreduceCase<int64_t>(DataType::Int64, DataType::Int64, DevicePathTaken::OneShot, true);
}

TEST(IpcProtocol, TwoShotInPlace) {
  allreduceCase<float>(DataType::Float32, DataType::Float32, DevicePathTaken::TwoShot, false);
  allreduceCase<uint16_t>(DataType::BFloat16, DataType::BFloat16, DevicePathTaken::TwoShot, true);
}

TEST(IpcProtocol, StagedRunsInChunksAndCarriesAWireDtype) {
  allreduceCase<int64_t>(DataType::Int64, DataType::Int64, DevicePathTaken::Staged, false);
  allreduceCase<float>(DataType::Float32, DataType::BFloat16, DevicePathTaken::Staged, true);
  // One-shot through a 16-bit scratch; past its capacity, the staged form.
  allreduceCase<float>(DataType::Float32, DataType::Float16, DevicePathTaken::OneShot, false);
  // Two-shot with a wire dtype: the wire needs the scratch, so staged.
  allreduceCase<float>(DataType::Float32, DataType::BFloat16, DevicePathTaken::TwoShot, false);
}

// One rank's tensor cannot be shared: every rank learns it in the same
// exchange and all move to the staged form, with the right result.
TEST(IpcProtocol, TwoShotFallsBackTogetherWhenOneRankCannotShare) {
  for (int rank : {0, 1}) {
    allreduceCase<float>(DataType::Float32, DataType::Float32, DevicePathTaken::TwoShot, false,
                         rank);
  }
}

TEST(IpcProtocol, ReduceScatterAllgatherAndBroadcast) {
  for (int n : {1, 2, 3, 4}) {
    runRanks(n, [n](Transport& t, int rank) {
      auto ipc = setUp(t, rank, n, 4096);
      uint64_t seq = 10;
      const size_t per = 301;
      std::vector<float> input(per * n), block(per);
      for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(valueOf(rank, i));
      ASSERT_TRUE(ipc->reduceScatter(input.data(), block.data(), per, DataType::Float32,
                                     ReduceOp::Sum, nullptr, exchangeFor(t, ++seq)));
      for (size_t i = 0; i < per; ++i) {
        ASSERT_EQ(block[i], expectedSum(n, rank * per + i)) << i;
      }
      std::vector<float> gathered(per * n, -1.f);
      ASSERT_TRUE(ipc->allgather(block.data(), gathered.data(), per * sizeof(float),
                                 DataType::UInt8, nullptr, exchangeFor(t, ++seq)));
      for (size_t i = 0; i < gathered.size(); ++i) ASSERT_EQ(gathered[i], expectedSum(n, i)) << i;
      for (int root = 0; root < n; ++root) {
        std::vector<int64_t> data(77);
        for (size_t i = 0; i < data.size(); ++i) data[i] = rank * 1000 + static_cast<int64_t>(i);
        ASSERT_TRUE(ipc->broadcast(data.data(), data.size() * sizeof(int64_t), DataType::UInt8,
                                   root, nullptr, exchangeFor(t, ++seq)));
        for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], root * 1000 + int64_t(i));
      }
    });
  }
}

TEST(IpcProtocol, UnshareableInputMakesEveryRankReturnFalse) {
  const int n = 3;
  runRanks(n, [](Transport& t, int rank) {
    auto ipc = setUp(t, rank, n, 4096);
    std::vector<float> input(30, 1.f), out(10), gathered(30);
    if (rank == 2) ringreduce::testing::markUnshareable(input.data());
    EXPECT_FALSE(ipc->reduceScatter(input.data(), out.data(), 10, DataType::Float32,
                                    ReduceOp::Sum, nullptr, exchangeFor(t, 11)));
    EXPECT_FALSE(ipc->allgather(input.data(), gathered.data(), 40, DataType::UInt8, nullptr,
                                exchangeFor(t, 12)));
    // The group stays in step: a shareable call afterwards works.
    std::vector<float> ok(30, 1.f);
    std::vector<float> okOut(10);
    EXPECT_TRUE(ipc->reduceScatter(ok.data(), okOut.data(), 10, DataType::Float32, ReduceOp::Sum,
                                   nullptr, exchangeFor(t, 13)));
    for (float v : okOut) EXPECT_EQ(v, 3.f);
  });
  ringreduce::testing::clearUnshareable();
}
