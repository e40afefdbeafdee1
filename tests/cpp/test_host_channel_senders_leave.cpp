// The ranks that read nothing of their peers in a collective's last turn (a
// broadcast's and a scatter's root, a gather's and a reduce's other ranks)
// leave it once their bytes are up, without waiting for the ranks that read
// them (exchangeTurn's readsPeers, HostChannel::oweWait): the readers still
// get every byte, however late they come; the sender's next turn waits for
// them before it writes its buffer again; and a reader that never comes, ran
// another collective, left or was aborted fails the sender's next collective,
// naming the one it was owed for.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/host_channel/allreduce.h"
#include "algorithms/host_channel/barrier.h"
#include "algorithms/host_channel/broadcast.h"
#include "algorithms/host_channel/gather.h"
#include "algorithms/host_channel/reduce.h"
#include "host_channel_ranks.h"

namespace ringreduce {
namespace {

using namespace channel_test;

constexpr int kRoot = 1;

// One rooted collective of `bytes` per rank (a multiple of 4) on rank r, and
// whether r only sends in it (leaves without waiting for its readers).
struct Rooted {
  const char* name;
  std::function<bool(int r)> sendsOnly;
  // Runs it; returns what rank r ends with (its output, or its data).
  std::function<std::vector<int32_t>(const Comm&, const OpContext&, int r, int n, size_t bytes)>
      run;
  // What rank r must end with.
  std::function<std::vector<int32_t>(int r, int n, size_t bytes)> expected;
};

std::vector<int32_t> valuesOf(int r, size_t count, int salt = 0) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>(i * 3 + r * 1000 + salt + 1);
  return v;
}

std::vector<Rooted> rootedCollectives() {
  return {
      {"broadcast", [](int r) { return r == kRoot; },
       [](const Comm& c, const OpContext& op, int r, int, size_t bytes) {
         std::vector<int32_t> data = valuesOf(r, bytes / 4);
         hostChannelBroadcast(c, op, {data.data(), bytes, kRoot});
         return data;
       },
       [](int, int, size_t bytes) { return valuesOf(kRoot, bytes / 4); }},
      {"scatter", [](int r) { return r == kRoot; },
       [](const Comm& c, const OpContext& op, int r, int n, size_t bytes) {
         const std::vector<int32_t> in = valuesOf(r, bytes / 4 * static_cast<size_t>(n));
         std::vector<int32_t> out(bytes / 4, -1);
         hostChannelScatter(c, op, {in.data(), out.data(), bytes, kRoot});
         return out;
       },
       [](int r, int n, size_t bytes) {
         const std::vector<int32_t> all = valuesOf(kRoot, bytes / 4 * static_cast<size_t>(n));
         const auto first = all.begin() + static_cast<std::ptrdiff_t>(bytes / 4 * r);
         return std::vector<int32_t>(first, first + static_cast<std::ptrdiff_t>(bytes / 4));
       }},
      {"gather", [](int r) { return r != kRoot; },
       [](const Comm& c, const OpContext& op, int r, int n, size_t bytes) {
         const std::vector<int32_t> in = valuesOf(r, bytes / 4);
         std::vector<int32_t> out(r == kRoot ? bytes / 4 * static_cast<size_t>(n) : 0, -1);
         hostChannelGather(c, op, {in.data(), out.data(), bytes, kRoot});
         return out;
       },
       [](int r, int n, size_t bytes) {
         std::vector<int32_t> all;
         for (int q = 0; r == kRoot && q < n; ++q) {
           const std::vector<int32_t> theirs = valuesOf(q, bytes / 4);
           all.insert(all.end(), theirs.begin(), theirs.end());
         }
         return all;
       }},
      {"reduce", [](int r) { return r != kRoot; },
       [](const Comm& c, const OpContext& op, int r, int, size_t bytes) {
         std::vector<int32_t> data = valuesOf(r, bytes / 4);
         hostChannelReduce(c, op, {data.data(), bytes / 4, DataType::Int32, ReduceOp::Sum}, kRoot);
         return data;
       },
       [](int r, int n, size_t bytes) {
         if (r != kRoot) return valuesOf(r, bytes / 4);  // the others keep theirs
         std::vector<int32_t> sum(bytes / 4, 0);
         for (int q = 0; q < n; ++q) {
           const std::vector<int32_t> theirs = valuesOf(q, bytes / 4);
           for (size_t i = 0; i < sum.size(); ++i) sum[i] += theirs[i];
         }
         return sum;
       }},
  };
}

// The senders finish before any reader calls (they wait for the senders'
// word, which a sender that waited for its readers would never give), then
// every rank's allreduce, whose first turn the senders may take only once
// the readers have read: every rank ends with what the collective gives.
// Messages of one turn (in several the senders wait for the readers in all
// but the last: GatherAndScatterMoveEqualBlocksToAndFromAnyRoot and the
// others in test_host_channel_collectives.cpp), world 2 and 3.
TEST(HostChannelSendersLeave, ReadersThatComeAfterTheSendersLeftGetEveryByte) {
  for (const Rooted& test : rootedCollectives()) {
    for (const int n : {2, 3}) {
      for (const size_t bytes : {size_t{64}, size_t{1024}}) {
        Ranks ranks(n);
        std::atomic<int> sendersDone{0};
        int senders = 0;
        for (int r = 0; r < n; ++r) senders += test.sendsOnly(r) ? 1 : 0;
        const auto errors = ranks.run([&](int r) {
          const Comm comm = ranks.comm(r);
          if (!test.sendsOnly(r)) {
            while (sendersDone.load() < senders) std::this_thread::yield();
          }
          const std::vector<int32_t> got = test.run(comm, ranks.enter(r, test.name, 1, 5), r, n, bytes);
          if (test.sendsOnly(r)) sendersDone.fetch_add(1);
          EXPECT_EQ(got, test.expected(r, n, bytes))
              << test.name << ", world " << n << ", " << bytes << " B, rank " << r;
          std::vector<int32_t> ones(16, 1);
          hostChannelAllreduce(comm, ranks.enter(r, "allreduce", 2, 6),
                               {ones.data(), ones.size(), DataType::Int32, ReduceOp::Sum});
          EXPECT_EQ(ones, std::vector<int32_t>(16, n)) << test.name << ", rank " << r;
        });
        expectNoErrors(errors);
      }
    }
  }
}

// A root that broadcasts again and again, one whole buffer each time (every
// turn at the buffer's start), while its receiver takes its time before each
// read: the root's next broadcast waits until the receiver has read the one
// before, so no message is overwritten before it is read.
TEST(HostChannelSendersLeave, ASenderRewritesItsBufferOnlyOnceItsReadersHaveReadIt) {
  Ranks ranks(2);
  constexpr int kBroadcasts = 12;
  const auto errors = ranks.run([&](int r) {
    const Comm comm = ranks.comm(r);
    for (int k = 1; k <= kBroadcasts; ++k) {
      std::vector<int32_t> data = valuesOf(r, kBufferBytes / 4, k * 7);
      if (r != kRoot) std::this_thread::sleep_for(2ms);
      hostChannelBroadcast(comm, ranks.enter(r, "broadcast", static_cast<uint64_t>(k), 5),
                           {data.data(), kBufferBytes, kRoot});
      ASSERT_EQ(data, valuesOf(kRoot, kBufferBytes / 4, k * 7)) << "broadcast " << k << ", rank " << r;
    }
  });
  expectNoErrors(errors);
}

// Runs rank kRoot's broadcast #1 (which returns) and then its barrier #2,
// which fails; `reader` is what rank 0 does meanwhile. The barrier's error.
std::string rootsNextCollectiveAfter(Ranks& ranks, const std::function<void(int)>& reader,
                                     std::chrono::milliseconds limit = 20s) {
  const auto errors = ranks.run([&](int r) {
    if (r != kRoot) return reader(r);
    std::vector<int32_t> data = valuesOf(r, 16);
    hostChannelBroadcast(ranks.comm(r), ranks.enter(r, "broadcast", 1, 5), {data.data(), 64, kRoot});
    hostChannelBarrier(ranks.comm(r), ranks.enter(r, "barrier", 2, 9, limit));
  });
  return errors[kRoot];
}

TEST(HostChannelSendersLeave, AReaderThatNeverComesTimesOutTheSendersNextCollective) {
  Ranks ranks(2, 0us);
  const std::string error = rootsNextCollectiveAfter(ranks, [](int) {}, 300ms);
  EXPECT_NE(error.find("broadcast #1 timed out after 300 ms on rank 1"), std::string::npos) << error;
  EXPECT_NE(error.find("rank(s) not seen in broadcast #1: 0"), std::string::npos) << error;
  EXPECT_NE(error.find("; raised by barrier #2, which did not run"), std::string::npos) << error;
}

TEST(HostChannelSendersLeave, AReaderInAnotherCollectiveFailsTheSendersNextOneAsAMismatch) {
  Ranks ranks(2);
  std::string readerError;
  const std::string error = rootsNextCollectiveAfter(ranks, [&](int r) {
    std::vector<int32_t> data(16), gathered(32);
    try {
      hostChannelAllreduce(ranks.comm(r), ranks.enter(r, "allreduce", 1, 11),
                           {data.data(), data.size(), DataType::Int32, ReduceOp::Sum});
    } catch (const std::exception& e) {
      readerError = e.what();
    }
  });
  EXPECT_NE(readerError.find("allreduce #1 on rank 0: rank 1 is in a different collective"),
            std::string::npos)
      << readerError;
  EXPECT_NE(error.find("broadcast #1 on rank 1: rank 0 is in a different collective: it is in "
                       "op-11 #1"),
            std::string::npos)
      << error;
}

// Two ranks that both only send, in different collectives (each thinks it
// is a broadcast's root), both leave them; at their next collective each
// finds the other's word of that turn differ, and names the call that
// differed, not the one the peer is in now.
TEST(HostChannelSendersLeave, TwoSendersInDifferentCollectivesNameTheCallThatDiffered) {
  Ranks ranks(2);
  std::atomic<int> sent{0}, entered{0};
  const auto errors = ranks.run([&](int r) {
    std::vector<int32_t> data = valuesOf(r, 16);
    hostChannelBroadcast(ranks.comm(r), ranks.enter(r, "broadcast", 1, r == 0 ? 5 : 7),
                         {data.data(), 64, r});
    EXPECT_EQ(data, valuesOf(r, 16)) << "a root keeps its data, rank " << r;
    sent.fetch_add(1);
    while (sent.load() < 2) std::this_thread::yield();
    const OpContext next = ranks.enter(r, "allreduce", 2, 6);
    entered.fetch_add(1);
    while (entered.load() < 2) std::this_thread::yield();  // both announced #2
    std::vector<int32_t> ones(16, 1);
    hostChannelAllreduce(ranks.comm(r), next, {ones.data(), ones.size(), DataType::Int32, ReduceOp::Sum});
  });
  EXPECT_NE(errors[0].find("broadcast #1 on rank 0: rank 1 is in a different collective: it ran "
                           "another as #1 (the operation, dtype, size, reduce op or root differ) "
                           "and since then is in op-6 #2; raised by allreduce #2, which did not run"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("broadcast #1 on rank 1: rank 0 is in a different collective: it ran "
                           "another as #1"),
            std::string::npos)
      << errors[1];
}

TEST(HostChannelSendersLeave, AReaderThatLeftWithoutComingFailsTheSendersNextCollective) {
  Ranks ranks(2, 0us);
  const std::string error = rootsNextCollectiveAfter(ranks, [&](int r) {
    while (!ranks.channel(kRoot).asleep(kRoot)) std::this_thread::yield();
    ranks.leave(r);
  });
  EXPECT_NE(error.find("broadcast #1 on rank 1: rank 0 has left the group"), std::string::npos)
      << error;
}

TEST(HostChannelSendersLeave, AnAbortEndsTheWaitTheSenderOwes) {
  Ranks ranks(2, 0us);
  const std::string error = rootsNextCollectiveAfter(ranks, [&](int) {
    while (!ranks.channel(kRoot).asleep(kRoot)) std::this_thread::yield();
    ranks.channel(kRoot).abort("process group 'g' was aborted on rank 1");
  });
  EXPECT_NE(error.find("broadcast #1 on rank 1: process group 'g' was aborted on rank 1"),
            std::string::npos)
      << error;
}

// A run that only publishes ahead (an asynchronous caller whose peers have
// not come yet) must not wait: where the wait owed is not settled it throws
// rather than block (the engine then queues the collective without one),
// and once the readers have come it pays it and publishes.
TEST(HostChannelSendersLeave, PublishingAheadNeverWaitsForAnOwedWait) {
  Ranks ranks(2);
  std::atomic<bool> refused{false};
  const auto errors = ranks.run([&](int r) {
    const Comm comm = ranks.comm(r);
    std::vector<int32_t> data = valuesOf(r, 16);
    if (r != kRoot) {
      while (!refused.load()) std::this_thread::yield();
    }
    hostChannelBroadcast(comm, ranks.enter(r, "broadcast", 1, 5), {data.data(), 64, kRoot});
    std::vector<int32_t> ones(16, 1);
    const OpContext op = ranks.enter(r, "allreduce", 2, 6);
    const ReductionArgs args{ones.data(), ones.size(), DataType::Int32, ReduceOp::Sum};
    if (r == kRoot) {
      EXPECT_TRUE(ranks.channel(r).owesUnsettledWait());
      OpContext ahead = op;
      PublishedAhead published;
      ahead.ahead = &published;
      EXPECT_THROW(hostChannelAllreduce(comm, ahead, args), Error);
      EXPECT_FALSE(published.published);
      refused.store(true);
      while (ranks.channel(r).owesUnsettledWait()) std::this_thread::yield();
      PublishedAhead again;
      ahead.ahead = &again;
      hostChannelAllreduce(comm, ahead, args);
      EXPECT_TRUE(again.published);
      EXPECT_FALSE(ranks.channel(r).owesWait());
    }
    hostChannelAllreduce(comm, op, args);
    EXPECT_EQ(ones, std::vector<int32_t>(16, 2)) << "rank " << r;
  });
  expectNoErrors(errors);
}

}  // namespace
}  // namespace ringreduce
