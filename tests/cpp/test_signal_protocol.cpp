// The device-flags protocol (csrc/cuda/signal/) on the host: the block
// bodies and the barrier the kernels run, with ranks x blocks threads, the
// host memory policy (atomic_ref acquire/release, random delays) and
// host memory standing for the IPC regions. Built twice: in the plain test
// binary and under ThreadSanitizer (CMakeLists.txt), where a buffer reused
// too early, a missing acquire or a count read out of order is a reported
// data race, not just a wrong number.
//
// What it shows: every collective gives exact results over many back-to-back
// rounds while ranks drift (one a collective ahead, blocks late to every
// barrier) and grids change size between collectives; a replayed collective
// (same arguments, counters never reset, as a CUDA graph replays it) stays
// right; a rank that never arrives is reported as a timeout naming it; a
// rank running another collective is reported as a mismatch at once, by
// every rank, not after the timeout; the host's stop word ends every wait.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/math/element_math.h"
#include "cuda/signal/signal_collectives.h"
#include "host_signal_memory.h"

using namespace ringreduce;
using namespace ringreduce::cuda;
using ringreduce::testing::HostSignalMemory;

namespace {

constexpr uint64_t kLongTimeoutNs = 60ull * 1000 * 1000 * 1000;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// The regions, host words and status slots of one group of ranks.
class HostGroup {
 public:
  HostGroup(int n, size_t bufferBytes) : n_(n), bufferBytes_(bufferBytes), status_(n) {
    const size_t bytes = signalRegionBytes(bufferBytes);
    for (int r = 0; r < n; ++r) {
      void* p = std::aligned_alloc(4096, bytes);
      std::memset(p, 0, bytes);
      regions_.emplace_back(p);
      for (auto& s : status_[r]) s = SignalStatus{0, 0};
    }
  }

  int size() const { return n_; }
  size_t bufferBytes() const { return bufferBytes_; }

  SignalView view(int rank, uint32_t fingerprint, uint64_t timeoutNs) {
    SignalView v;
    for (int p = 0; p < n_; ++p) v.regions[p] = regions_[p].get();
    v.status = status_[rank].data();
    v.bufferBytes = bufferBytes_;
    v.timeoutNs = timeoutNs;
    v.fingerprint = fingerprint;
    v.rank = rank;
    v.nranks = n_;
    return v;
  }

  // Rank `rank`'s kernel: op.nblocks threads, one per block, joined (the
  // next kernel on a stream starts after the previous one has finished).
  template <typename T, class Op = SumOp>
  void launch(int rank, const SignalOp& op, uint32_t fingerprint, uint32_t seed, int jitterUs,
              uint64_t timeoutNs = kLongTimeoutNs) {
    const SignalView v = view(rank, fingerprint, timeoutNs);
    std::vector<std::thread> blocks;
    for (int b = 0; b < op.nblocks; ++b) {
      blocks.emplace_back([=] {
        HostSignalMemory m(seed * 131 + static_cast<uint32_t>(b), jitterUs);
        runSignalBlock<HostSignalMemory, T, T, Op>(m, v, op, b);
      });
    }
    for (auto& t : blocks) t.join();
  }

  // The failures rank `rank`'s blocks reported, as "Timeout(peer 2)".
  std::vector<std::string> failures(int rank) {
    std::vector<std::string> out;
    for (const SignalStatus& s : status_[rank]) {
      const uint64_t word = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(s.word)).load();
      if (statusFailure(word) == SignalFailure::None) continue;
      static const char* names[] = {"None", "Timeout", "Mismatch", "PeerFailed", "Stopped"};
      out.push_back(std::string(names[static_cast<int>(statusFailure(word))]) + "(peer " +
                    std::to_string(statusPeer(word)) + ")");
    }
    return out;
  }

  // What the host does through its side stream.
  void stop(int rank) {
    std::atomic_ref<uint32_t>(static_cast<SignalPad*>(regions_[rank].get())->stop).store(1);
  }

 private:
  int n_;
  size_t bufferBytes_;
  std::vector<std::unique_ptr<void, FreeDeleter>> regions_;
  std::vector<std::array<SignalStatus, kSignalBlocks>> status_;
};

// One thread per rank; the ranks' collectives run in issue order on each.
void eachRank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) ranks.emplace_back([&, r] { body(r); });
  for (auto& t : ranks) t.join();
}

// Small integers: every sum is exact in float and int64.
template <typename T>
T valueOf(int rank, int round, size_t i) {
  return static_cast<T>(static_cast<int>((rank * 7 + round * 5 + i * 3) % 13) - 6);
}

template <typename T>
std::vector<T> inputOf(int rank, int round, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = valueOf<T>(rank, round, i);
  return v;
}

template <typename T>
T sumOf(int n, int round, size_t i) {
  T s = 0;
  for (int r = 0; r < n; ++r) s += valueOf<T>(r, round, i);
  return s;
}

// A size for round `round` that changes the grid from round to round:
// 1 to 4 blocks, element counts that are not multiples of a vector.
size_t countOf(int round, size_t capacity) {
  static const size_t sizes[] = {1, 7, 33, 64, 257, 1000, 4099};
  return std::min(sizes[round % 7] + static_cast<size_t>(round), capacity);
}

SignalOp allreduceOp(SignalKind kind, const void* in, void* out, size_t count, int round) {
  SignalOp op;
  op.kind = kind;
  op.input = in;
  op.output = out;
  op.count = count;
  op.nblocks = 1 + round % 4;
  op.aligned = packAligned(in) && packAligned(out);
  return op;
}

class SignalProtocol : public ::testing::TestWithParam<std::tuple<SignalKind, int>> {};

// Many rounds, drifting ranks, changing grids, in place and out of place:
// every element exact on every rank every round.
TEST_P(SignalProtocol, AllreduceStaysExactOverManyRounds) {
  const auto [kind, n] = GetParam();
  constexpr int kRounds = 24;
  HostGroup group(n, 64 * 1024);
  std::vector<std::string> errors(n);
  eachRank(n, [&](int rank) {
    for (int round = 0; round < kRounds; ++round) {
      const size_t count = countOf(round, group.bufferBytes() / sizeof(float));
      std::vector<float> data = inputOf<float>(rank, round, count);
      std::vector<float> out(count, -99.f);
      const bool inPlace = round % 2 == 0;
      const SignalOp op = allreduceOp(kind, data.data(), inPlace ? data.data() : out.data(),
                                      count, round);
      group.launch<float>(rank, op, 0x1000u + round, rank * 1000u + round, 200);
      const std::vector<float>& result = inPlace ? data : out;
      for (size_t i = 0; i < count; ++i) {
        if (result[i] != sumOf<float>(n, round, i) && errors[rank].empty()) {
          errors[rank] = "round " + std::to_string(round) + " element " + std::to_string(i) +
                         ": " + std::to_string(result[i]);
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_TRUE(group.failures(r).empty()) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    KindsAndWorlds, SignalProtocol,
    ::testing::Combine(::testing::Values(SignalKind::OneShot, SignalKind::TwoShot),
                       ::testing::Values(1, 2, 3, 4)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == SignalKind::OneShot ? "OneShot" : "TwoShot") +
             "World" + std::to_string(std::get<1>(info.param));
    });

// AVG and MAX on integers (AVG truncates toward zero), two-shot.
TEST(SignalProtocolOps, AverageAndMaxOfIntegers) {
  constexpr int n = 3;
  HostGroup group(n, 16 * 1024);
  std::vector<std::string> errors(n);
  eachRank(n, [&](int rank) {
    for (int round = 0; round < 6; ++round) {
      const size_t count = countOf(round, 1000);
      std::vector<int64_t> data = inputOf<int64_t>(rank, round, count);
      SignalOp op = allreduceOp(SignalKind::TwoShot, data.data(), data.data(), count, round);
      const bool avg = round % 2 == 0;
      if (avg) {
        op.avgDivisor = n;
        group.launch<int64_t, SumOp>(rank, op, 7, rank + 10u * round, 100);
      } else {
        group.launch<int64_t, MaxOp>(rank, op, 8, rank + 10u * round, 100);
      }
      for (size_t i = 0; i < count; ++i) {
        int64_t expected = avg ? sumOf<int64_t>(n, round, i) / n : valueOf<int64_t>(0, round, i);
        if (!avg) {
          for (int r = 1; r < n; ++r) expected = std::max(expected, valueOf<int64_t>(r, round, i));
        }
        if (data[i] != expected && errors[rank].empty()) {
          errors[rank] = "round " + std::to_string(round) + " element " + std::to_string(i);
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// The ranks' own tensors, mapped (here: each other's host arrays).
TEST(SignalProtocolOps, InPlaceTwoShotOnTheRanksTensors) {
  constexpr int n = 4;
  HostGroup group(n, 4096);
  std::vector<std::vector<float>> tensors(n);
  std::vector<std::string> errors(n);
  for (int round = 0; round < 8; ++round) {
    const size_t count = countOf(round, 5000) + 3;
    for (int r = 0; r < n; ++r) tensors[r] = inputOf<float>(r, round, count);
    eachRank(n, [&](int rank) {
      SignalOp op = allreduceOp(SignalKind::InPlaceTwoShot, tensors[rank].data(),
                                tensors[rank].data(), count, round);
      for (int p = 0; p < n; ++p) op.tensors[p] = tensors[p].data();
      group.launch<float>(rank, op, 99, rank + 31u * round, 200);
      for (size_t i = 0; i < count; ++i) {
        if (tensors[rank][i] != sumOf<float>(n, round, i) && errors[rank].empty()) {
          errors[rank] = "round " + std::to_string(round) + " element " + std::to_string(i);
        }
      }
    });
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(SignalProtocolOps, AllgatherAndReduceScatterAlternate) {
  constexpr int n = 3;
  HostGroup group(n, 32 * 1024);
  std::vector<std::string> errors(n);
  eachRank(n, [&](int rank) {
    for (int round = 0; round < 12; ++round) {
      const size_t per = countOf(round, 2000);
      SignalOp op;
      op.count = per;
      op.nblocks = 1 + round % 3;
      if (round % 2 == 0) {
        std::vector<float> in = inputOf<float>(rank, round, per);
        std::vector<float> out(per * n, -1.f);
        op.kind = SignalKind::Allgather;
        op.input = in.data();
        op.output = out.data();
        group.launch<float>(rank, op, 5, rank * 77u + round, 150);
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < per; ++i) {
            if (out[p * per + i] != valueOf<float>(p, round, i) && errors[rank].empty()) {
              errors[rank] = "allgather round " + std::to_string(round);
            }
          }
        }
      } else {
        // Rank r's input holds n blocks; block q of every rank sums into rank q.
        std::vector<float> in(per * n);
        for (int q = 0; q < n; ++q) {
          for (size_t i = 0; i < per; ++i) in[q * per + i] = valueOf<float>(rank, round + q, i);
        }
        std::vector<float> out(per, -1.f);
        op.kind = SignalKind::ReduceScatter;
        op.input = in.data();
        op.output = out.data();
        group.launch<float>(rank, op, 6, rank * 77u + round, 150);
        for (size_t i = 0; i < per; ++i) {
          if (out[i] != sumOf<float>(n, round + rank, i) && errors[rank].empty()) {
            errors[rank] = "reduce-scatter round " + std::to_string(round);
          }
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A CUDA graph replays the same kernel arguments; the counts in the pads
// are never reset, so each replay is the next collective.
TEST(SignalProtocolOps, ReplayingTheSameArgumentsContinuesTheCount) {
  constexpr int n = 2;
  HostGroup group(n, 8192);
  std::vector<std::vector<float>> data(n, std::vector<float>(1500));
  std::vector<SignalOp> ops(n);
  for (int r = 0; r < n; ++r) {
    ops[r] = allreduceOp(SignalKind::OneShot, data[r].data(), data[r].data(), 1500, 3);
  }
  std::vector<std::string> errors(n);
  eachRank(n, [&](int rank) {
    for (int replay = 0; replay < 30; ++replay) {
      // The graph's input, rewritten in place (the captured pointer stays).
      const std::vector<float> input = inputOf<float>(rank, replay, 1500);
      std::copy(input.begin(), input.end(), data[rank].begin());
      group.launch<float>(rank, ops[rank], 42, rank * 5u + replay, 300);
      for (size_t i = 0; i < 1500; ++i) {
        if (data[rank][i] != sumOf<float>(n, replay, i) && errors[rank].empty()) {
          errors[rank] = "replay " + std::to_string(replay);
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Rank 0 runs free; rank 1 is slow before every collective, so rank 0 is
// always a collective ahead at the barrier, writing the other parity slot.
TEST(SignalProtocolOps, ARankOneCollectiveAheadNeverCorruptsTheOther) {
  constexpr int n = 2;
  HostGroup group(n, 8192);
  std::vector<std::string> errors(n);
  eachRank(n, [&](int rank) {
    for (int round = 0; round < 20; ++round) {
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::vector<float> data = inputOf<float>(rank, round, 700);
      const SignalOp op = allreduceOp(round % 2 ? SignalKind::TwoShot : SignalKind::OneShot,
                                      data.data(), data.data(), 700, 1);
      group.launch<float>(rank, op, 11, rank + 3u * round, 0);
      for (size_t i = 0; i < 700; ++i) {
        if (data[i] != sumOf<float>(n, round, i) && errors[rank].empty()) {
          errors[rank] = "round " + std::to_string(round);
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Rank 2 never runs collective 2: ranks 0 and 1 give up after the timeout,
// naming rank 2, and refuse every later collective at once.
TEST(SignalProtocolFailures, AMissingRankIsATimeoutNamingIt) {
  constexpr int n = 3;
  HostGroup group(n, 4096);
  std::vector<float> data[n];
  eachRank(n, [&](int rank) {
    data[rank].assign(100, 1.f);
    SignalOp op = allreduceOp(SignalKind::OneShot, data[rank].data(), data[rank].data(), 100, 1);
    group.launch<float>(rank, op, 1, rank, 0, 200'000'000);
    if (rank == 2) return;
    const auto started = std::chrono::steady_clock::now();
    group.launch<float>(rank, op, 1, rank, 0, 200'000'000);
    const auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_GE(waited, std::chrono::milliseconds(150)) << "gave up before the deadline";
    data[rank].assign(100, 7.f);
    group.launch<float>(rank, op, 1, rank, 0, 200'000'000);  // refused: not run
    EXPECT_EQ(data[rank][0], 7.f);
  });
  for (int r = 0; r < 2; ++r) {
    const auto failures = group.failures(r);
    ASSERT_FALSE(failures.empty()) << "rank " << r;
    EXPECT_TRUE(std::find(failures.begin(), failures.end(), "Timeout(peer 2)") != failures.end() ||
                std::find(failures.begin(), failures.end(),
                          "PeerFailed(peer " + std::to_string(1 - r) + ")") != failures.end())
        << "rank " << r << ": " << failures[0];
  }
  EXPECT_TRUE(group.failures(2).empty());
}

// Rank 1 runs another collective (another fingerprint) as collective 2:
// both ranks report the mismatch long before the (long) deadline.
TEST(SignalProtocolFailures, AnotherCollectiveIsAMismatchAtOnce) {
  constexpr int n = 2;
  HostGroup group(n, 8192);
  const auto started = std::chrono::steady_clock::now();
  eachRank(n, [&](int rank) {
    std::vector<float> data(2000, 1.f);
    SignalOp op = allreduceOp(SignalKind::TwoShot, data.data(), data.data(), 2000, 3);
    group.launch<float>(rank, op, 100, rank, 50);
    group.launch<float>(rank, op, rank == 0 ? 200 : 201, rank, 50);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  for (int r = 0; r < n; ++r) {
    const auto failures = group.failures(r);
    ASSERT_FALSE(failures.empty()) << "rank " << r;
    for (const std::string& f : failures) {
      EXPECT_TRUE(f == "Mismatch(peer " + std::to_string(1 - r) + ")" ||
                  f == "PeerFailed(peer " + std::to_string(1 - r) + ")")
          << "rank " << r << ": " << f;
    }
  }
}

// The host's stop word ends a wait that no peer would end.
TEST(SignalProtocolFailures, TheHostStopWordEndsTheWait) {
  constexpr int n = 2;
  HostGroup group(n, 4096);
  std::vector<float> data(64, 1.f);
  const SignalOp op = allreduceOp(SignalKind::OneShot, data.data(), data.data(), 64, 0);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    group.stop(0);
  });
  group.launch<float>(0, op, 3, 0, 0);  // rank 1 never comes
  stopper.join();
  ASSERT_EQ(group.failures(0), std::vector<std::string>{"Stopped(peer 1)"});
}

TEST(SignalProtocolOps, BlockPartsTileTheRangeOnVectorBoundaries) {
  for (size_t count : {0, 1, 7, 8, 9, 100, 4099}) {
    for (int parts : {1, 2, 3, 8, 64}) {
      size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const ElementRange r = alignedPart(count, parts, i, 4);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.begin, r.end);
        if (r.begin < count) {
          EXPECT_EQ(r.begin % 4, 0u);
        }
        next = r.end;
      }
      EXPECT_EQ(next, count) << count << " in " << parts;
    }
  }
}

}  // namespace
