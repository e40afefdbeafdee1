// A Transport whose ranks are threads of one process (loopback_transport.h)
#include "transport/loopback/loopback_transport.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace ringreduce {

LoopbackFabric::LoopbackFabric(int size) : mailboxes_(static_cast<size_t>(size)) {}

// A longer message than the receive holds is truncated, as UCX reports it;
// the Transport turns that, and a shorter one, into an error.
void LoopbackFabric::deliver(const void* data, size_t bytes, uint64_t tag, Receive& receive) {
  std::memcpy(receive.data, data, std::min(bytes, receive.bytes));
  receive.completion.length = bytes;
  receive.completion.senderTag = tag;
  receive.completion.state =
      bytes > receive.bytes ? Completion::State::Truncated : Completion::State::Done;
}

LoopbackTransport::LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank,
                                     const Config& config)
    : Transport(rank, fabric->size(), config), fabric_(std::move(fabric)) {}

LoopbackTransport::~LoopbackTransport() { abandonAll(); }

void* LoopbackTransport::postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                                  std::string* error) {
  if (peer < 0 || peer >= size()) {
    *error = "no rank " + std::to_string(peer) + " in a group of " + std::to_string(size());
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(fabric_->mutex_);
  LoopbackFabric::Mailbox& mailbox = fabric_->mailboxes_[static_cast<size_t>(peer)];
  auto waiting = std::find_if(
      mailbox.posted.begin(), mailbox.posted.end(),
      [tag](const LoopbackFabric::Receive* r) { return LoopbackFabric::matches(tag, *r); });
  if (waiting != mailbox.posted.end()) {
    LoopbackFabric::deliver(data, bytes, tag, **waiting);
    mailbox.posted.erase(waiting);
  } else {
    const auto* bytesIn = static_cast<const uint8_t*>(data);
    mailbox.unexpected.push_back({tag, std::vector<uint8_t>(bytesIn, bytesIn + bytes)});
  }
  ++fabric_->deliveries_;
  fabric_->arrived_.notify_all();
  return nullptr;  // the data is copied: the send is complete
}

void* LoopbackTransport::postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                                  std::string* error) {
  auto* receive = new LoopbackFabric::Receive{tag, mask, data, bytes, {}};
  std::lock_guard<std::mutex> lock(fabric_->mutex_);
  LoopbackFabric::Mailbox& mailbox = fabric_->mailboxes_[static_cast<size_t>(rank())];
  auto early = std::find_if(mailbox.unexpected.begin(), mailbox.unexpected.end(),
                            [receive](const LoopbackFabric::Message& m) {
                              return LoopbackFabric::matches(m.tag, *receive);
                            });
  if (early != mailbox.unexpected.end()) {
    LoopbackFabric::deliver(early->data.data(), early->data.size(), early->tag, *receive);
    mailbox.unexpected.erase(early);
  } else {
    mailbox.posted.push_back(receive);
  }
  return receive;
}

Completion LoopbackTransport::poll(void* handle, bool) {
  if (handle == nullptr) {
    Completion sent;
    sent.state = Completion::State::Done;
    return sent;
  }
  auto* receive = static_cast<LoopbackFabric::Receive*>(handle);
  Completion completion;
  {
    std::lock_guard<std::mutex> lock(fabric_->mutex_);
    completion = receive->completion;
  }
  if (completion.state != Completion::State::InProgress) delete receive;
  return completion;
}

void LoopbackTransport::cancel(void* handle) {
  auto* receive = static_cast<LoopbackFabric::Receive*>(handle);
  {
    std::lock_guard<std::mutex> lock(fabric_->mutex_);
    fabric_->mailboxes_[static_cast<size_t>(rank())].posted.remove(receive);
  }
  delete receive;
}

unsigned LoopbackTransport::progress() {
  // Delivery happens in the sender's call; progress only reports whether
  // anything moved since the last look, so waits spin and sleep as on UCX.
  std::lock_guard<std::mutex> lock(fabric_->mutex_);
  const auto moved = static_cast<unsigned>(fabric_->deliveries_ - seenDeliveries_);
  seenDeliveries_ = fabric_->deliveries_;
  return moved;
}

bool LoopbackTransport::armForSleep() {
  std::lock_guard<std::mutex> lock(fabric_->mutex_);
  return fabric_->deliveries_ == seenDeliveries_;
}

void LoopbackTransport::sleepArmed(int extraFd, int timeoutMs) {
  // With an extra fd, sleep in 1 ms slices so that it is noticed too; one
  // that is readable already ends the sleep before it starts.
  if (extraFd >= 0) {
    pollfd fd{extraFd, POLLIN, 0};
    if (::poll(&fd, 1, 0) > 0) return;
  }
  const int slice = extraFd >= 0 ? std::min(timeoutMs < 0 ? 1 : timeoutMs, 1) : timeoutMs;
  {
    std::unique_lock<std::mutex> lock(fabric_->mutex_);
    auto pending = [this] { return fabric_->deliveries_ != seenDeliveries_; };
    if (slice < 0) {
      fabric_->arrived_.wait(lock, pending);
    } else {
      fabric_->arrived_.wait_for(lock, std::chrono::milliseconds(slice), pending);
    }
  }
  if (extraFd >= 0) {
    pollfd fd{extraFd, POLLIN, 0};
    ::poll(&fd, 1, 0);
  }
}

}  // namespace ringreduce
