// The group's worker thread. It runs collectives one at a time in the order
// they were submitted (the order every c10d backend guarantees) and, between
// them, keeps the UCX worker progressing so that peers' late protocol
// messages (rendezvous acks, wire-up) are answered. While idle it sleeps on
// the worker's event fd and an eventfd for new tasks: an idle group uses no CPU.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/transport.h"

namespace ringreduce {

class Executor {
 public:
  using Task = std::function<void()>;  // must not throw

  explicit Executor(Transport& transport);
  // Runs the tasks already submitted, gives up pending pollers and joins the
  // thread. Idempotent; submit() must not be called afterwards.
  void stop();
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void submit(Task task);

  // A poller is called on the executor thread between tasks and while idle
  // until it returns true (finished). Point-to-point operations use this so
  // that a pending recv never blocks the collectives queued behind it. When
  // the executor stops, each remaining poller is called once with
  // abandon = true and must give up (fail its work). Call addPoller only
  // from a task (the executor thread).
  using Poller = std::function<bool(bool abandon)>;
  void addPoller(Poller poller) { pollers_.push_back(std::move(poller)); }

 private:
  void run();
  void wake();
  void runPollers(bool abandon = false);

  Transport& transport_;
  int wakeFd_ = -1;
  std::mutex mutex_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::vector<Poller> pollers_;  // executor thread only
  std::thread thread_;
};

}  // namespace ringreduce
