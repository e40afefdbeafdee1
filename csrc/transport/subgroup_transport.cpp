// A Transport over some of another transport's ranks (subgroup_transport.h)
#include "transport/subgroup_transport.h"

#include <algorithm>

#include "core/base/errors.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {
int indexIn(const std::vector<int>& members, int rank) {
  const auto it = std::find(members.begin(), members.end(), rank);
  if (it == members.end()) {
    throw InvalidArgument("ringreduce: subgroup does not hold rank " + std::to_string(rank));
  }
  return static_cast<int>(it - members.begin());
}
}  // namespace

SubgroupTransport::SubgroupTransport(Transport& parent, std::vector<int> members,
                                     const OpContext& op)
    : Transport(indexIn(members, parent.rank()), static_cast<int>(members.size()), parent.config()),
      parent_(parent),
      members_(std::move(members)),
      indexOf_(parent.size(), -1),
      op_(op) {
  for (size_t i = 0; i < members_.size(); ++i) indexOf_.at(members_[i]) = static_cast<int>(i);
}

SubgroupTransport::~SubgroupTransport() { abandonAll(); }

void SubgroupTransport::checkPeersAlive(int peer, const OpContext& op) const {
  parent_.checkPeersAlive(peer < 0 ? -1 : members_[peer], op);
}

std::string SubgroupTransport::describeEndpoint(int peer) {
  return parent_.describeEndpoint(members_[peer]);
}

// The source field names a subgroup rank; the parent's peers know it by
// its parent rank. Receives from any source keep whatever the field holds.
uint64_t SubgroupTransport::toParent(uint64_t tag) const {
  const int source = tagSourceRank(tag);
  if (source >= size()) return tag;
  return (tag & kTagAnySourceMask) | (static_cast<uint64_t>(members_[source]) << kTagPayloadBits);
}

void* SubgroupTransport::postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                                  std::string* error) {
  if (peer < 0 || peer >= size()) {
    *error = "no rank " + std::to_string(peer) + " in a subgroup of " + std::to_string(size());
    return nullptr;
  }
  auto request =
      std::make_unique<Request>(parent_.isend(members_[peer], toParent(tag), data, bytes, op_));
  return request->done ? nullptr : request.release();
}

void* SubgroupTransport::postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                                  std::string* error) {
  const bool anySource = (mask & ~kTagAnySourceMask) == 0;
  const int peer = anySource ? -1 : members_[tagSourceRank(tag)];
  return new Request(parent_.irecv(peer, toParent(tag), data, bytes, op_, mask));
}

Completion SubgroupTransport::poll(void* handle, bool isRecv) {
  Completion completion;
  if (handle == nullptr) {
    completion.state = Completion::State::Done;
    return completion;
  }
  auto* request = static_cast<Request*>(handle);
  // A failure throws from the parent's test; the request stays ours until
  // cancel() (abandonAll) releases it.
  if (!parent_.test(*request, op_)) return completion;
  completion.state = Completion::State::Done;
  completion.length = request->bytes;  // the parent checked the size
  const int source = indexOf_[tagSourceRank(request->senderTag)];
  completion.senderTag = (request->senderTag & kTagAnySourceMask) |
                         (static_cast<uint64_t>(source < 0 ? 0 : source) << kTagPayloadBits);
  delete request;
  return completion;
}

void SubgroupTransport::cancel(void* handle) {
  auto* request = static_cast<Request*>(handle);
  parent_.abandon(*request);
  delete request;
}

}  // namespace ringreduce
