// Gathers that read the peers' blocks in place (cross_memory_gather.h)
#include "algorithms/host_channel/cross_memory_gather.h"

#include <cstring>
#include <string>
#include <vector>

#include "algorithms/host_channel/turn.h"
#include "core/observe/log.h"
#include "core/base/errors.h"
#include "transport/cross_memory.h"

namespace ringreduce {

bool crossMemoryGatherApplies(const HostChannel& channel, size_t blockBytes) {
  return channel.peersReadable() && blockBytes >= kCrossMemoryGatherFromBytes;
}

bool crossMemoryGatherPartsApply(const HostChannel& channel, size_t parts, size_t bytes) {
  return parts > 0 && parts <= kCrossMemoryMaxParts && crossMemoryGatherApplies(channel, bytes);
}

bool crossMemoryGatherCarries(const Comm& comm, size_t blockBytes) {
  return hostChannelSettingsAllow(comm) && crossMemoryGatherApplies(*comm.channel, blockBytes);
}

void readPeerBlock(const Comm& comm, const OpContext& op, const HostChannel::Turn& turn,
                   int peer, void* into, size_t bytes, size_t readAt, size_t part) {
  const HostChannel& channel = *comm.channel;
  CrossMemoryBlock block;
  std::memcpy(&block, channel.buffer(peer, turn) + part * sizeof(block), sizeof(block));
  // The fingerprint (announced and checked before the turn) makes the sizes
  // agree; a record that says otherwise is not this collective's.
  if (block.bytes != bytes) {
    throw TransportError("ringreduce: " + op.describe() + " on rank " +
                         std::to_string(channel.rank()) + ": rank " + std::to_string(peer) +
                         " put up " + std::to_string(block.bytes) + " bytes where " +
                         std::to_string(bytes) + " were expected");
  }
  const int error = crossMemoryRead(channel.pid(peer), block.address + readAt, into, bytes);
  if (error != 0) channel.throwUnreadable(peer, op, error);
}

void putUpVote(char* mine, size_t parts, const GatherForms& forms, const GatherForms::Call& call) {
  const GatherForms::Vote vote = forms.vote(call);
  std::memcpy(mine + parts * sizeof(CrossMemoryBlock), &vote, sizeof(vote));
}

void decideFromVotes(HostChannel& channel, const HostChannel::Turn& turn, size_t parts,
                     const GatherForms::Call& call) {
  std::vector<GatherForms::Vote> votes(static_cast<size_t>(channel.size()));
  for (int r = 0; r < channel.size(); ++r) {
    std::memcpy(&votes[static_cast<size_t>(r)],
                channel.buffer(r, turn) + parts * sizeof(CrossMemoryBlock),
                sizeof(GatherForms::Vote));
  }
  // Every rank reads the same votes: the same decision.
  GatherForms& forms = channel.gatherForms();
  forms.decide(call, votes);
  uint64_t inPlaceNanos = 0;
  uint64_t buffersNanos = 0;
  for (const GatherForms::Vote& v : votes) {
    inPlaceNanos += v.inPlaceNanos;
    buffersNanos += v.buffersNanos;
  }
  const bool inPlace = forms.decidedFor(call) == GatherForms::Form::InPlace;
  RR_LOG(Info, channel.rank(),
         "gathers of " << (GatherForms::kFirstClassBytes << call.sizeClass)
                       << "+ bytes per block: "
                       << (inPlace ? "read in place" : "through the buffers")
                       << " (the ranks' fastest trials together: in place "
                       << inPlaceNanos / 1000 << " us, through the buffers "
                       << buffersNanos / 1000 << " us)");
}

}  // namespace ringreduce
