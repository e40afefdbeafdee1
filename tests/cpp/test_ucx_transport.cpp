// The tag layout, the bootstrap and the UCX transport between ranks
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/base/errors.h"
#include "rank_threads.h"
#include "scoped_env.h"
#include "transport/ucx/address_record.h"
#include "transport/ucx/bootstrap.h"
#include "transport/tag.h"

using namespace ringreduce;
using ringreduce::testing::runRanks;
using ringreduce::testing::smallSegments;
using ringreduce::testing::StayTogether;

TEST(Tag, LayoutKeepsFieldsApart) {
  const uint64_t tag = makeTag(5, 3, 7);
  EXPECT_EQ(tagSourceRank(tag), 5);
  EXPECT_NE(makeTag(5, 3, 7), makeTag(5, 3, 8));
  EXPECT_NE(makeTag(5, 3, 7), makeTag(5, 4, 7));
  EXPECT_NE(makeTag(5, 3, 7), makeTag(4, 3, 7));
}

namespace {
// A store that tells how many reads (gets, which wait for their key) have
// begun: a test can let a rank in once its peer waits on the store.
class StoreCountingReads : public InMemoryStore {
 public:
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++reads_;
    }
    began_.notify_all();
    return InMemoryStore::get(key, timeout);
  }
  // Waits (bounded) until `n` reads have begun.
  bool waitForReads(int n, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return began_.wait_for(lock, limit, [&] { return reads_ >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable began_;
  int reads_ = 0;
};
}  // namespace

TEST(Bootstrap, GenerationsDoNotSeeStaleAddresses) {
  StoreCountingReads store;
  const std::chrono::milliseconds timeout(2000);
  // Generation 0, both ranks: one read each.
  std::vector<uint8_t> a0{1}, b0{2};
  std::thread other([&] { exchangeAddresses(store, 1, 2, b0, timeout); });
  auto gen0 = exchangeAddresses(store, 0, 2, a0, timeout);
  other.join();
  EXPECT_EQ(gen0[1], b0);
  // A second group on the same store must wait for the new rank 1, not
  // return its old address: rank 1 joins once rank 0 reads (waits).
  std::vector<uint8_t> a1{3}, b1{4};
  std::thread late([&] {
    EXPECT_TRUE(store.waitForReads(3, std::chrono::seconds(20)))
        << "rank 0 of generation 1 did not read the store within 20 s";
    exchangeAddresses(store, 1, 2, b1, timeout);
  });
  auto gen1 = exchangeAddresses(store, 0, 2, a1, timeout);
  late.join();
  EXPECT_EQ(gen1[1], b1);
}

TEST(Bootstrap, MissingRankTimesOutWithClearMessage) {
  InMemoryStore store;
  try {
    exchangeAddresses(store, 0, 2, {1}, std::chrono::milliseconds(100));
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

TEST(UcxTransport, SendAndReceiveBothWays) {
  runRanks(2, [](Transport& t, int rank) {
    OpContext op("test", 1, std::chrono::seconds(10));
    const int peer = 1 - rank;
    std::vector<int> out(1000), in(1000, -1);
    std::iota(out.begin(), out.end(), rank * 1000);
    Request r = t.irecv(peer, makeTag(peer, 1, 0), in.data(), in.size() * sizeof(int), op);
    Request s = t.isend(peer, makeTag(rank, 1, 0), out.data(), out.size() * sizeof(int), op);
    t.wait(r, op);
    t.wait(s, op);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(in[i], peer * 1000 + i);
  });
}

TEST(UcxTransport, LargeMessageUsesRendezvousAndArrivesIntact) {
  runRanks(2, [](Transport& t, int rank) {
    OpContext op("test", 2, std::chrono::seconds(20));
    const size_t n = 8 << 20;
    std::vector<uint8_t> buffer(n);
    if (rank == 0) {
      for (size_t i = 0; i < n; ++i) buffer[i] = static_cast<uint8_t>(i * 31 + 7);
      Request s = t.isend(1, makeTag(0, 2, 0), buffer.data(), n, op);
      t.wait(s, op);
    } else {
      Request r = t.irecv(0, makeTag(0, 2, 0), buffer.data(), n, op);
      t.wait(r, op);
      for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(buffer[i], static_cast<uint8_t>(i * 31 + 7));
    }
  });
}

TEST(UcxTransport, SizeMismatchIsAnErrorNotSilentTruncation) {
  runRanks(2, [](Transport& t, int rank) {
    OpContext op("allreduce", 3, std::chrono::seconds(10));
    std::vector<char> data(64, 'x');
    if (rank == 0) {
      Request s = t.isend(1, makeTag(0, 3, 0), data.data(), 64, op);
      t.wait(s, op);
    } else {
      Request r = t.irecv(0, makeTag(0, 3, 0), data.data(), 16, op);
      try {
        t.wait(r, op);
        ADD_FAILURE() << "expected a size error";
      } catch (const TransportError& e) {
        EXPECT_NE(std::string(e.what()).find("allreduce #3"), std::string::npos) << e.what();
      }
    }
  });
}

// Waits for one byte from rank 0 in `op` (slot 0), which never comes;
// returns the message of the E the wait ends with.
template <typename E>
std::string errorOfByteFromRankZero(Transport& t, const OpContext& op) {
  char byte = 0;
  Request r = t.irecv(0, makeTag(0, op.seq, 0), &byte, 1, op);
  std::string message = "(the wait ended without an error)";
  try {
    t.wait(r, op);
  } catch (const E& e) {
    message = e.what();
  }
  t.abandonOutstanding(op);
  return message;
}

TEST(UcxTransport, TimeoutNamesOpRankAndPeer) {
  StayTogether together(2);
  runRanks(2, [&together](Transport& t, int rank) {
    auto stay = together.stay();
    if (rank != 1) return;  // rank 0 never sends
    OpContext op("broadcast", 9, std::chrono::milliseconds(300));
    const auto start = Clock::now();
    const std::string message = errorOfByteFromRankZero<TimeoutError>(t, op);
    EXPECT_NE(message.find("broadcast #9"), std::string::npos) << message;
    EXPECT_NE(message.find("on rank 1"), std::string::npos) << message;
    EXPECT_NE(message.find("from rank 0"), std::string::npos) << message;
    EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  });
}

// A rank that destroyed its transport (it said goodbye) sends nothing more:
// a receive from it fails at once, naming it, instead of at its deadline.
TEST(UcxTransport, AReceiveFromARankThatLeftFailsAtOnceNamingIt) {
  runRanks(2, [](Transport& t, int rank) {
    if (rank == 0) return;  // leaves without sending
    OpContext op("broadcast", 4, std::chrono::seconds(60));
    const auto start = Clock::now();
    const std::string message = errorOfByteFromRankZero<TransportError>(t, op);
    EXPECT_NE(message.find("broadcast #4 on rank 1: rank 0 has left the group"),
              std::string::npos) << message;
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));  // not the 60 s deadline
  });
}

// What a rank sent before it left still arrives, however late this rank
// asks for it: leaving is no error for the messages already on their way.
TEST(UcxTransport, WhatARankSentBeforeItLeftStillArrives) {
  for (size_t bytes : {size_t{8}, size_t{1} << 20}) {  // eager and rendezvous
    auto store = std::make_shared<InMemoryStore>();
    std::promise<void> left;  // rank 0's transport is gone: its goodbye was sent
    std::string zeroError;
    std::thread zero([&] {
      try {
        auto t = std::make_unique<UcxTransport>(0, 2, store, std::chrono::seconds(20),
                                                smallSegments());
        OpContext op("broadcast", 5, std::chrono::seconds(20));
        std::vector<uint8_t> data(bytes, 7);
        Request s = t->isend(1, makeTag(0, 5, 0), data.data(), bytes, op);
        t->wait(s, op);  // the rendezvous completes once rank 1 has the data
        t.reset();       // leaves
      } catch (const std::exception& e) {
        zeroError = e.what();
      }
      left.set_value();
    });
    std::vector<uint8_t> data(bytes, 0);
    try {
      UcxTransport t(1, 2, store, std::chrono::seconds(20), smallSegments());
      OpContext op("broadcast", 5, std::chrono::seconds(20));
      Request r = t.irecv(0, makeTag(0, 5, 0), data.data(), bytes, op);
      if (bytes <= 8) {
        // Eager: the message is here before rank 0 even left; ask late,
        // once rank 0 has left, without progressing in between, so that
        // this rank learns of the data and of the goodbye in the same wait.
        EXPECT_EQ(left.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready)
            << "rank 0 did not leave within 30 s";
      }
      t.wait(r, op);
    } catch (const std::exception& e) {
      ADD_FAILURE() << bytes << " bytes: rank 1 threw: " << e.what();
    }
    zero.join();
    EXPECT_EQ(zeroError, "") << bytes << " bytes";
    EXPECT_EQ(data, std::vector<uint8_t>(bytes, 7)) << bytes << " bytes";
  }
}

namespace {
// A record's bytes: its header (the layout's magic, a host, the two
// lengths it claims), then `tail`.
std::vector<uint8_t> recordBytes(uint32_t dataLength, uint32_t monitorLength,
                                 const std::vector<uint8_t>& tail) {
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(kAddressRecordMagic >> (8 * i)));
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(i + 1));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(dataLength >> (8 * i)));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(monitorLength >> (8 * i)));
  bytes.insert(bytes.end(), tail.begin(), tail.end());
  return bytes;
}

std::string unpackError(const std::vector<uint8_t>& bytes, int peer) {
  try {
    unpackAddressRecord(bytes.data(), bytes.size(), peer);
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(AddressRecord, RoundTripsWithWhatMustAgree) {
  const AddressRecord record{{1, 2, 3}, {9, 8}, 0x0123456789abcdefull, "A=1\nB=two\n"};
  const auto blob = packAddressRecord(record);
  const AddressRecord back = unpackAddressRecord(blob.data(), blob.size(), 0);
  EXPECT_EQ(back.data, record.data);
  EXPECT_EQ(back.monitor, record.monitor);
  EXPECT_EQ(back.host, record.host);
  EXPECT_EQ(back.agreed, record.agreed);
  const AddressRecord noMonitor{{4}, {}, 7, ""};
  const auto small = packAddressRecord(noMonitor);
  const AddressRecord again = unpackAddressRecord(small.data(), small.size(), 0);
  EXPECT_EQ(again.data, noMonitor.data);
  EXPECT_TRUE(again.monitor.empty());
  EXPECT_TRUE(again.agreed.empty());
}

TEST(AddressRecord, MalformedRecordsFailNamingTheRank) {
  EXPECT_NE(unpackError({1, 2, 3}, 2), "");                           // shorter than a header
  EXPECT_NE(unpackError(recordBytes(0, 0, {7}), 2), "");             // no data address
  EXPECT_NE(unpackError(recordBytes(200, 0, {1, 2}), 5).find("malformed address record of rank 5"),
            std::string::npos);                                        // claims 200 bytes, has 2
  EXPECT_NE(unpackError(recordBytes(2, 5, {1, 2, 3}), 3), "");        // the monitor's overruns
  EXPECT_NE(unpackError(recordBytes(1, 0xffffffffu, {1}), 3), "");    // a length that wraps
  EXPECT_EQ(unpackError(recordBytes(2, 1, {1, 2, 3, 'x'}), 3), "");   // data, monitor, agreed
}

TEST(AddressRecord, ARecordOfAnotherLayoutNamesAnotherBuild) {
  // The layout before the magic: [host : 8][data length : 4][data][monitor].
  const std::vector<uint8_t> older = {1, 2, 3, 4, 5, 6, 7, 8, 3, 0, 0, 0, 1, 2, 3};
  const std::string error = unpackError(older, 4);
  EXPECT_NE(error.find("rank 4 published an address record of another layout"),
            std::string::npos) << error;
  EXPECT_NE(error.find("another build of torch_ringreduce"), std::string::npos) << error;
}

namespace {
// Anonymous memory of its own mapping: once unmapped, a late write or read
// of it faults at once (a heap block would be written silently).
struct Mapped {
  explicit Mapped(size_t n) : bytes(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  void unmap() {
    if (data != nullptr) munmap(data, bytes);
    data = nullptr;
  }
  ~Mapped() { unmap(); }
  size_t bytes;
  uint8_t* data;
};
}  // namespace

// A failed operation abandons its messages still on their way, and its
// caller then frees their memory. A receive UCX has already matched cannot
// be cancelled: its remaining fragments would land in freed memory.
TEST(UcxTransport, AnAbandonedReceiveWritesNothingOnceAbandonReturned) {
  // UCX over TCP (the transport of a cluster without shared memory between
  // the ranks): a large message moves in fragments over many progress calls.
  ScopedEnv tcp("UCX_TLS", "tcp,self");
  StayTogether together(2);
  runRanks(2, [&](Transport& t, int rank) {
    auto stay = together.stay();
    OpContext op("allreduce", 6, std::chrono::seconds(20));
    const size_t n = size_t{64} << 20;
    Mapped buffer(n);
    ASSERT_NE(buffer.data, nullptr);
    if (rank == 0) {
      std::memset(buffer.data, 7, n);
      Request s = t.isend(1, makeTag(0, 6, 0), buffer.data, n, op);
      t.wait(s, op);
      return;
    }
    Request r = t.irecv(0, makeTag(0, 6, 0), buffer.data, n, op);
    const auto limit = Clock::now() + std::chrono::seconds(20);
    while (buffer.data[0] != 7 && Clock::now() < limit) t.progress();
    ASSERT_EQ(buffer.data[0], 7) << "nothing arrived";
    ASSERT_FALSE(t.test(r, op)) << "the whole message came in one pass: nothing to abandon";
    t.abandon(r);
    // Its sender is alive: the message ran to its end before abandon returned.
    EXPECT_EQ(buffer.data[n - 1], 7) << "abandon returned before the message's last fragment";
    buffer.unmap();
    // Without that, the next passes of progress wrote the unmapped pages.
    const auto after = Clock::now() + std::chrono::milliseconds(500);
    while (Clock::now() < after) t.progress();
  });
}

// The same for a send over shared memory without cma (a container that
// forbids it): UCX cannot take back a send it has accepted, and copies its
// remaining fragments out of the buffer as its receiver asks for them.
TEST(UcxTransport, AnAbandonedSendReadsNothingOnceAbandonReturned) {
  ScopedEnv posix("UCX_TLS", "posix,self");
  StayTogether together(2);
  const size_t n = size_t{64} << 20;
  runRanks(2, [&](Transport& t, int rank) {
    auto stay = together.stay();
    OpContext op("allreduce", 7, std::chrono::seconds(20));
    Mapped buffer(n);
    ASSERT_NE(buffer.data, nullptr);
    if (rank == 1) {
      Request r = t.irecv(0, makeTag(0, 7, 0), buffer.data, n, op);
      t.wait(r, op);  // the message is whole, read before the sender unmapped it
      EXPECT_EQ(buffer.data[n - 1], 7);
      return;
    }
    std::memset(buffer.data, 7, n);
    Request s = t.isend(1, makeTag(0, 7, 0), buffer.data, n, op);
    for (int i = 0; i < 50; ++i) t.progress();
    t.abandon(s);
    buffer.unmap();
    // Without that, the next passes of progress read the unmapped pages.
    const auto after = Clock::now() + std::chrono::milliseconds(500);
    while (Clock::now() < after) t.progress();
  });
}
