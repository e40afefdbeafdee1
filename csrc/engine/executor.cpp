#include "engine/executor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>

#include "core/errors.h"

namespace ringreduce {

namespace {
// How often an idle executor with pending point-to-point work checks deadlines.
constexpr int kPollerTickMs = 20;
}  // namespace

Executor::Executor(Transport& transport) : transport_(transport) {
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) throw Error("ringreduce: eventfd() failed");
  thread_ = std::thread([this] { run(); });
}

void Executor::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
}

Executor::~Executor() {
  stop();
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

void Executor::runPollers(bool abandon) {
  for (size_t i = 0; i < pollers_.size();) {
    if (pollers_[i](abandon) || abandon) {
      pollers_[i] = std::move(pollers_.back());
      pollers_.pop_back();
    } else {
      ++i;
    }
  }
}

void Executor::run() {
  // Right after a collective the next one usually follows within
  // microseconds (DDP buckets, a training loop): poll for a short while
  // before sleeping, so the common case skips a thread wake-up.
  const auto spin = std::chrono::microseconds(transport_.config().spinMicroseconds);
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
      runPollers();
      spinUntil = Clock::now() + spin;
      continue;
    }
    if (stop) {
      runPollers(/*abandon=*/true);
      return;
    }
    if (transport_.progress() > 0) {
      runPollers();
      continue;
    }
    runPollers();
    if (Clock::now() < spinUntil) continue;
    // Pending point-to-point operations have deadlines: wake up to check them.
    transport_.sleepUntilEvent(wakeFd_, pollers_.empty() ? -1 : kPollerTickMs);
    uint64_t drained;
    [[maybe_unused]] ssize_t got = ::read(wakeFd_, &drained, sizeof(drained));
  }
}

}  // namespace ringreduce
