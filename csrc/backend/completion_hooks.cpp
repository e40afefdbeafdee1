// ProcessGroup._register_on_completion_hook for ringreduce (completion_hooks.h)
#include "backend/completion_hooks.h"

#include <cstdio>
#include <exception>

namespace ringreduce {

void CompletionHooks::add(Hook hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  hooks_.push_back(std::move(hook));
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { run(); });
  active_ = true;
}

void CompletionHooks::push(std::shared_ptr<c10d::WorkInfo> info) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    pending_.push_back(std::move(info));
  }
  changed_.notify_all();
}

void CompletionHooks::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return (pending_.empty() && !running_) || !thread_.joinable(); });
}

void CompletionHooks::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    // At interpreter exit a Python hook may no longer be callable: what is
    // not delivered yet is dropped (drain() first to deliver it).
    pending_.clear();
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  active_ = false;
}

void CompletionHooks::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return !pending_.empty() || stopping_; });
    if (pending_.empty()) return;  // stopping, and everything ran
    std::shared_ptr<c10d::WorkInfo> info = std::move(pending_.front());
    pending_.pop_front();
    running_ = true;
    const std::vector<Hook> hooks = hooks_;
    lock.unlock();
    for (const Hook& hook : hooks) {
      try {
        hook(info);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ringreduce: an on-completion hook raised (ignored): %s\n", e.what());
      } catch (...) {
        std::fprintf(stderr, "ringreduce: an on-completion hook raised (ignored)\n");
      }
    }
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

}  // namespace ringreduce
