// A broadcast beyond the channel's buffers, the way that pays at the moment (large_broadcast.h)
#include "algorithms/host_channel/large_broadcast.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "algorithms/host_channel/broadcast.h"
#include "algorithms/host_channel/turn.h"
#include "core/base/errors.h"
#include "transport/cross_memory.h"

namespace ringreduce {

namespace {

// How long a root whose broadcast failed still waits for its receivers to
// say they are done reading its tensor: a read already under way (64 MiB
// takes 5-10 ms here) ends well within it.
constexpr auto kStopGrace = std::chrono::milliseconds(100);

// What each rank puts up in the first turn: where its tensor lies, and (the
// root's record) how the message goes.
struct BroadcastRecord {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t form = 0;  // LargeBroadcastForm; the root's record only
};

// The root's record of `turn`. The fingerprint (announced and checked before
// the turn) makes the sizes agree; a record that says otherwise is not this
// collective's.
BroadcastRecord rootsRecord(const HostChannel& channel, const OpContext& op,
                            const HostChannel::Turn& turn, int root, size_t bytes) {
  BroadcastRecord record;
  std::memcpy(&record, channel.buffer(root, turn), sizeof(record));
  const auto form = static_cast<LargeBroadcastForm>(record.form);
  const std::string from = "ringreduce: " + op.describe() + " on rank " +
                           std::to_string(channel.rank()) + ": rank " + std::to_string(root);
  if (record.bytes != bytes) {
    throw TransportError(from + " put up " + std::to_string(record.bytes) + " bytes where " +
                         std::to_string(bytes) + " were expected");
  }
  if (form != LargeBroadcastForm::ThroughBuffers && form != LargeBroadcastForm::ReadInPlace) {
    throw TransportError(from + " put up an unknown form (" + std::to_string(record.form) +
                         ") for the broadcast");
  }
  return record;
}

// A root whose broadcast read in place failed after its record was up: a
// receiver may still read its tensor even though the root's own wait ended.
// Says it gave up first, so that a receiver that has not read yet does not
// start; then, before the caller gets the tensor back, waits a moment for
// every receiver to say it is done with it (its Reduced flag), to exit or to
// leave (not for its Failed state: an abort from another thread sets that
// while the receiver's read may go on).
void stopReadsAfterFailure(HostChannel& channel, const HostChannel::Turn& turn,
                           const char* reason) {
  channel.fail(reason);
  const Clock::time_point until = Clock::now() + kStopGrace;
  for (int peer = 0; peer < channel.size(); ++peer) {
    if (peer != channel.rank()) channel.awaitPeerDoneCopying(FlagKind::Reduced, peer, turn, until);
  }
}

}  // namespace

bool largeBroadcastCarries(const Comm& comm, size_t bytes) {
  return bytes > 0 && hostChannelSettingsAllow(comm);
}

LargeBroadcastForm largeBroadcastForm(bool coresContended, bool peersReadable) {
  return coresContended && peersReadable ? LargeBroadcastForm::ReadInPlace
                                         : LargeBroadcastForm::ThroughBuffers;
}

void largeBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args) {
  HostChannel& channel = *comm.channel;
  if (channel.size() == 1 || args.bytes == 0) return;
  const bool root = channel.rank() == args.root;
  const LargeBroadcastForm mine =
      root ? largeBroadcastForm(channel.coresContended(), channel.peersReadable())
           : LargeBroadcastForm::ThroughBuffers;
  // A root that has its receivers read touches no peer's memory: it says so
  // with its record, so that a receiver done reading returns without waiting
  // for the root to run once more (under load, a time slice).
  const bool doneAtOnce = root && mine == LargeBroadcastForm::ReadInPlace;
  // The receivers' reads pin every page of the root's tensor: one that comes
  // back goes onto 2 MiB pages first, as the in-place gathers' blocks do
  // (cross_memory_gather.h's notePeersReadInPlace).
  if (doneAtOnce) noteCallerBuffer(comm, args.data, args.bytes);
  HostChannel::Turn turn;  // number 0 until this rank's record is up
  try {
    // Not the last turn: the data or the Reduced flag follows it.
    exchangeTurn(
        comm, op, sizeof(BroadcastRecord), false,
        [&](char* record) {
          const BroadcastRecord r{reinterpret_cast<uintptr_t>(args.data), args.bytes,
                                  static_cast<uint64_t>(mine)};
          std::memcpy(record, &r, sizeof(r));
        },
        [&] {
          if (doneAtOnce) publishFlag(comm, op, FlagKind::Reduced, turn);
        },
        true, &turn);
    if (op.stoppedAhead()) return;  // never run ahead (the header); as every channel body
    const BroadcastRecord roots = rootsRecord(channel, op, turn, args.root, args.bytes);
    if (static_cast<LargeBroadcastForm>(roots.form) == LargeBroadcastForm::ThroughBuffers) {
      return hostChannelBroadcast(comm, op, args);  // nobody reads a tensor in place
    }
    if (root) {
      awaitFlags(comm, op, FlagKind::Reduced, turn);
      return;
    }
    const int error = crossMemoryRead(channel.pid(args.root), roots.address, args.data, args.bytes);
    if (error != 0) channel.throwUnreadable(args.root, op, error);
    // Done with the root's memory; back to the caller once the peers are done too.
    publishAndAwait(comm, op, FlagKind::Reduced, turn);
  } catch (const std::exception& e) {
    if (root && doneAtOnce && turn.number != 0) stopReadsAfterFailure(channel, turn, e.what());
    throw;
  }
}

}  // namespace ringreduce
