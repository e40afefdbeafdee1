// What the group's path selection (cuda/path_selection.h) decides for one GPU
// per rank on the fake device: every rank takes the same path, the device
// flags while every pair reaches the others, and NCCL-or-host staging for
// every rank alike when one pair cannot (or RINGREDUCE_CUDA_P2P=off on one
// rank), with a description that names why. NCCL is made unloadable here,
// so "NCCL or host" is host staging.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/path_selection.h"
#include "fake_device.h"
#include "rank_threads.h"
#include "scoped_env.h"

using namespace ringreduce;
using namespace ringreduce::cuda;
using ringreduce::testing::exchangeFor;
using ringreduce::testing::FakePeerAccess;
using ringreduce::testing::runRanks;

namespace {

struct Outcome {
  std::vector<DevicePathTaken> ran;
  std::vector<std::string> described;
  explicit Outcome(int n) : ran(n), described(n) {}
};

float valueOf(int rank, size_t i) { return static_cast<float>((rank * 5 + i * 7) % 13) - 6.f; }

// World `n`, rank k on device k: one allreduce of 300 floats through the
// group's paths; rank `p2pOffOn` sets RINGREDUCE_CUDA_P2P=off (-1: none).
Outcome allreduceOnce(int n, int p2pOffOn) {
  Outcome out(n);
  runRanks(n, [&](Transport& t, int rank) {
    Config config = Config::fromEnvironment();
    config.resolveDeviceFlags(true, n);
    config.cudaBufferBytes = 16 * 1024;
    config.cudaScratchBytes = 64 * 1024;
    if (rank == p2pOffOn) config.cudaPeerAccess = false;
    PathSelection paths(rank, n, rank, config, exchangeFor(t, 1));
    std::vector<float> data(300);
    for (size_t i = 0; i < data.size(); ++i) data[i] = valueOf(rank, i);
    CollectiveCall call;
    call.fingerprint = 42;
    call.timeout = std::chrono::seconds(20);
    out.ran[rank] = paths.allreduce(data.data(), data.size(), DataType::Float32, ReduceOp::Sum,
                                    nullptr, exchangeFor(t, 2), call);
    if (out.ran[rank] != DevicePathTaken::HostStaging) {
      for (size_t i = 0; i < data.size(); ++i) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += valueOf(q, i);
        ASSERT_EQ(data[i], want) << i;
      }
    }
    out.described[rank] = paths.describe();
    EXPECT_TRUE(paths.close(exchangeFor(t, 3), std::chrono::seconds(10)));
  });
  return out;
}

void expectAlike(const Outcome& out, DevicePathTaken path, const std::vector<std::string>& says) {
  for (size_t q = 0; q < out.ran.size(); ++q) {
    EXPECT_EQ(out.ran[q], path) << "rank " << q << " took " << nameOf(out.ran[q]);
    for (const std::string& s : says) {
      EXPECT_NE(out.described[q].find(s), std::string::npos) << "rank " << q << ": "
                                                             << out.described[q];
    }
  }
}

struct Quiet {
  ringreduce::ScopedEnv nccl{"RINGREDUCE_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"};
  Quiet() { ringreduce::testing::resetFakePeerAccess(); }
  ~Quiet() { ringreduce::testing::resetFakePeerAccess(); }
};

}  // namespace

TEST(PathChoice, EveryPairReachingTheOthersTakesTheDeviceFlags) {
  Quiet quiet;
  expectAlike(allreduceOnce(3, -1), DevicePathTaken::FlagsOneShot,
              {"probed, every pair ok", "device flags: set up"});
}

// One broken pair: the flags path's probe fails it on every rank, the IPC
// kernels are not probed again (the same verdict), and every rank stages
// the collective through the host.
TEST(PathChoice, ABrokenPairSendsEveryRankToTheFallbackNamingThePair) {
  Quiet quiet;
  ringreduce::testing::setFakePeerAccess(0, 2, FakePeerAccess::Broken);
  expectAlike(allreduceOnce(3, -1), DevicePathTaken::HostStaging,
              {"device flags: unavailable: peer access between rank 0",
               "IPC kernels: unavailable: peer access between rank 0", "rank 2"});
}

TEST(PathChoice, PeerAccessOffOnOneRankIsOffForTheGroup) {
  Quiet quiet;
  expectAlike(allreduceOnce(3, 1), DevicePathTaken::HostStaging,
              {"RINGREDUCE_CUDA_P2P=off on rank 1", "device flags: unavailable"});
}
