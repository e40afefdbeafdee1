// ProcessGroup._register_on_completion_hook for ringreduce: every finished
// collective's WorkInfo (op type, sequence number, start, end, duration)
// goes to the registered hooks on a thread of their own, off the path of
// the collectives. A hook that throws is reported on stderr and the next
// one still runs, as with ProcessGroupNCCL.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ringreduce {

class CompletionHooks {
 public:
  using Hook = std::function<void(std::shared_ptr<c10d::WorkInfo>)>;

  ~CompletionHooks() { stop(); }

  void add(Hook hook);
  bool active() const { return active_.load(); }
  void push(std::shared_ptr<c10d::WorkInfo> info);
  // Returns once every pushed WorkInfo has been through the hooks.
  void drain();
  // Drops what is not delivered yet and joins the thread. Idempotent.
  void stop();

 private:
  void run();

  std::atomic<bool> active_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Hook> hooks_;
  std::deque<std::shared_ptr<c10d::WorkInfo>> pending_;
  bool running_ = false;  // a WorkInfo is in the hooks now
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ringreduce
