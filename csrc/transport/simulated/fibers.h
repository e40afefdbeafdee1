// Cooperative fibers for the virtual-time transport: one per simulated rank,
// all on the calling thread, switched only where a rank blocks. A thousand
// ranks cost a thousand small stacks, no OS threads and no locks, and the
// order in which ranks run is decided by the simulator's clock alone, so
// every run is deterministic.
//
// On x86-64 a switch saves and restores the callee-saved registers and the
// stack pointer (a few nanoseconds); elsewhere it falls back to ucontext,
// whose every switch is also a sigprocmask system call.
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace ringreduce {

class Fibers {
 public:
  // Stacks are reserved, not committed: a rank touches a few pages.
  explicit Fibers(size_t stackBytes = 256 * 1024);
  ~Fibers();
  Fibers(const Fibers&) = delete;
  Fibers& operator=(const Fibers&) = delete;

  // Adds a fiber that will run `body` (which must not throw) when first resumed.
  int add(std::function<void()> body);
  // From the scheduler: runs fiber `id` until it suspends or returns.
  void resume(int id);
  // From inside a fiber: back to the scheduler.
  void suspend();
  bool finished(int id) const { return fibers_[id]->finished; }

 private:
  struct Fiber {
    void* stack = nullptr;
    void* sp = nullptr;  // saved stack pointer while switched out (x86-64)
    ucontext_t context;  // elsewhere
    std::function<void()> body;
    bool finished = false;
    Fibers* owner = nullptr;
  };
  static void run(Fiber* fiber);
  static void entry();

  size_t stackBytes_;
  void* schedulerSp_ = nullptr;
  ucontext_t scheduler_;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  int current_ = -1;
};

}  // namespace ringreduce
