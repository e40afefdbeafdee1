#include "cuda/watch_thread.h"

#include "cuda/current_device.h"

namespace ringreduce::cuda {

WatchThread::WatchThread(int device, std::chrono::milliseconds period, std::function<void()> look)
    : device_(device), period_(period), look_(std::move(look)), thread_([this] { run(); }) {}

WatchThread::~WatchThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void WatchThread::run() {
  try {
    makeCurrent(device_);
  } catch (...) {
    // A broken runtime: the collectives report it themselves.
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (!quit_) {
    wake_.wait_for(lock, period_);
    if (quit_) break;
    lock.unlock();
    try {
      look_();
    } catch (...) {
      // As above: a look that cannot be made is retried at the next one.
    }
    lock.lock();
  }
}

}  // namespace ringreduce::cuda
