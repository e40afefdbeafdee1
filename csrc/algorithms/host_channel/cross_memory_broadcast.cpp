// The root and its receivers copy a large broadcast at once (cross_memory_broadcast.h)
#include "algorithms/host_channel/cross_memory_broadcast.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "algorithms/host_channel/turn.h"
#include "core/base/errors.h"
#include "transport/cross_memory.h"

namespace ringreduce {

namespace {

constexpr size_t kPageBytes = 4096;

// How long a rank whose broadcast failed still waits for its peers to say
// they are done with its memory: a copy already under way (a share of 32
// MiB takes 3-5 ms here) ends well within it.
constexpr auto kStopGrace = std::chrono::milliseconds(100);

// What each rank puts up in the turn: where its tensor lies (the root's is
// the source, a receiver's the destination), and the root's choice of where
// its own share starts (the receivers read everything before it).
struct BroadcastRecord {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t rootShareAt = 0;  // the root's record only
};

// `peer`'s record of `turn`. The fingerprint (announced and checked before
// the turn) makes the sizes agree; a record that says otherwise is not this
// collective's.
BroadcastRecord recordOf(const HostChannel& channel, const OpContext& op,
                         const HostChannel::Turn& turn, int peer, size_t bytes) {
  BroadcastRecord record;
  std::memcpy(&record, channel.buffer(peer, turn), sizeof(record));
  if (record.bytes != bytes || record.rootShareAt > bytes) {
    throw TransportError("ringreduce: " + op.describe() + " on rank " +
                         std::to_string(channel.rank()) + ": rank " + std::to_string(peer) +
                         " put up " + std::to_string(record.bytes) + " bytes where " +
                         std::to_string(bytes) + " were expected");
  }
  return record;
}

void copyShares(const Comm& comm, const OpContext& op, const BroadcastArgs& args,
                const HostChannel::Turn& turn) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  char* data = static_cast<char*>(args.data);
  const BroadcastRecord roots = recordOf(channel, op, turn, args.root, args.bytes);
  const size_t rootShareAt = roots.rootShareAt;
  if (channel.rank() != args.root) {
    const int error = crossMemoryRead(channel.pid(args.root), roots.address, data, rootShareAt);
    if (error != 0) channel.throwUnreachable(args.root, op, error);
    return;
  }
  for (int r = 1; rootShareAt < args.bytes && r < n; ++r) {
    const int peer = (args.root + r) % n;
    const BroadcastRecord theirs = recordOf(channel, op, turn, peer, args.bytes);
    // A receiver that gave up (its wait failed after it put its tensor up)
    // may have handed the tensor back: write nothing into it. The turn's
    // wait refuses such a peer already; this narrows the window to the
    // write itself. One that gives up after this check waits for this
    // rank's Reduced flag before it hands the tensor back
    // (stopCopiesAfterFailure).
    channel.throwIfGaveUp(peer, op);
    const int error = crossMemoryWrite(channel.pid(peer), theirs.address + rootShareAt,
                                       data + rootShareAt, args.bytes - rootShareAt);
    if (error != 0) channel.throwUnreachable(peer, op, error, /*writing=*/true);
  }
}

// A rank whose broadcast failed after it put up where its tensor lies: a
// peer may still read it (a receiver, the root's) or write into it (the
// root, a receiver's) even though this rank's own wait ended. Says it gave
// up first, so that a peer that has not copied yet does not start; then,
// before the caller gets the tensor back, waits a moment for every peer to
// say it is done with it (its Reduced flag), to exit or to leave.
void stopCopiesAfterFailure(HostChannel& channel, const HostChannel::Turn& turn,
                            const char* reason) {
  channel.fail(reason);
  const Clock::time_point until = Clock::now() + kStopGrace;
  for (int peer = 0; peer < channel.size(); ++peer) {
    if (peer != channel.rank()) channel.awaitPeerDoneCopying(FlagKind::Reduced, peer, turn, until);
  }
}

}  // namespace

bool crossMemoryBroadcastCarries(const Comm& comm, size_t bytes) {
  return bytes > 0 && hostChannelSettingsAllow(comm) && comm.channel->peersReadable();
}

size_t crossMemoryBroadcastRootShareAt(size_t bytes, int n, bool coresContended) {
  if (coresContended) return bytes;
  const size_t share = bytes / static_cast<size_t>(n) / kPageBytes * kPageBytes;
  return bytes - share;
}

void crossMemoryBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args) {
  HostChannel& channel = *comm.channel;
  if (channel.size() == 1 || args.bytes == 0) return;
  const bool root = channel.rank() == args.root;
  // The root's share, its choice (receivers read it from its record).
  const size_t rootShareAt =
      root ? crossMemoryBroadcastRootShareAt(args.bytes, channel.size(), channel.coresContended())
           : 0;
  // A root with no share touches no peer's memory: it says so with its
  // record, so that a receiver done reading returns without waiting for the
  // root to run once more (under load, a time slice).
  const bool doneAtOnce = root && rootShareAt == args.bytes;
  HostChannel::Turn turn;  // number 0 until this rank's record is up
  try {
    // Not the last turn: the Reduced flag follows it.
    exchangeTurn(
        comm, op, sizeof(BroadcastRecord), false,
        [&](char* mine) {
          const BroadcastRecord record{reinterpret_cast<uintptr_t>(args.data), args.bytes,
                                       rootShareAt};
          std::memcpy(mine, &record, sizeof(record));
        },
        [&] {
          if (doneAtOnce) publishFlag(comm, op, FlagKind::Reduced, turn);
        },
        true, &turn);
    if (op.stoppedAhead()) return;  // never run ahead (the header); as every channel body
    if (doneAtOnce) {
      awaitFlags(comm, op, FlagKind::Reduced, turn);
      return;
    }
    copyShares(comm, op, args, turn);
    // Done with the peers' memory; back to the caller once they are done with this one's.
    publishAndAwait(comm, op, FlagKind::Reduced, turn);
  } catch (const std::exception& e) {
    if (turn.number != 0) stopCopiesAfterFailure(channel, turn, e.what());
    throw;
  }
}

}  // namespace ringreduce
