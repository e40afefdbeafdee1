// One GPU per rank, on the fake device (fake_device.h): rank k drives device
// k, and each pair of devices has peer access present, absent or broken.
// What users deploy and no test machine has: set-up probes every pair and
// every rank falls back alike when one pair fails, naming it; a mapping that
// fails on one rank inside a collective sends every rank through the
// buffers; no rank touches a device other than its own.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cuda/ipc/ipc_collectives.h"
#include "cuda/ipc/tensor_sharing.h"
#include "cuda/signal/signal_group.h"
#include "fake_device.h"
#include "rank_threads.h"

using namespace ringreduce;
using namespace ringreduce::cuda;
using ringreduce::testing::exchangeFor;
using ringreduce::testing::FakePeerAccess;
using ringreduce::testing::runRanks;

namespace {

// Position-dependent small integers: exact in float32, and a value that
// lands at the wrong offset or from the wrong rank does not pass.
float valueOf(int rank, size_t i) { return static_cast<float>((rank * 7 + i * 3) % 11) - 5.f; }

float sumOf(int n, size_t i) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += valueOf(r, i);
  return s;
}

SignalGroupOptions smallFlags() {
  SignalGroupOptions o;
  o.bufferBytes = 16 * 1024;
  o.sync = CudaSync::Flags;
  o.maxBlocks = 2;
  o.probeLimit = std::chrono::seconds(20);
  return o;
}

SignalGroup::Call callOf(uint32_t fingerprint) {
  SignalGroup::Call c;
  c.fingerprint = fingerprint;
  c.timeout = std::chrono::seconds(20);
  return c;
}

struct ResetDevices {
  ResetDevices() { ringreduce::testing::resetFakePeerAccess(); }
  ~ResetDevices() { ringreduce::testing::resetFakePeerAccess(); }
};

// Every rank's reason, collected to compare them.
struct Reasons {
  explicit Reasons(int n) : of(n) {}
  std::vector<std::string> of;
  std::vector<int> nulls = std::vector<int>(of.size(), 0);
};

void expectEveryRankFellBackAlike(const Reasons& r, const std::vector<std::string>& mentions) {
  for (size_t q = 0; q < r.of.size(); ++q) {
    EXPECT_EQ(r.nulls[q], 1) << "rank " << q << " set up while a peer did not";
    EXPECT_EQ(r.of[q], r.of[0]) << "rank " << q << " decided for another reason";
    for (const std::string& m : mentions) {
      EXPECT_NE(r.of[q].find(m), std::string::npos) << "rank " << q << ": " << r.of[q];
    }
  }
}

}  // namespace

TEST(MultiDevice, EachRankOnItsOwnDeviceReducesExactlyAndTouchesNoOther) {
  ResetDevices reset;
  const int n = 3;
  std::vector<std::vector<float>> tensors(n, std::vector<float>(3000));
  runRanks(n, [&](Transport& t, int rank) {
    (void)ringreduce::testing::takeDevicesUsedByThisThread();
    std::string why;
    auto flags = SignalGroup::setUp(rank, n, rank, smallFlags(), exchangeFor(t, 1), &why);
    ASSERT_NE(flags, nullptr) << why;
    std::vector<float> in(500), out(500);
    for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(rank, i);
    flags->allreduce(in.data(), out.data(), in.size(), DataType::Float32, ReduceOp::Sum,
                     callOf(3));
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], sumOf(n, i)) << i;

    auto ipc = IpcCollectives::setUp(rank, n, rank, 64 * 1024, exchangeFor(t, 2), &why);
    ASSERT_NE(ipc, nullptr) << why;
    std::vector<float>& mine = tensors[rank];
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = valueOf(rank, i);
    EXPECT_EQ(ipc->allreduce(mine.data(), mine.size(), DataType::Float32, ReduceOp::Sum,
                             DataType::Float32, DevicePathTaken::TwoShot, nullptr,
                             exchangeFor(t, 3)),
              DevicePathTaken::TwoShot);
    for (size_t i = 0; i < mine.size(); ++i) ASSERT_EQ(mine[i], sumOf(n, i)) << i;
    EXPECT_TRUE(ipc->close(exchangeFor(t, 4), std::chrono::seconds(10)));
    EXPECT_TRUE(flags->close(exchangeFor(t, 5), std::chrono::seconds(10)));
    EXPECT_EQ(ringreduce::testing::takeDevicesUsedByThisThread(), std::set<int>{rank})
        << "rank " << rank << " handed another device to the CUDA layer";
  });
}

// Peer traffic broken between devices 1 and 2 (the mapping opens, the data
// goes elsewhere): set-up's probe finds it, and every rank, rank 0 too,
// gives the path up with the same reason naming the pair.
TEST(MultiDevice, ABrokenPairFailsEveryRanksSetUpNamingIt) {
  ResetDevices reset;
  ringreduce::testing::setFakePeerAccess(1, 2, FakePeerAccess::Broken);
  for (const bool ipcPath : {false, true}) {
    const int n = 4;
    Reasons reasons(n);
    runRanks(n, [&](Transport& t, int rank) {
      std::string why;
      const bool made =
          ipcPath ? IpcCollectives::setUp(rank, n, rank, 64 * 1024, exchangeFor(t, 1), &why) !=
                        nullptr
                  : SignalGroup::setUp(rank, n, rank, smallFlags(), exchangeFor(t, 1), &why) !=
                        nullptr;
      reasons.nulls[rank] = made ? 0 : 1;
      reasons.of[rank] = why;
    });
    SCOPED_TRACE(ipcPath ? "IPC kernels" : "device flags");
    expectEveryRankFellBackAlike(reasons, {"rank 1", "rank 2", "broken"});
  }
}

// The runtime says devices 0 and 2 cannot reach each other: nothing is
// written through that pair, and every rank falls back saying so.
TEST(MultiDevice, APairWithoutPeerAccessFailsEveryRanksSetUpNamingIt) {
  ResetDevices reset;
  ringreduce::testing::setFakePeerAccess(0, 2, FakePeerAccess::Absent);
  const int n = 3;
  Reasons reasons(n);
  runRanks(n, [&](Transport& t, int rank) {
    std::string why;
    reasons.nulls[rank] =
        SignalGroup::setUp(rank, n, rank, smallFlags(), exchangeFor(t, 1), &why) ? 0 : 1;
    reasons.of[rank] = why;
  });
  expectEveryRankFellBackAlike(reasons, {"rank 0", "rank 2", "no peer access"});
}

// A map that fails on one rank: every rank learns it before any launch and
// none uses the shared tensors; once every rank maps an allocation, later
// collectives on it need no verdict round.
TEST(MultiDevice, TensorMapsAreAgreedBeforeAnyRankUsesThem) {
  ResetDevices reset;
  const int n = 3;
  std::vector<std::vector<float>> first(n, std::vector<float>(64)), second(n,
                                                                         std::vector<float>(64));
  std::vector<int> sharedFirst(n), sharedAgain(n), sharedSecond(n), rounds(n);
  runRanks(n, [&](Transport& t, int rank) {
    PeerMappings mappings(rank);
    TensorSharing sharing(rank, n, mappings);
    void* peers[kSignalRanks] = {};
    auto share = [&](std::vector<float>& v, uint64_t seq) {
      const ExportedRange range = exportRange(rank, v.data(), nullptr);
      return sharing.share(v.data(), range, 1, exchangeFor(t, seq), peers) ? 1 : 0;
    };
    sharedFirst[rank] = share(first[rank], 1);
    for (int q = 0; q < n; ++q) EXPECT_EQ(peers[q], first[q].data()) << q;
    sharedAgain[rank] = share(first[rank], 2);  // every map a cache hit everywhere
    if (rank == 1) ringreduce::testing::failFakeMapsOn(1);
    sharedSecond[rank] = share(second[rank], 3);
    rounds[rank] = sharing.verdictRounds();
  });
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(sharedFirst[q], 1) << q;
    EXPECT_EQ(sharedAgain[q], 1) << q;
    EXPECT_EQ(sharedSecond[q], 0) << "rank " << q << " used tensors rank 1 could not map";
    EXPECT_EQ(rounds[q], 2) << "rank " << q << ": verdict rounds";
  }
}

// The same inside a collective: the IPC two-shot, whose ranks read each
// other's tensors, goes through the buffers on every rank, exactly.
TEST(MultiDevice, AMapFailingOnOneRankSendsEveryRankThroughTheBuffers) {
  ResetDevices reset;
  const int n = 3;
  std::vector<std::vector<float>> tensors(n, std::vector<float>(3000));
  std::vector<DevicePathTaken> ran(n);
  runRanks(n, [&](Transport& t, int rank) {
    std::string why;
    auto ipc = IpcCollectives::setUp(rank, n, rank, 64 * 1024, exchangeFor(t, 1), &why);
    ASSERT_NE(ipc, nullptr) << why;
    if (rank == 2) ringreduce::testing::failFakeMapsOn(2);
    std::vector<float>& mine = tensors[rank];
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = valueOf(rank, i);
    ran[rank] = ipc->allreduce(mine.data(), mine.size(), DataType::Float32, ReduceOp::Sum,
                               DataType::Float32, DevicePathTaken::TwoShot, nullptr,
                               exchangeFor(t, 2));
    for (size_t i = 0; i < mine.size(); ++i) ASSERT_EQ(mine[i], sumOf(n, i)) << i;
    EXPECT_TRUE(ipc->close(exchangeFor(t, 3), std::chrono::seconds(10)));
  });
  for (int q = 0; q < n; ++q) EXPECT_EQ(ran[q], DevicePathTaken::Staged) << q;
}
