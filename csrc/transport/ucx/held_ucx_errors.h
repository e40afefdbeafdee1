// Keeps UCX's error messages on this thread while it tries to connect to a
// peer, instead of printing them: a failure that a retry gets past prints
// nothing, and one that lasts is told once, in the error that names it.
//
// Why: attaching a live peer's shared memory now and then fails for a
// moment, so UcxTransport::endpoint tries again for up to 50 ms. Each try
// printed UCX's two errors ("shmat(shmid=...) failed: Invalid argument",
// "mm ep failed to connect to remote FIFO id ..."). Where the peer's
// process had died before this rank first connected to it, a survivor
// printed 51 such pairs within 60 ms above the DistBackendError that named
// the dead rank (tests/python/seed_sweep.py --kill: a rank killed before its
// first collective).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringreduce {

class HeldUcxErrors {
 public:
  HeldUcxErrors();  // installs the log handler, once per process

  // While one lives, UCX's error messages logged on this thread go to
  // `held` (scopes on one thread nest: the innermost holds).
  class Scope {
   public:
    explicit Scope(HeldUcxErrors& held);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    HeldUcxErrors* outer_;
  };

  size_t count() const { return count_; }
  // The distinct messages, in the order they first came, joined by "; ".
  std::string text() const;

  // What the handler does with one message at UCX's `level` (as UCX numbers
  // levels) logged on this thread: true where a scope held it.
  static bool holdOnThisThread(int level, const char* message);

 private:
  void hold(const char* message);

  std::vector<std::string> distinct_;
  size_t count_ = 0;
};

}  // namespace ringreduce
