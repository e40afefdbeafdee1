// A broadcast beyond the channel's buffers, the way that pays at the moment (large_broadcast.h)
#include "algorithms/host_channel/large_broadcast.h"

#include <algorithm>
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

// What the root says with its first turn's flag (HostChannel::setNote): how
// the message goes, and where its tensor lies (for receivers that read it
// in place).
struct RootsNote {
  LargeBroadcastForm form = LargeBroadcastForm::ThroughBuffers;
  uint64_t address = 0;
};

// The root's note for `turn`. The fingerprint (announced and checked before
// the turn) makes the collectives agree; a form that is none is not this
// collective's.
RootsNote rootsNote(const HostChannel& channel, const OpContext& op,
                    const HostChannel::Turn& turn, int root) {
  const auto [form, address] = channel.note(root, FlagKind::Input, turn);
  const RootsNote note{static_cast<LargeBroadcastForm>(form), address};
  if (note.form != LargeBroadcastForm::ThroughBuffers &&
      note.form != LargeBroadcastForm::ReadInPlace) {
    throw TransportError("ringreduce: " + op.describe() + " on rank " +
                         std::to_string(channel.rank()) + ": rank " + std::to_string(root) +
                         " put up an unknown form (" + std::to_string(form) +
                         ") for the broadcast");
  }
  return note;
}

// A root whose broadcast read in place failed after its note was up: a
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

LargeBroadcastForm largeBroadcastForm(int loadLevel, bool peersReadable) {
  return loadLevel >= kReadInPlaceLoadLevel && peersReadable ? LargeBroadcastForm::ReadInPlace
                                                             : LargeBroadcastForm::ThroughBuffers;
}

void largeBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args) {
  HostChannel& channel = *comm.channel;
  if (channel.size() == 1 || args.bytes == 0) return;
  const bool root = channel.rank() == args.root;
  const LargeBroadcastForm mine =
      root ? largeBroadcastForm(channel.coresLoadLevel(), channel.peersReadable())
           : LargeBroadcastForm::ThroughBuffers;
  // A root that has its receivers read touches no peer's memory: it sets its
  // Reduced flag with its first turn, so that a receiver done reading returns without waiting
  // for the root to run once more (under load, a time slice).
  const bool doneAtOnce = root && mine == LargeBroadcastForm::ReadInPlace;
  // The receivers' reads pin every page of the root's tensor: one that comes
  // back goes onto 2 MiB pages first, as the in-place gathers' blocks do
  // (cross_memory_gather.h's notePeersReadInPlace).
  if (doneAtOnce) noteCallerBuffer(comm, args.data, args.bytes);
  // The first turn: the root's note says how the message goes; through the
  // buffers it carries the first piece too, so the root copies at once, as
  // a broadcast that fits the buffers does, instead of first waiting for
  // its receivers to come.
  const size_t firstPiece = std::min(channel.bufferBytes(), args.bytes);
  auto* data = static_cast<char*>(args.data);
  HostChannel::Turn turn;  // number 0 until the root's note is up
  try {
    // Not the last turn: the data or the Reduced flag follows it.
    exchangeTurn(
        comm, op, firstPiece, false,
        [&](char* buffer) {
          if (!root) return;
          if (mine == LargeBroadcastForm::ThroughBuffers) channel.copyIn(buffer, data, firstPiece);
          channel.setNote(FlagKind::Input, static_cast<uint64_t>(mine),
                          reinterpret_cast<uintptr_t>(args.data));
        },
        [&] {
          if (doneAtOnce) publishFlag(comm, op, FlagKind::Reduced, turn);
        },
        true, &turn);
    if (op.stoppedAhead()) return;  // never run ahead (the header); as every channel body
    const RootsNote roots = rootsNote(channel, op, turn, args.root);
    if (roots.form == LargeBroadcastForm::ThroughBuffers) {
      // Nobody reads a tensor in place: the rest in as many turns as it takes.
      if (!root) std::memcpy(data, channel.buffer(args.root, turn), firstPiece);
      if (args.bytes > firstPiece) {
        hostChannelBroadcast(comm, op, {data + firstPiece, args.bytes - firstPiece, args.root});
      }
      return;
    }
    if (root) return awaitFlags(comm, op, FlagKind::Reduced, turn);
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
