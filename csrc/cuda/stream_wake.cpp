// A file descriptor that the device makes readable (stream_wake.h)
#include "cuda/stream_wake.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/base/errors.h"
#include "cuda/stream_tracker.h"

namespace ringreduce::cuda {

// Owned by the waker and by every host function still queued, so that a
// late host function never writes into an fd number reused meanwhile.
struct StreamWake::Shared {
  int fd = -1;
  ~Shared() {
    if (fd >= 0) ::close(fd);
  }
};

void StreamWake::wakeFromDevice(void* held) {
  auto* share = static_cast<std::shared_ptr<Shared>*>(held);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write((*share)->fd, &one, sizeof(one));
  delete share;
}

StreamWake::StreamWake() : shared_(std::make_shared<Shared>()) {
  shared_->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (shared_->fd < 0) {
    throw Error(std::string("ringreduce: eventfd() for the device's wake-ups failed: ") +
                std::strerror(errno));
  }
}

StreamWake::~StreamWake() = default;

int StreamWake::fd() const { return shared_->fd; }

void StreamWake::armAfter(void* stream) {
  auto* held = new std::shared_ptr<Shared>(shared_);
  try {
    callAfterQueuedWork(stream, &wakeFromDevice, held);
  } catch (...) {
    delete held;
    throw;
  }
}

void StreamWake::clear() {
  uint64_t count;
  [[maybe_unused]] const ssize_t got = ::read(shared_->fd, &count, sizeof(count));
}

bool StreamWake::sleep(int timeoutMs) const {
  pollfd fd{shared_->fd, POLLIN, 0};
  return ::poll(&fd, 1, timeoutMs) > 0;
}

}  // namespace ringreduce::cuda
