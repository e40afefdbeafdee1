// A Transport that adds one-way latency between nodes (delayed_transport.h)
#include "transport/delayed_transport.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace ringreduce {

namespace {
OpContext passThrough() {
  OpContext op;
  op.opName = "emulated delay";
  op.pointToPoint = true;
  return op;
}
}  // namespace

DelayedTransport::DelayedTransport(std::unique_ptr<Transport> inner, std::vector<int> nodeOf,
                                   std::chrono::nanoseconds delay)
    : Transport(inner->rank(), inner->size(), inner->config()),
      inner_(std::move(inner)),
      nodeOf_(std::move(nodeOf)),
      delay_(delay),
      below_(passThrough()),
      timerFd_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) {}

DelayedTransport::~DelayedTransport() {
  try {
    drain();
  } catch (...) {
    // A peer that is gone: what is left is abandoned below.
  }
  if (timerFd_ >= 0) ::close(timerFd_);
  abandonAll();
  for (Held& h : handedOver_) inner_->abandon(h.request);
}

std::string DelayedTransport::describeEndpoint(int peer) {
  const bool delayed = nodeOf_[peer] != nodeOf_[rank()];
  return inner_->describeEndpoint(peer) +
         (delayed ? " + " + std::to_string(delay_.count() / 1000) + " us emulated delay" : "");
}

void* DelayedTransport::postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                                 std::string* error) {
  if (nodeOf_.at(peer) == nodeOf_.at(rank())) {
    auto request = std::make_unique<Request>(inner_->isend(peer, tag, data, bytes, below_));
    return request->done ? nullptr : request.release();
  }
  const auto* in = static_cast<const uint8_t*>(data);
  held_.push_back({Clock::now() + delay_, peer, tag, std::vector<uint8_t>(in, in + bytes), {}});
  return nullptr;
}

void* DelayedTransport::postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                                 std::string* error) {
  return new Request(inner_->irecv(-1, tag, data, bytes, below_, mask));
}

Completion DelayedTransport::poll(void* handle, bool isRecv) {
  Completion completion;
  auto* request = static_cast<Request*>(handle);
  if (request == nullptr || inner_->test(*request, below_)) {
    completion.state = Completion::State::Done;
    if (request != nullptr) {
      completion.length = request->bytes;  // the transport below checked the size
      completion.senderTag = request->senderTag;
      delete request;
    }
  }
  return completion;
}

void DelayedTransport::cancel(void* handle) {
  auto* request = static_cast<Request*>(handle);
  inner_->abandon(*request);
  delete request;
}

unsigned DelayedTransport::release() {
  unsigned moved = 0;
  const auto now = Clock::now();
  while (!held_.empty() && held_.front().due <= now) {
    Held& h = handedOver_.emplace_back(std::move(held_.front()));
    held_.pop_front();
    h.request = inner_->isend(h.peer, h.tag, h.data.data(), h.data.size(), below_);
    ++moved;
  }
  handedOver_.remove_if([this](Held& h) { return inner_->test(h.request, below_); });
  return moved;
}

unsigned DelayedTransport::progress() { return release() + inner_->progress(); }

void DelayedTransport::drain() {
  const auto deadline = Clock::now() + std::chrono::seconds(10) + delay_;
  while ((!held_.empty() || !handedOver_.empty()) && Clock::now() < deadline) {
    if (progress() == 0) sleepUntilEvent(-1, 1);
  }
}

void DelayedTransport::sleepUntilEvent(int extraFd, int timeoutMs) {
  if (!held_.empty() && extraFd < 0 && timerFd_ >= 0) {
    if (held_.front().due <= Clock::now()) return;
    // steady_clock is CLOCK_MONOTONIC on Linux: arm for the due time itself.
    const auto due =
        std::chrono::duration_cast<std::chrono::nanoseconds>(held_.front().due.time_since_epoch())
            .count();
    itimerspec when{};
    when.it_value.tv_sec = due / 1000000000;
    when.it_value.tv_nsec = due % 1000000000;
    timerfd_settime(timerFd_, TFD_TIMER_ABSTIME, &when, nullptr);
    inner_->sleepUntilEvent(timerFd_, timeoutMs);
    uint64_t expirations;
    [[maybe_unused]] const ssize_t got = ::read(timerFd_, &expirations, sizeof(expirations));
    return;
  }
  if (!held_.empty()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(held_.front().due - Clock::now())
            .count();
    // Under a millisecond (the sleep's unit) to go: come back at once.
    if (left < 1) return;
    timeoutMs = timeoutMs < 0 ? static_cast<int>(left) : std::min<int>(timeoutMs, left);
  }
  inner_->sleepUntilEvent(extraFd, timeoutMs);
}

}  // namespace ringreduce
