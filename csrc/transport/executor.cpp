#include "transport/executor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>

#include "core/errors.h"

namespace ringreduce {

Executor::Executor(UcxTransport& transport) : transport_(transport) {
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) throw Error("ringreduce: eventfd() failed");
  thread_ = std::thread([this] { run(); });
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  ::close(wakeFd_);
}

void Executor::submit(Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  wake();
}

void Executor::wake() {
  const uint64_t one = 1;
  // A full counter only means a wake-up is already pending.
  [[maybe_unused]] ssize_t written = ::write(wakeFd_, &one, sizeof(one));
}

void Executor::run() {
  // Right after a collective the next one usually follows within
  // microseconds (DDP buckets, a training loop): poll for a short while
  // before sleeping, so the common case skips a thread wake-up.
  const auto spin = std::chrono::microseconds(transport_.spinMicroseconds());
  auto spinUntil = Clock::now();
  while (true) {
    Task task;
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!queue_.empty()) {
        task = std::move(queue_.front());
        queue_.pop_front();
      } else {
        stop = stopping_;
      }
    }
    if (task) {
      try {
        task();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ringreduce: internal error escaped a task: %s\n", e.what());
      }
      spinUntil = Clock::now() + spin;
      continue;
    }
    if (stop) return;
    if (transport_.progress() > 0) continue;
    if (Clock::now() < spinUntil) continue;
    transport_.sleepUntilEvent(wakeFd_, -1);
    uint64_t drained;
    [[maybe_unused]] ssize_t got = ::read(wakeFd_, &drained, sizeof(drained));
  }
}

}  // namespace ringreduce
