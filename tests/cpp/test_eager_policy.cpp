// Which sends go eagerly (transport/ucx/eager_policy.h): the policy read
// from UCX's endpoint description, and messages on both sides of every
// limit arriving intact over real UCX endpoints, shared memory and TCP.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "rank_threads.h"
#include "scoped_env.h"
#include "transport/tag.h"
#include "transport/ucx/eager_policy.h"

using namespace ringreduce;
using ringreduce::testing::runRanks;

namespace {

// ucp_ep_print_info's lane lines as UCX 1.13 prints them (the transport
// logs them with newlines turned into spaces).
const char* kSharedMemory =
    "# lane[0]:  3:sysv/memory.0 md[2]  -> md[2]/sysv/sysdev[255] am am_bw#0\n"
    "# lane[1]:  5:cma/memory.0 md[4]   -> md[4]/cma/sysdev[255] rma_bw#0\n"
    "# tag_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)\n";
const char* kTcp =
    "#  lane[0]:  0:tcp/rre1v0.0 md[0] -> md[0]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup "
    "#  tag_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)";
const char* kRdma =
    "# lane[0]:  1:rc_mlx5/mlx5_0:1.0 md[1] -> md[1]/ib/sysdev[0] rma_bw#0 am am_bw#0 wireup\n"
    "# lane[1]:  2:posix/memory.0 md[2] -> md[2]/posix/sysdev[255] am\n";
const char* kSharedMemoryWithoutCma =
    "# lane[0]:  3:posix/memory.0 md[2] -> md[2]/posix/sysdev[255] am am_bw#0\n";

// UCX prints an endpoint's protocols in one of two forms: 1.13 as a row per
// operation ("tag_send_nbr: 0..<egr/short>..8185..<egr/bcopy>..(inf)"), later
// releases (pip's 1.22) as a table per operation, titled e.g. "tagged message
// by ucp_tag_send*(fast-completion) from host memory", a row per range of
// sizes ("273827..inf | (?) rendezvous fragmented copy-in copy-out"). The
// lane lines, which eagerCanPay reads, are alike in both.
bool printsTables(const std::string& endpoint) {
  return endpoint.find("tagged message by") != std::string::npos;
}

// The part of `endpoint` about one operation: 1.13's row from `row` to
// `nextRow`, or the later releases' table titled `table` (up to the next
// table's header). Empty where it has none.
std::string protocolsOf(const std::string& endpoint, const char* row, const char* nextRow,
                        const char* table) {
  const bool tables = printsTables(endpoint);
  const size_t at = endpoint.find(tables ? table : row);
  if (at == std::string::npos) return "";
  const size_t end = endpoint.find(tables ? "ucp_context_" : nextRow, at);
  return endpoint.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

bool takesRendezvous(const std::string& protocols) {
  return protocols.find("<rndv>") != std::string::npos ||
         protocols.find("rendezvous") != std::string::npos;
}

}  // namespace

TEST(EagerPolicy, AppliesWhereTheRendezvousLaneIsOnThisHostOrCopies) {
  EXPECT_TRUE(eagerCanPay(kSharedMemory));
  EXPECT_TRUE(eagerCanPay(kTcp));
  // Without a lane that reads the peer's memory, a rendezvous copies too.
  EXPECT_TRUE(eagerCanPay(kSharedMemoryWithoutCma));
  EXPECT_FALSE(eagerCanPay(kRdma));
  // A description it cannot read leaves UCX in charge.
  EXPECT_FALSE(eagerCanPay(""));
  EXPECT_FALSE(eagerCanPay("not connected"));
  EXPECT_FALSE(eagerCanPay("lane[0]: garbage rma_bw"));
}

TEST(EagerPolicy, LimitsBySize) {
  const size_t limit = 256 * 1024;
  EXPECT_TRUE(sendsEagerly(true, 0, limit));
  EXPECT_TRUE(sendsEagerly(true, limit - 1, limit));
  EXPECT_FALSE(sendsEagerly(true, limit, limit));
  EXPECT_FALSE(sendsEagerly(true, 1, 0));  // 0, the default: UCX's thresholds
  EXPECT_TRUE(sendsEagerly(true, kEagerCap, kEagerCap + 1));
  EXPECT_FALSE(sendsEagerly(true, kEagerCap + 1, kEagerCap + 2));
  EXPECT_FALSE(sendsEagerly(false, 8, limit));
}

TEST(EagerPolicy, DataPathTakesNoThreshold256KiBTcpSegmentsALongFifoAndSmallReceiveChunks) {
  using Settings = std::vector<std::tuple<std::string, std::string, std::string>>;
  EXPECT_EQ(dataPathUcxSettings(),
            (Settings{{"RNDV_SEND_NBR_THRESH", "inf", "UCX_RNDV_SEND_NBR_THRESH"},
                      {"TX_SEG_SIZE", "256k", "UCX_TCP_TX_SEG_SIZE"},
                      {"RX_SEG_SIZE", "256k", "UCX_TCP_RX_SEG_SIZE"},
                      {"MM_FIFO_SIZE", "128", "UCX_MM_FIFO_SIZE"},
                      {"MM_FIFO_RELEASE_FACTOR", "0.1", "UCX_MM_FIFO_RELEASE_FACTOR"},
                      {"MM_RX_BUFS_GROW", "128", "UCX_MM_RX_BUFS_GROW"}}));
}

namespace {

// Rank 0 sends messages of `sizes` to rank 1 and back; with `lateReceives`
// rank 1 posts each receive only after the message had time to arrive (an
// eager message then waits in UCX's unexpected queue). Every byte checked.
void exchangeSizes(const std::vector<size_t>& sizes, bool lateReceives, size_t limit) {
  Config config = ringreduce::testing::smallSegments();
  config.eagerBytes = limit;
  runRanks(
      2,
      [&](Transport& t, int rank) {
        OpContext op("eager test", 7, std::chrono::seconds(20));
        const int peer = 1 - rank;
        uint32_t slot = 0;
        for (const size_t bytes : sizes) {
          for (int direction = 0; direction < 2; ++direction, ++slot) {
            const int sender = direction;
            std::vector<uint8_t> buffer(bytes);
            if (rank == sender) {
              for (size_t i = 0; i < bytes; ++i) buffer[i] = static_cast<uint8_t>(i * 13 + slot);
              Request s = t.isend(peer, makeTag(rank, 7, slot), buffer.data(), bytes, op);
              t.wait(s, op);
            } else {
              if (lateReceives) std::this_thread::sleep_for(std::chrono::milliseconds(20));
              Request r = t.irecv(peer, makeTag(peer, 7, slot), buffer.data(), bytes, op);
              t.wait(r, op);
              for (size_t i = 0; i < bytes; ++i) {
                ASSERT_EQ(buffer[i], static_cast<uint8_t>(i * 13 + slot))
                    << bytes << " bytes, byte " << i;
              }
            }
          }
        }
        const std::string endpoint = t.describeEndpoint(peer);
        EXPECT_TRUE(eagerCanPay(endpoint)) << endpoint;
        // The data path's context leaves flagged sends eager at every size
        // (UCX_RNDV_SEND_NBR_THRESH=inf), so the limits are ours.
        const std::string flagged = protocolsOf(endpoint, "tag_send_nbr:", "tag_send_sync",
                                                "tagged message by ucp_tag_send*(fast-completion)");
        ASSERT_FALSE(flagged.empty()) << endpoint;
        EXPECT_FALSE(takesRendezvous(flagged)) << flagged;
      },
      config);
}

const std::vector<size_t> kSizes = {1, 8 * 1024, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1,
                                    1 << 20, 9 << 20};

}  // namespace

// Below, at and above the limit, and everything by rendezvous (the default).
TEST(EagerPolicy, HostChannelMessagesAcrossTheLimitArriveIntact) {
  ScopedEnv tls("UCX_TLS", "sm,self");
  for (const size_t limit : {size_t{64 * 1024}, size_t{0}}) {
    exchangeSizes(kSizes, false, limit);
    exchangeSizes(kSizes, true, limit);
  }
}

// TCP eager at every size up to the cap, across a 64 KiB limit, and with
// UCX's thresholds (the default).
TEST(EagerPolicy, TcpMessagesOfEverySizeArriveIntact) {
  ScopedEnv tls("UCX_TLS", "tcp");
  ScopedEnv devices("UCX_NET_DEVICES", "lo");
  for (const size_t limit : {kEagerCap + 1, size_t{64 * 1024}, size_t{0}}) {
    exchangeSizes(kSizes, false, limit);
    exchangeSizes(kSizes, true, limit);
  }
}

namespace {

// The plain tagged sends' protocols of the data path's endpoint to the other
// of two ranks over TCP, e.g. in UCX 1.13
// "tag_send: 0..<egr/short>..262137..<egr/zcopy>..262144..<rndv>..(inf)".
std::string tcpTagSendRow() {
  std::string row;
  runRanks(2, [&](Transport& t, int rank) {
    OpContext op("segment test", 9, std::chrono::seconds(20));
    const int peer = 1 - rank;
    int out = rank, in = -1;
    Request r = t.irecv(peer, makeTag(peer, 9, 0), &in, sizeof(in), op);
    Request s = t.isend(peer, makeTag(rank, 9, 0), &out, sizeof(out), op);
    t.wait(r, op);
    t.wait(s, op);
    ASSERT_EQ(in, peer);
    if (rank != 0) return;
    const std::string endpoint = t.describeEndpoint(peer);
    row = protocolsOf(endpoint, "tag_send:", "tag_send_nbr",
                      "tagged message by ucp_tag_send* from host memory");
    ASSERT_FALSE(row.empty()) << endpoint;
  });
  return row;
}

}  // namespace

// The data path's TCP segments are 256 KiB (UCX's are 8 KiB); a user's own
// UCX_TCP_TX/RX_SEG_SIZE wins. What shows it differs by release: UCX 1.13
// moves its rendezvous threshold on TCP to the segment (256 KiB); later
// releases keep theirs, and send a message of one segment at most (its
// 8-byte header included) by zero-copy: up to 8184 bytes with 8 KiB
// segments, past that with ours.
TEST(EagerPolicy, TcpEndpointsTake256KiBSegmentsUnlessTheUserSetsThem) {
  ScopedEnv tls("UCX_TLS", "tcp");
  ScopedEnv devices("UCX_NET_DEVICES", "lo");
  const std::string ours = tcpTagSendRow();
  ScopedEnv tx("UCX_TCP_TX_SEG_SIZE", "8k");
  ScopedEnv rx("UCX_TCP_RX_SEG_SIZE", "8k");
  const std::string users = tcpTagSendRow();
  EXPECT_TRUE(takesRendezvous(ours)) << ours;
  EXPECT_TRUE(takesRendezvous(users)) << users;
  if (printsTables(ours)) {
    EXPECT_EQ(ours.find("..8184 "), std::string::npos) << ours;
    EXPECT_NE(users.find("..8184 "), std::string::npos) << users;
  } else {
    EXPECT_NE(ours.find("..262144..<rndv>"), std::string::npos) << ours;
    EXPECT_EQ(users.find("262144"), std::string::npos) << users;
  }
}
